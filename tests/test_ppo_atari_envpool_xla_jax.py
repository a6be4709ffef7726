"""cleanrl/ppo_atari_envpool_xla_jax.py and ppo_atari_envpool_xla_jax_scan.py: their jitted pieces, against each
other, against GAE as a plain loop, and against the PyTorch EnvPool wrapper's scripted games. What every script
does the same way is in test_scripts.py."""

from functools import partial

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.linen.initializers import constant, orthogonal
from flax.training.train_state import TrainState
from helpers import load_script
from test_ppo_atari_envpool import SCRIPTED_GAMES, SCRIPTED_STEPS

xla_jax = load_script("ppo_atari_envpool_xla_jax")
xla_jax_scan = load_script("ppo_atari_envpool_xla_jax_scan")
VARIANTS = [xla_jax, xla_jax_scan]
LOSS_SETTINGS = dict(clip_coef=0.1, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, norm_adv=True)


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_only_flags_that_take_effect_are_offered(module):
    fields = module.Args.__dataclass_fields__
    assert not {"cuda", "torch_deterministic", "capture_video"} & set(fields)
    assert fields["clip_vloss"].default is False


def plain_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """GAE as a plain loop, one environment at a time, in float64: dones[t] is 1 where obs t starts a new episode,
    next_value and next_done belong to the observation after the last step."""
    num_steps, num_envs = rewards.shape
    advantages = np.zeros((num_steps, num_envs))
    for env in range(num_envs):
        lastgaelam = 0.0
        for t in reversed(range(num_steps)):
            if t == num_steps - 1:
                following_done, following_value = next_done[env], next_value[env]
            else:
                following_done, following_value = dones[t + 1, env], values[t + 1, env]
            delta = rewards[t, env] + gamma * following_value * (1 - following_done) - values[t, env]
            lastgaelam = delta + gamma * gae_lambda * (1 - following_done) * lastgaelam
            advantages[t, env] = lastgaelam
    return advantages, advantages + values


def test_plain_gae_by_hand_across_an_episode_boundary():
    """One environment, three steps; the episode ends after step 1, so obs 2 starts a new one."""
    rewards = np.array([[1.0], [2.0], [3.0]])
    values = np.array([[0.5], [1.0], [1.5]])
    advantages, _ = plain_gae(rewards, values, np.array([[0.0], [0.0], [1.0]]), [2.0], [0.0], 0.9, 0.8)
    # step 2 bootstraps from next_value; step 1 ends the episode (no bootstrap); step 0 sees step 1
    a2 = 3.0 + 0.9 * 2.0 - 1.5
    a1 = 2.0 - 1.0
    a0 = 1.0 + 0.9 * 1.0 - 0.5 + 0.9 * 0.8 * a1
    np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2])


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_gae_equals_a_plain_loop(module):
    rng = np.random.default_rng(0)
    rewards, values = rng.normal(size=(2, 9, 3)).astype(np.float32)
    dones = (rng.random((9, 3)) < 0.25).astype(np.float32)
    next_value = rng.normal(size=3).astype(np.float32)
    next_done = np.array([0.0, 1.0, 0.0], np.float32)
    expected = plain_gae(rewards, values, dones, next_value, next_done, 0.99, 0.95)
    advantages, returns = module.compute_gae(rewards, values, dones, next_value, next_done, 0.99, 0.95)
    np.testing.assert_allclose(advantages, expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(returns, expected[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_fixed_shape_episode_statistics_count_the_games_of_the_pytorch_wrapper(module):
    """The scripted steps of the PyTorch wrapper's test (lives, reset steps, a game over and a truncation), through
    the jitted step of the fixed-shape statistics: the same games end, with the same returns and lengths."""
    stats = module.no_episodes(2)
    step = jax.jit(lambda stats, infos, truncations: stats.step(infos, truncations))
    games = []
    for rewards, _, games_over, truncations in SCRIPTED_STEPS:
        infos = {"reward": jnp.array(rewards, jnp.float32), "terminated": jnp.array(games_over, jnp.int32)}
        stats, infos = step(stats, infos, jnp.array(truncations))
        games.append(module.finished_episodes(infos))
    assert games == SCRIPTED_GAMES
    assert stats.episode_returns.tolist() == [2.0, 0.0]
    assert stats.episode_lengths.tolist() == [2, 1]
    # the fixed-shape summary: each environment's last finished game
    assert stats.returned_episode_returns.tolist() == [13.0, 3.0]
    assert stats.returned_episode_lengths.tolist() == [4, 2]


@pytest.mark.parametrize(("features", "size", "stride", "width"), [(32, 8, 4, 84), (64, 4, 2, 20), (64, 3, 1, 9)])
def test_scan_variants_convolution_equals_flax_conv(features, size, stride, width):
    x = jax.random.normal(jax.random.PRNGKey(0), (2, width, width, 5))
    settings = dict(kernel_size=(size, size), strides=(stride, stride), padding="VALID")
    initialisation = dict(kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))
    flax_conv = nn.Conv(features, **settings, **initialisation)
    params = jax.jit(flax_conv.init)(jax.random.PRNGKey(1), x)
    ours = xla_jax_scan.Conv(features, **settings, **initialisation)
    assert jax.tree.map(jnp.shape, jax.eval_shape(ours.init, jax.random.PRNGKey(1), x)) == jax.tree.map(
        jnp.shape, params
    )
    np.testing.assert_allclose(
        jax.jit(ours.apply)(params, x), jax.jit(flax_conv.apply)(params, x), rtol=1e-4, atol=1e-4
    )


def init_params(module, obs, key=jax.random.PRNGKey(1)):
    network_key, actor_key, critic_key = jax.random.split(key, 3)
    return module.Agent(4).init(network_key, actor_key, critic_key, obs)


def test_both_variants_build_the_same_agent_and_load_each_others_models(tmp_path):
    """The same parameter tree and the same outputs; a model file written as the scripts write it (the arguments
    and the parameters) plays whole games in either variant's evaluate."""
    obs = jax.random.randint(jax.random.PRNGKey(0), (2, 4, 84, 84), 0, 256).astype(jnp.uint8)
    params = init_params(xla_jax, obs)
    assert jax.tree.map(jnp.shape, jax.eval_shape(partial(init_params, xla_jax_scan), obs)) == jax.tree.map(
        jnp.shape, params
    )
    key = jax.random.PRNGKey(2)
    outputs = (m.Agent(4).get_action_and_value(params, obs, key) for m in (xla_jax_scan, xla_jax))
    for got, expected in zip(*outputs):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    model = tmp_path / "model.cleanrl_model"
    model.write_bytes(flax.serialization.to_bytes([{"env_id": "Breakout-v5"}, params]))
    returns = xla_jax_scan.evaluate(model, "Breakout-v5", 2, seed=3)
    assert len(returns) == 2 and all(value >= 0 and value == int(value) for value in returns)


# ---- the update, on small frames (the network's smallest input: 36 x 36) so that it compiles in a moment ----------


def tiny_batch(num_samples=32):
    """An agent state and a flattened batch (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values,
    b_valid) of the sizes the update takes, a fifth of it EnvPool's reset steps (b_valid = 0)."""
    rng = np.random.default_rng(1)
    obs = rng.integers(0, 256, size=(num_samples, 4, 36, 36)).astype(np.uint8)
    params = init_params(xla_jax, obs)
    state = TrainState.create(
        apply_fn=None,
        params=params,
        tx=optax.chain(optax.clip_by_global_norm(0.5), optax.inject_hyperparams(optax.adam)(learning_rate=0.01)),
    )
    actions = rng.integers(0, 4, size=num_samples).astype(np.int32)
    logprobs = rng.normal(-1.4, 0.1, size=num_samples).astype(np.float32)
    advantages, returns, values = rng.normal(size=(3, num_samples)).astype(np.float32)
    valid = (rng.random(num_samples) > 0.2).astype(np.float32)
    return state, (obs, actions, logprobs, advantages, returns, values, valid)


@pytest.fixture(scope="module")
def update_minibatch():
    return jax.jit(partial(xla_jax.update_minibatch, agent=xla_jax.Agent(4), **LOSS_SETTINGS))


def assert_same_params(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5), a.params, b.params)


def test_the_scanned_epoch_equals_the_loop_over_minibatches(update_minibatch):
    state, b = tiny_batch()
    minibatches = np.random.default_rng(2).permutation(32).reshape(4, 8)
    looped, looped_infos = state, []
    for mb_inds in minibatches:
        looped, info = update_minibatch(looped, b, mb_inds)
        looped_infos.append(info)
    # the same network in both (the scan variant's own convolution rounds differently), so only the scan differs
    update_epoch = jax.jit(partial(xla_jax_scan.update_epoch, agent=xla_jax.Agent(4), **LOSS_SETTINGS))
    scanned, scanned_infos = update_epoch(state, b, minibatches)
    assert_same_params(looped, scanned)
    for got, expected in zip(scanned_infos, zip(*looped_infos)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_the_learning_rate_set_in_the_optimizer_state_takes_effect(update_minibatch):
    """The loop anneals the rate by writing it into the state that optax.inject_hyperparams keeps for it."""
    state, b = tiny_batch()
    state.opt_state[1].hyperparams["learning_rate"] = 0.0
    new_state, _ = update_minibatch(state, b, np.arange(8))
    assert_same_params(state, new_state)
    assert float(new_state.opt_state[1].hyperparams["learning_rate"]) == 0.0
    state.opt_state[1].hyperparams["learning_rate"] = 0.01
    new_state, _ = update_minibatch(state, b, np.arange(8))
    kernel = state.params.actor_params["params"]["Dense_0"]["kernel"]
    assert not np.allclose(new_state.params.actor_params["params"]["Dense_0"]["kernel"], kernel)


def test_reset_steps_take_no_part_in_the_update(update_minibatch):
    """A sample whose b_valid is 0 (EnvPool's reset step) changes neither the step nor the logged losses."""
    state, b = tiny_batch()
    obs, actions, logprobs, advantages, returns, values, valid = b
    masked = int(np.flatnonzero(valid == 0)[0])
    changed = [x.copy() for x in b]
    changed[2][masked], changed[3][masked], changed[4][masked] = -5.0, 100.0, -100.0
    mb_inds = np.arange(32)
    (new, info), (changed_new, changed_info) = (
        update_minibatch(state, batch, mb_inds) for batch in (b, tuple(changed))
    )
    assert_same_params(new, changed_new)
    for a, c in zip(info, changed_info):
        np.testing.assert_allclose(a, c, rtol=1e-6)
    # and a valid sample does change them
    changed[3][int(np.flatnonzero(valid == 1)[0])] = 100.0
    assert not np.allclose(update_minibatch(state, tuple(changed), mb_inds)[1][0], info[0])


def test_without_exclude_reset_steps_every_sample_counts(update_minibatch):
    """b_valid None, the default (the reference's update): the means are over all the samples, as with b_valid 1
    everywhere, to float rounding."""
    state, b = tiny_batch()
    every = (*b[:-1], None)
    ones = (*b[:-1], np.ones(32, np.float32))
    (new, info), (ones_new, ones_info) = (update_minibatch(state, batch, np.arange(32)) for batch in (every, ones))
    assert_same_params(new, ones_new)
    for a, c in zip(info, ones_info):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-7)
