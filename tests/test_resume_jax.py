"""--checkpoint-every and --resume in the JAX scripts (CONVENTIONS §7, cleanrl_utils/checkpoint/jax_calls.py):
EnvPool's environments step inside XLA, so the learner resumes exactly and the environments restart. A tiny run of
each, killed with SIGKILL after its second checkpoint, then resumed: one line says the environments restart, every
step is logged once up to the run's last, the learning rate's annealing goes on from the checkpoint; the learner that
restore_jax gives back is the checkpoint's, leaf for leaf and bit for bit; other flags end in one line and exit 2."""

import random
import shutil
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState
from helpers import SCRIPTS, assert_user_error, load_script, read_scalars, run_script
from test_resume import env, killed_after_second_checkpoint

from cleanrl_utils import checkpoint

NAMES = ["ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan"]
# 10 iterations of 2 x 4 steps, one minibatch, one epoch: the least the compiler has to unroll
TINY = ("--num-envs", "2", "--num-steps", "4", "--total-timesteps", "80", "--num-minibatches", "1")
TINY += ("--update-epochs", "1")
ITERATIONS = 10


@pytest.fixture(scope="module", params=NAMES)
def stopped_and_resumed(request, tmp_path_factory):
    """(script, the run's folder once resumed to its end, a copy of the killed run's folder, its iteration, the
    resumed run's output)."""
    script = f"{request.param}.py"
    cwd = tmp_path_factory.mktemp(request.param)
    run_dir, iteration = killed_after_second_checkpoint(script, TINY, cwd)
    killed = cwd / "killed" / "runs" / run_dir.name
    shutil.copytree(run_dir, killed)
    proc = run_script(script, *TINY, "--resume", run_dir, cwd=cwd, env=env(), timeout=300)
    return script, run_dir, killed, iteration, proc.stdout


def test_the_resumed_run_restarts_the_environments_and_logs_every_step_once(stopped_and_resumed):
    script, run_dir, _, iteration, stdout = stopped_and_resumed
    notice = [line for line in stdout.splitlines() if "the environments restart" in line]
    lost = "Breakout-v5's state cannot be saved (AtariGymnasiumEnvPool's environments)"
    assert notice == [
        f"{script}: {lost}: the environments restart (EnvPool seeds them only when made: with --seed); "
        "the learner goes on exactly"
    ]
    assert f"resumed runs/{run_dir.name} at iteration {iteration}, step {8 * iteration}" in stdout
    scalars = read_scalars(run_dir)
    for tag in ("charts/learning_rate", "losses/value_loss", "charts/avg_episodic_return", "charts/SPS"):
        assert [step for step, _ in scalars[tag]] == [8 * (i + 1) for i in range(ITERATIONS)], tag
    rates = [rate for _, rate in scalars["charts/learning_rate"]]
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == ITERATIONS  # the annealing went on
    # the run ended with a checkpoint of its last iteration, which marks it finished
    assert checkpoint.read(run_dir / checkpoint.FILE)["iteration"] == ITERATIONS


def fresh_learner(module, args):
    """A learner built as the script builds it (the script's network classes and optimizer; other random keys)."""
    network, actor, critic = module.Network(), module.Actor(action_dim=4), module.Critic()
    obs = np.zeros((1, 4, 84, 84))
    key = jax.random.PRNGKey(0)
    network_params = network.init(key, obs)
    hidden = network.apply(network_params, obs)
    params = module.AgentParams(network_params, actor.init(key, hidden), critic.init(key, hidden))
    adam = optax.inject_hyperparams(optax.adam)(learning_rate=lambda count: args.learning_rate, eps=1e-5)
    agent_state = TrainState.create(
        apply_fn=None, params=params, tx=optax.chain(optax.clip_by_global_norm(args.max_grad_norm), adam)
    )
    zeros = jnp.zeros(args.num_envs)
    return agent_state, key, module.EpisodeStatistics(zeros, zeros, zeros, zeros)


def test_restore_jax_gives_back_the_saved_learner_bitwise(stopped_and_resumed, monkeypatch, capsys):
    """restore_jax, in this process, on a freshly built learner: every leaf of the TrainState (parameters, optimizer
    state and step counts), the key and the finished games' statistics as saved; the games under way start at 0."""
    script, _, killed, iteration, _ = stopped_and_resumed
    saved = checkpoint.read(killed / checkpoint.FILE)
    module = load_script(script.removesuffix(".py"))
    args = module.Args(**{**saved["args"], "resume": str(killed)})
    monkeypatch.chdir(killed.parent.parent)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGTERM)}
    envs = module.make_env(args.env_id, args.num_envs, args.seed)
    try:
        checkpoint.begin(args, SCRIPTS / script, "unused")
        envs.reset()
        first, global_step, _, next_obs, *learner = checkpoint.restore_jax(envs, *fresh_learner(module, args))
    finally:
        envs.close()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert (first, global_step, next_obs.shape) == (iteration + 1, 8 * iteration, (2, 4, 84, 84))
    assert f"resumed runs/{killed.name} at iteration {iteration}" in capsys.readouterr().out
    assert random.getstate() == saved["random"]["python"]
    numpy_state = checkpoint.from_data(saved["random"]["numpy"])
    assert np.array_equal(np.random.get_state(legacy=False)["state"]["key"], numpy_state["state"]["key"])
    assert np.random.get_state(legacy=False)["state"]["pos"] == numpy_state["state"]["pos"]
    restored = checkpoint.named_arrays(learner)
    assert restored.keys() == saved["agent"].keys()
    assert {"[0].step", "[1]", "[2].returned_episode_returns"} <= restored.keys()
    assert any(path.startswith("[0].opt_state") for path in restored)
    under_way = {f"[2].{name}" for name in checkpoint.UNDER_WAY}
    for path, tensor in restored.items():
        array, expected = tensor.numpy(), saved["agent"][path].numpy()
        expected = np.zeros_like(expected) if path in under_way else expected
        assert array.dtype == expected.dtype and array.shape == expected.shape, path
        assert array.tobytes() == expected.tobytes(), path


def test_other_flags_are_one_line_and_exit_2(stopped_and_resumed, tmp_path):
    script, _, killed, _, _ = stopped_and_resumed
    before = sorted((p.name, p.stat().st_mtime_ns) for p in killed.iterdir())
    proc = run_script(
        script, *TINY, "--learning-rate", "1e-3", "--resume", killed, cwd=killed.parent.parent, check=False, env=env()
    )
    assert_user_error(proc, f"{script}: error: --resume:", "was run with --learning-rate 0.00025", "own flags")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in killed.iterdir()) == before
