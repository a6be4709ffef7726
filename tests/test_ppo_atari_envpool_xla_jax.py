"""cleanrl/ppo_atari_envpool_xla_jax.py and ppo_atari_envpool_xla_jax_scan.py: the reference's pieces of each (the
closures its program defines: compute_gae, update_ppo and its loss, step_env_wrappeed, linear_schedule), taken
from a tiny run of the script in this process, against GAE as a plain loop, the PPO loss written out in NumPy,
each other, and the PyTorch EnvPool wrapper's scripted games. What every script does the same way is in
test_scripts.py; the numbers of a whole run against the reference's are in test_conformance.py."""

import runpy
import sys

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState
from helpers import SCRIPTS, load_script
from test_ppo_atari_envpool import SCRIPTED_GAMES, SCRIPTED_STEPS

NAMES = ["ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan"]
# two iterations of 2 epochs of 2 minibatches of 8 samples, with the clipped value loss (the default, unclipped,
# is the reference's, which the conformance records check)
TINY = ["--num-envs", "2", "--num-steps", "8", "--total-timesteps", "32", "--num-minibatches", "2"]
TINY += ["--update-epochs", "2", "--clip-vloss"]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """{name: the globals of the script's program after a tiny run}: its closures, its args and its last state."""
    threefry = jax.config.jax_threefry_partitionable
    programs = {}
    for name in NAMES:
        # nothing the other script traced may stay cached for this one (conftest.no_jax_traces_of_other_tests)
        jax.clear_caches()
        cwd = tmp_path_factory.mktemp(name)
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(cwd)
            patch.setattr(sys, "argv", [str(SCRIPTS / f"{name}.py"), *TINY])
            programs[name] = runpy.run_path(str(SCRIPTS / f"{name}.py"), run_name="__main__")
    yield programs
    jax.config.update("jax_threefry_partitionable", threefry)  # the scripts set it for their run


def test_no_trace_of_the_tiny_runs_is_left_for_a_test(programs):
    """Both runs compiled update_ppo in this process; each test starts with JAX's caches empty again, so that no
    trace made for one script's classes reaches the other's (conftest.no_jax_traces_of_other_tests)."""
    assert [programs[name]["update_ppo"]._cache_size() for name in NAMES] == [0, 0]


@pytest.mark.parametrize("name", NAMES)
def test_only_flags_that_take_effect_are_offered(name):
    fields = load_script(name).Args.__dataclass_fields__
    # no device or video settings (JAX picks its device, EnvPool's XLA step gives no frames), no early stop or
    # reset-step mask (the jitted update can do neither), and the clipped value loss off, as the reference computes
    assert not {"cuda", "torch_deterministic", "capture_video", "target_kl", "exclude_reset_steps"} & set(fields)
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
                following_done = next_done[env]
                following_value = next_value[env]
            else:
                following_done = dones[t + 1, env]
                following_value = values[t + 1, env]
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


def random_storage(program, seed=0):
    """The program's last storage with random rewards, values, dones, log-probabilities, advantages and returns."""
    rng = np.random.default_rng(seed)
    storage = program["storage"]
    shape = storage.rewards.shape
    return storage.replace(
        rewards=rng.normal(size=shape).astype(np.float32),
        values=rng.normal(size=shape).astype(np.float32),
        dones=(rng.random(shape) < 0.25).astype(np.float32),
        logprobs=rng.normal(-1.4, 0.3, size=shape).astype(np.float32),
        advantages=rng.normal(size=shape).astype(np.float32),
        returns=rng.normal(size=shape).astype(np.float32),
    )


@pytest.mark.parametrize("name", NAMES)
def test_compute_gae_equals_a_plain_loop(programs, name):
    program = programs[name]
    args = program["args"]
    storage = random_storage(program)
    obs = program["obs"]
    next_done = np.array([0.0, 1.0], np.float32)
    gae = program["compute_gae"](program["agent_state"], obs, next_done, storage)
    params = program["agent_state"].params
    hidden = program["network"].apply(params.network_params, obs)
    next_value = np.asarray(program["critic"].apply(params.critic_params, hidden)).squeeze()
    rewards, values, dones = (np.asarray(x) for x in (storage.rewards, storage.values, storage.dones))
    expected = plain_gae(rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda)
    np.testing.assert_allclose(gae.advantages, expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gae.returns, expected[1], rtol=1e-5, atol=1e-5)


def last_minibatch(key, args):
    """The samples of update_ppo's last minibatch: each epoch splits the key and permutes the batch with it."""
    for _ in range(args.update_epochs):
        key, subkey = jax.random.split(key)
    permutation = np.asarray(jax.random.permutation(subkey, args.batch_size, independent=True))
    return permutation[-args.minibatch_size :]


def numpy_ppo_loss(program, storage, inds):
    """The clipped PPO loss with the clipped value loss, written out in NumPy from the network's outputs."""
    args = program["args"]
    params = program["agent_state"].params
    obs = np.asarray(storage.obs).reshape((-1,) + storage.obs.shape[2:])[inds]
    actions = np.asarray(storage.actions).reshape(-1)[inds]
    logprobs, advantages, returns, values = (
        np.asarray(x, np.float64).reshape(-1)[inds]
        for x in (storage.logprobs, storage.advantages, storage.returns, storage.values)
    )
    logits = np.asarray(
        program["actor"].apply(params.actor_params, program["network"].apply(params.network_params, obs))
    )
    logits = logits.astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    newlogprob = log_p[np.arange(len(actions)), actions]
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    hidden = program["network"].apply(params.network_params, obs)
    newvalue = np.asarray(program["critic"].apply(params.critic_params, hidden), np.float64)[:, 0]
    logratio = newlogprob - logprobs
    ratio = np.exp(logratio)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = np.maximum(-advantages * ratio, -advantages * np.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef))
    v_clipped = values + np.clip(newvalue - values, -args.clip_coef, args.clip_coef)
    v_loss = 0.5 * np.maximum((newvalue - returns) ** 2, (v_clipped - returns) ** 2).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss.mean() - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = (np.abs(ratio - 1.0) > args.clip_coef).mean()
    return dict(
        loss=loss,
        pg_loss=pg_loss.mean(),
        v_loss=v_loss,
        entropy_loss=entropy_loss,
        approx_kl=approx_kl,
        old_approx_kl=(-logratio).mean(),
        clipfrac=clipfrac,
    )


def update(program, agent_state, storage, key):
    """update_ppo's new state and its losses by name (the scan variant's: those of the last minibatch)."""
    agent_state, loss, pg_loss, v_loss, entropy_loss, approx_kl, key, old_approx_kl, clipfrac = program["update_ppo"](
        agent_state, storage, key
    )
    losses = dict(
        loss=loss,
        pg_loss=pg_loss,
        v_loss=v_loss,
        entropy_loss=entropy_loss,
        approx_kl=approx_kl,
        old_approx_kl=old_approx_kl,
        clipfrac=clipfrac,
    )
    return agent_state, {name: np.asarray(value).reshape(-1)[-1] for name, value in losses.items()}


@pytest.mark.parametrize("name", NAMES)
def test_update_ppo_minimises_the_ppo_loss(programs, name):
    """With a learning rate of 0 the parameters stay, so the losses update_ppo returns, those of its last
    minibatch, are the PPO loss of the run's agent on those samples, as written out in NumPy."""
    program = programs[name]
    storage = random_storage(program, seed=1)
    frozen = TrainState.create(apply_fn=None, params=program["agent_state"].params, tx=optax.sgd(0.0))
    key = jax.random.PRNGKey(5)
    _, losses = update(program, frozen, storage, key)
    expected = numpy_ppo_loss(program, storage, last_minibatch(key, program["args"]))
    assert 0 < expected["clipfrac"] < 1, "the samples should clip some ratios and not others"
    for loss_name, value in expected.items():
        np.testing.assert_allclose(losses[loss_name], value, rtol=2e-4, atol=1e-6, err_msg=loss_name)


def test_the_scanned_update_equals_the_loops(programs):
    """The scan variant's lesson: the same update as jax.lax.scan over epochs and minibatches, to float rounding."""
    xla_jax, scan = (programs[name] for name in NAMES)
    storage = random_storage(xla_jax, seed=2)
    key = jax.random.PRNGKey(7)
    # the run's optimizer has annealed its rate to 0 by now: a fresh Adam, as the scripts chain it
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(2.5e-4, eps=1e-5))
    agent_state = TrainState.create(apply_fn=None, params=xla_jax["agent_state"].params, tx=tx)
    looped = update(xla_jax, agent_state, storage, key)
    scanned = update(scan, agent_state, storage, key)
    moved = [np.abs(new - old).max() for new, old in zip(*map(jax.tree.leaves, (looped[0].params, agent_state.params)))]
    assert min(moved) > 1e-6, "every parameter should move"
    for got, expected in zip(jax.tree.leaves(scanned[0].params), jax.tree.leaves(looped[0].params)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    for loss_name, value in looped[1].items():
        np.testing.assert_allclose(scanned[1][loss_name], value, rtol=1e-4, atol=1e-6, err_msg=loss_name)


@pytest.mark.parametrize("name", NAMES)
def test_the_learning_rate_anneals_once_per_iteration(programs, name):
    """linear_schedule: the rate of the first iteration for all its gradient steps, then one step down each."""
    program = programs[name]
    args = program["args"]
    steps = args.num_minibatches * args.update_epochs
    schedule = program["linear_schedule"]
    assert args.num_iterations == 2
    assert [float(schedule(count)) for count in (0, steps - 1, steps, 2 * steps - 1)] == pytest.approx(
        [2.5e-4, 2.5e-4, 1.25e-4, 1.25e-4]
    )
    # the run's optimizer used it: after two iterations its rate is the second's
    assert float(program["agent_state"].opt_state[1].hyperparams["learning_rate"]) == pytest.approx(1.25e-4)


@pytest.mark.parametrize("name", NAMES)
def test_episode_statistics_count_the_games_of_the_pytorch_wrapper(programs, name):
    """The scripted steps of the PyTorch wrapper's test (lives, reset steps, a game over and a truncation), through
    the program's step_env_wrappeed in place of EnvPool's step, then finished_episodes: the same games end, at the
    same steps, with the same returns and lengths."""
    program = programs[name]
    wrapped = program["step_env_wrappeed"]
    scripted = iter(SCRIPTED_STEPS)

    def step_env(handle, action):
        rewards, terminations, games_over, truncations = next(scripted)
        info = {"reward": jnp.array(rewards, jnp.float32), "terminated": jnp.array(games_over, jnp.int32)}
        return handle, (None, jnp.array(rewards), jnp.array(terminations), jnp.array(truncations), info)

    original = wrapped.__globals__["step_env"]
    wrapped.__globals__["step_env"] = step_env
    try:
        stats = program["EpisodeStatistics"](
            episode_returns=jnp.zeros(2, dtype=jnp.float32),
            episode_lengths=jnp.zeros(2, dtype=jnp.int32),
            returned_episode_returns=jnp.zeros(2, dtype=jnp.float32),
            returned_episode_lengths=jnp.zeros(2, dtype=jnp.int32),
        )
        episodes = []
        for _ in SCRIPTED_STEPS:
            stats, _, _ = wrapped(stats, None, None)
            episodes.append(stats)
    finally:
        wrapped.__globals__["step_env"] = original
    stacked = jax.tree.map(lambda *steps: np.stack(steps), *episodes)
    global_step = 2 * len(SCRIPTED_STEPS)
    expected = [(2 * (step + 1), *game) for step, games in enumerate(SCRIPTED_GAMES) for game in games]
    assert [(int(s), r, length) for s, r, length in load_script(name).finished_episodes(stacked, global_step)] == (
        expected
    )
    assert stats.episode_returns.tolist() == [2.0, 0.0]
    assert stats.episode_lengths.tolist() == [2, 1]
    # the fixed-shape summary: each environment's last finished game
    assert stats.returned_episode_returns.tolist() == [13.0, 3.0]
    assert stats.returned_episode_lengths.tolist() == [4, 2]


def test_either_variant_replays_a_model_the_other_saved(programs, tmp_path):
    """A model file written as the scripts write it (the arguments, then the three modules' parameters) plays whole
    games in the other variant's evaluate."""
    params = programs[NAMES[0]]["agent_state"].params
    model = tmp_path / "model.cleanrl_model"
    trained = [params.network_params, params.actor_params, params.critic_params]
    model.write_bytes(flax.serialization.to_bytes([{"env_id": "Breakout-v5"}, trained]))
    returns = load_script(NAMES[1]).evaluate(model, "Breakout-v5", 2, seed=3)
    assert len(returns) == 2 and all(value >= 0 and value == int(value) for value in returns)
