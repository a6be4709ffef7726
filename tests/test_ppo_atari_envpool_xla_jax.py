"""cleanrl/ppo_atari_envpool_xla_jax.py and its twin ppo_atari_envpool_xla_jax_scan.py: runs through the command line,
and unit tests of their jitted pieces against each other and against the PyTorch scripts."""

import functools
import json
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState
from helpers import (
    COMMON_METRICS,
    assert_user_error,
    fake_hub_env,
    load_script,
    only_run_dir,
    read_scalars,
    read_text_tags,
    run_copied_alone,
    run_script,
    script_env,
)

# 2 environments x 256 steps: a fresh policy plays a whole game of Breakout (5 lives) in 120 to 250 steps;
# 2 epochs of 2 minibatches keep the compilation of the unrolled update short
TINY = ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "512", "--update-epochs", "2"]
TINY += ["--num-minibatches", "2"]
# one thread for XLA and PyTorch: the machine running the tests is usually busy, and threads then wait on each other
LIGHT = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1", "OMP_NUM_THREADS": "1"}
JAX_METRICS = COMMON_METRICS | {"charts/avg_episodic_return", "charts/avg_episodic_length"}

xla_jax = load_script("ppo_atari_envpool_xla_jax")
xla_jax_scan = load_script("ppo_atari_envpool_xla_jax_scan")
VARIANTS = [xla_jax, xla_jax_scan]


def check_run(run_dir, module, record):
    """What a tiny run with --save-model --upload-model --hf-entity my-org leaves behind."""
    name = module.__name__
    assert run_dir.name.startswith(f"Breakout-v5__{name}__1__")
    scalars = read_scalars(run_dir)
    assert JAX_METRICS <= set(scalars), JAX_METRICS - set(scalars)
    assert "hyperparameters/text_summary" in read_text_tags(run_dir)
    assert [step for step, _ in scalars["charts/SPS"]] == list(range(64, 513, 64))
    assert [step for step, _ in scalars["charts/first_iteration_seconds"]] == [64]
    # whole games: unclipped scores (whole points in Breakout) and lengths in agent steps, several lives long
    games = scalars["charts/episodic_return"]
    assert len(games) >= 1 and all(value >= 0 and value == int(value) for _, value in games)
    assert all(value > 50 for _, value in scalars["charts/episodic_length"])
    # the model file holds the arguments and the Flax parameters, which evaluation loaded
    agent = module.Agent(action_dim=4)
    saved_args, params = module.load_model(run_dir / f"{name}.cleanrl_model", agent, (4, 84, 84))
    assert saved_args["env_id"] == "Breakout-v5" and saved_args["num_envs"] == 2
    assert params["params"]["network"]["Conv_0"]["kernel"].shape == (8, 8, 4, 32)
    assert [step for step, _ in scalars["eval/episodic_return"]] == list(range(10))
    uploaded = json.loads(record.read_text())
    assert uploaded["created"] == uploaded["uploaded"] == f"my-org/Breakout-v5-{name}-seed1"
    assert {f"{name}.cleanrl_model", f"{name}.py", "README.md"} <= set(uploaded["files"])
    assert "flax.serialization" in uploaded["card"]


UPLOAD = ["--save-model", "--upload-model", "--hf-entity", "my-org"]


def test_xla_jax_trains_saves_evaluates_and_uploads(tmp_path):
    env, record = fake_hub_env(tmp_path, **LIGHT)
    proc = run_script("ppo_atari_envpool_xla_jax.py", *TINY, *UPLOAD, cwd=tmp_path, env=env)
    assert "first iteration, compilation included" in proc.stdout and "[100%] step 512/512" in proc.stdout
    check_run(only_run_dir(tmp_path), xla_jax, record)


def test_scan_variant_copied_alone_trains_saves_evaluates_and_uploads(tmp_path):
    env, record = fake_hub_env(tmp_path, **LIGHT)
    run_dir = run_copied_alone("ppo_atari_envpool_xla_jax_scan.py", *TINY, *UPLOAD, tmp_path=tmp_path, env=env)
    check_run(run_dir, xla_jax_scan, record)


@pytest.mark.parametrize(
    ("script", "args", "fragments"),
    [
        ("ppo_atari_envpool_xla_jax.py", ["--env-id", "CartPole-v1"], ["needs one of EnvPool's Atari games", "ppo.py"]),
        ("ppo_atari_envpool_xla_jax_scan.py", ["--env-id", "Pong-v4"], ["cannot make environment", "Pong-v5"]),
        ("ppo_atari_envpool_xla_jax_scan.py", ["--num-minibatches", "3"], ["does not divide", "--num-minibatches 3"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, script, args, fragments):
    proc = run_script(script, *args, cwd=tmp_path, check=False, timeout=120, env=script_env(**LIGHT))
    assert_user_error(proc, f"{script}: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_only_flags_that_take_effect_are_offered(module):
    fields = module.Args.__dataclass_fields__
    assert not {"cuda", "torch_deterministic", "capture_video"} & set(fields)
    assert fields["clip_vloss"].default is False


# ---- unit tests of the jitted pieces -----------------------------------------------------------------------------


def test_gae_loop_scan_and_pytorch_scripts_agree():
    """The unrolled loop, the reversed scan and ppo.py's NumPy recursion give the same advantages and returns."""
    rng = np.random.default_rng(0)
    rewards, values = rng.normal(size=(2, 9, 3)).astype(np.float32)
    dones = (rng.random((9, 3)) < 0.25).astype(np.float32)
    next_value = rng.normal(size=3).astype(np.float32)
    next_done = np.array([0.0, 1.0, 0.0], np.float32)
    expected = load_script("ppo").compute_gae(rewards, values, dones, next_value, next_done, 0.99, 0.95)
    for compute_gae in (xla_jax.compute_gae, xla_jax_scan.compute_gae):
        jitted = jax.jit(partial(compute_gae, gamma=0.99, gae_lambda=0.95))
        for advantages, returns in (
            compute_gae(rewards, values, dones, next_value, next_done, 0.99, 0.95),
            jitted(rewards, values, dones, next_value, next_done),
        ):
            np.testing.assert_allclose(advantages, expected[0], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(returns, expected[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_fixed_shape_episode_statistics_match_the_pytorch_variants(module):
    """The same synthetic steps as ppo_atari_envpool.py's test: lives, reset steps, a game over and a truncation."""
    f, t = False, True
    steps = [
        ([1.0, 4.0], [f, f], [f, f]),
        ([7.0, 0.0], [t, f], [f, f]),
        ([0.0, 2.0], [f, t], [f, t]),
        ([5.0, 0.0], [t, f], [t, f]),
        ([0.0, 3.0], [f, t], [f, t]),
        ([2.0, 0.0], [f, f], [f, f]),
    ]
    reference = load_script("ppo_atari_envpool").EpisodeStatistics(2)
    stats = module.EpisodeStatistics.zeros(2)
    step = jax.jit(lambda s, r, d, g: s.step(r, d, g))
    for rewards, dones, game_overs in steps:
        expected = reference.step(np.array(rewards), np.array(dones), np.array(game_overs))
        stats, returns, lengths = step(stats, jnp.array(rewards), jnp.array(dones), jnp.array(game_overs))
        ended = np.flatnonzero(game_overs)
        assert list(zip(np.asarray(returns)[ended].tolist(), np.asarray(lengths)[ended].tolist())) == expected
    assert stats.returns.tolist() == reference.returns.tolist() and stats.lengths.tolist() == [1, 0]
    # the fixed-shape summary: each environment's last finished game
    assert stats.games.tolist() == [1, 2]
    assert stats.last_returns.tolist() == [13.0, 3.0] and stats.last_lengths.tolist() == [3, 1]


@pytest.mark.parametrize(("features", "size", "stride", "width"), [(32, 8, 4, 84), (64, 4, 2, 20), (64, 3, 1, 9)])
def test_scan_variants_convolution_equals_flax_conv(features, size, stride, width):
    x = jax.random.normal(jax.random.PRNGKey(0), (2, width, width, 5))
    flax_conv = nn.Conv(features, (size, size), (stride, stride), padding="VALID")
    params = jax.jit(flax_conv.init)(jax.random.PRNGKey(1), x)
    ours = xla_jax_scan.Conv(features, size, stride)
    assert jax.tree.map(jnp.shape, jax.eval_shape(ours.init, jax.random.PRNGKey(1), x)) == jax.tree.map(
        jnp.shape, params
    )
    np.testing.assert_allclose(
        jax.jit(ours.apply)(params, x), jax.jit(flax_conv.apply)(params, x), rtol=1e-4, atol=1e-4
    )


def test_both_variants_build_the_same_agent():
    """The same parameter tree, the same outputs: a model saved by one variant loads into the other."""
    obs = jax.random.randint(jax.random.PRNGKey(0), (2, 4, 84, 84), 0, 256).astype(jnp.uint8)
    params = xla_jax.Agent(6).init(jax.random.PRNGKey(1), obs)
    scan_shapes = jax.eval_shape(xla_jax_scan.Agent(6).init, jax.random.PRNGKey(1), obs)
    assert jax.tree.map(jnp.shape, scan_shapes) == jax.tree.map(jnp.shape, params)
    outputs = (module.Agent(6).apply(params, obs) for module in (xla_jax_scan, xla_jax))
    for got, expected in zip(*outputs):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


class TinyAgent(nn.Module):
    """A small stand-in with the Agent's interface, so the update compiles in a moment."""

    action_dim: int = 3

    @nn.compact
    def __call__(self, x):
        hidden = nn.tanh(nn.Dense(16)(x))
        return nn.Dense(self.action_dim)(hidden), nn.Dense(1)(hidden)[:, 0]


def tiny_update_inputs(num_steps=8, num_envs=4):
    rng = np.random.default_rng(1)
    agent = TinyAgent()
    obs = rng.normal(size=(num_steps, num_envs, 5)).astype(np.float32)
    state = TrainState.create(
        apply_fn=agent.apply,
        params=agent.init(jax.random.PRNGKey(0), obs[0]),
        tx=optax.chain(optax.clip_by_global_norm(0.5), optax.inject_hyperparams(optax.adam)(learning_rate=0.01)),
    )
    logits, values = jax.vmap(partial(agent.apply, state.params))(obs)
    actions = rng.integers(0, 3, size=(num_steps, num_envs))
    logprobs = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits)), actions[..., None], -1)[..., 0]
    dones = (rng.random((num_steps, num_envs)) < 0.2).astype(np.float32)
    zeros = np.zeros((num_steps, num_envs), np.float32)
    batch = xla_jax.Transition(obs, dones, actions, logprobs, values, zeros, zeros, zeros, zeros)
    advantages, returns = rng.normal(size=(2, num_steps, num_envs)).astype(np.float32)
    return agent, state, batch, advantages, returns


@functools.cache
def jitted_update(module, epochs, target_kl):
    """module.update for TinyAgent, compiled once per setting for all the tests below."""
    loss_kwargs = dict(clip_coef=0.1, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, norm_adv=True)
    settings = dict(update_epochs=epochs, num_minibatches=2, target_kl=target_kl, loss_kwargs=loss_kwargs)
    return jax.jit(partial(module.update, agent=TinyAgent(), **settings))


def run_update(module, epochs, target_kl, learning_rate=0.01):
    _, state, batch, advantages, returns = tiny_update_inputs()
    update = jitted_update(module, epochs, target_kl)
    new_state, info, _ = update(state, batch, advantages, returns, jax.random.PRNGKey(3), jnp.float32(learning_rate))
    return state, new_state, info


def assert_same_params(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), a.params, b.params)


def test_unrolled_and_scanned_updates_agree():
    _, unrolled, unrolled_info = run_update(xla_jax, epochs=2, target_kl=None)
    _, scanned, scanned_info = run_update(xla_jax_scan, epochs=2, target_kl=None)
    assert_same_params(unrolled, scanned)
    for got, expected in zip(scanned_info, unrolled_info):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_target_kl_stops_after_the_epoch_that_crossed_it(module):
    # any change of the policy crosses a negative target: only the first epoch may run
    _, stopped, stopped_info = run_update(module, epochs=2, target_kl=-1.0)
    _, one_epoch, one_epoch_info = run_update(module, epochs=1, target_kl=None)
    assert_same_params(stopped, one_epoch)
    np.testing.assert_allclose(stopped_info.clipfrac, one_epoch_info.clipfrac, rtol=1e-5)
    np.testing.assert_allclose(stopped_info.approx_kl, one_epoch_info.approx_kl, rtol=1e-5)
    _, not_stopped, _ = run_update(module, epochs=2, target_kl=None)
    assert not np.allclose(
        not_stopped.params["params"]["Dense_0"]["kernel"], stopped.params["params"]["Dense_0"]["kernel"]
    )


@pytest.mark.parametrize("module", VARIANTS, ids=lambda m: m.__name__)
def test_the_injected_learning_rate_takes_effect(module):
    before, after, _ = run_update(module, epochs=1, target_kl=None, learning_rate=0.0)
    assert_same_params(before, after)
    assert optax.tree_utils.tree_get(after.opt_state, "learning_rate") == 0.0


def test_reset_steps_take_no_part_in_the_loss():
    """A sample whose valid flag is 0 (EnvPool's reset step) changes neither the loss nor its gradient."""
    agent, state, batch, advantages, returns = tiny_update_inputs()
    flat = lambda x: jnp.asarray(x).reshape((-1,) + jnp.shape(x)[2:])  # noqa: E731
    valid = 1.0 - flat(batch.dones)
    mb = xla_jax.Minibatch(
        flat(batch.obs),
        flat(batch.actions),
        flat(batch.logprobs),
        flat(advantages),
        flat(returns),
        flat(batch.values),
        valid,
    )
    masked = int(np.flatnonzero(np.asarray(valid) == 0)[0])
    changed = mb._replace(
        advantages=mb.advantages.at[masked].set(100.0),
        returns=mb.returns.at[masked].set(-100.0),
        logprobs=mb.logprobs.at[masked].set(-5.0),
    )
    kwargs = dict(clip_coef=0.1, clip_vloss=True, ent_coef=0.01, vf_coef=0.5, norm_adv=True)
    grad = jax.grad(xla_jax.ppo_loss, has_aux=True)
    for module in VARIANTS:
        (loss, info), (changed_loss, changed_info) = (
            module.ppo_loss(state.params, agent, m, **kwargs) for m in (mb, changed)
        )
        np.testing.assert_allclose(loss, changed_loss, rtol=1e-6)
        for a, b in zip(info, changed_info):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    (g, _), (changed_g, _) = (grad(state.params, agent, m, **kwargs) for m in (mb, changed))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8), g, changed_g)


@pytest.mark.parametrize("name", ["ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan"])
def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    load_script(name)
    assert list(tmp_path.iterdir()) == []
