"""cleanrl/ppo_continuous_action.py: MuJoCo (v4 and v5 ids) and dm_control runs, the saved normaliser,
and unit tests of the continuous-action pieces (Gaussian policy, observation and reward normalisation)."""

import textwrap

import numpy as np
import pytest
import torch
from helpers import (
    COMMON_METRICS,
    assert_same_scalars,
    assert_user_error,
    load_script,
    only_run_dir,
    read_scalars,
    run_copied_alone,
    run_script,
    script_env,
)

SCRIPT = "ppo_continuous_action.py"
TINY = ["--total-timesteps", "512", "--num-steps", "256", "--num-minibatches", "4", "--update-epochs", "2"]

ppo = load_script("ppo_continuous_action")


@pytest.fixture(scope="module")
def halfcheetah_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("halfcheetah")
    run_script(SCRIPT, *TINY, cwd=cwd)
    return cwd


def test_mujoco_v4_logs_every_metric(halfcheetah_run):
    run_dir = only_run_dir(halfcheetah_run)
    assert run_dir.name.startswith("HalfCheetah-v4__ppo_continuous_action__1__")
    scalars = read_scalars(run_dir)
    assert COMMON_METRICS - {"charts/episodic_return", "charts/episodic_length"} <= set(scalars)
    assert [step for step, _ in scalars["charts/SPS"]] == [256, 512]


def test_same_seed_logs_identical_scalars(halfcheetah_run, tmp_path):
    run_script(SCRIPT, *TINY, cwd=tmp_path)
    assert_same_scalars(only_run_dir(halfcheetah_run), only_run_dir(tmp_path))


@pytest.mark.parametrize("env_id", ["Hopper-v5", "dm_control/cartpole-balance-v0"])
def test_v5_and_dm_control_ids_train(tmp_path, env_id):
    run_script(SCRIPT, "--env-id", env_id, "--total-timesteps", "2048", "--num-steps", "1024", cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    scalars = read_scalars(run_dir)
    # dm_control episodes last 1000 steps: one finished, logged with its real (unnormalised) return
    assert COMMON_METRICS <= set(scalars)
    if env_id.startswith("dm_control"):
        assert run_dir.parent.name == "dm_control"
        assert [length for _, length in scalars["charts/episodic_length"]] == [1000.0, 1000.0]
        assert all(0 < ret <= 1000 for _, ret in scalars["charts/episodic_return"])


NARROW_ACTIONS_ENV = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np

    class NarrowActions(gym.Env):
        # actions must lie in [-0.1, 0.1]; a policy with standard deviation 1 samples far outside that
        observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        action_space = gym.spaces.Box(-0.1, 0.1, (3,), np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.array([100.0, -5.0]), {}

        def step(self, action):
            assert self.action_space.contains(np.asarray(action, np.float32)), action
            self.t += 1
            return np.array([100.0 + self.t, -5.0]), 50.0, self.t >= 20, False, {}

    gym.register("NarrowActions-v0", entry_point=NarrowActions)
    """
)


def test_actions_are_clipped_for_the_environment_and_returns_are_real(tmp_path):
    (tmp_path / "narrowenv.py").write_text(NARROW_ACTIONS_ENV)
    env = script_env(PYTHONPATH=str(tmp_path))
    args = ["--env-id", "narrowenv:NarrowActions-v0", "--num-steps", "64", "--num-minibatches", "2"]
    run_script(SCRIPT, *args, "--total-timesteps", "128", cwd=tmp_path, env=env)
    scalars = read_scalars(only_run_dir(tmp_path))
    # the logged return is the environment's (20 steps of 50), not the scaled reward the update sees
    assert {ret for _, ret in scalars["charts/episodic_return"]} == {1000.0}


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "CartPole-v1"], ["needs a Box action space", "use ppo.py"]),
        (["--env-id", "NoSuchRobot-v4"], ["cannot make environment 'NoSuchRobot-v4'"]),
        (["--num-minibatches", "3"], ["does not divide", "--num-minibatches 3"]),
        (["--num-steps", "0"], ["--num-steps must be positive"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script(SCRIPT, *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_continuous_action.py: error:", *fragments)


def test_saved_model_evaluates_with_its_frozen_statistics(tmp_path, monkeypatch):
    """The model file carries the observation statistics; evaluation uses them, and never updates them."""
    run_script(SCRIPT, "--env-id", "InvertedPendulum-v4", *TINY, "--save-model", cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    model_path = run_dir / "ppo_continuous_action.cleanrl_model"
    saved = torch.load(model_path)
    assert set(saved) == {"agent", "obs_rms"}
    saved_mean = saved["obs_rms"]["mean"].numpy()
    assert saved["obs_rms"]["count"].item() > 512 and np.abs(saved_mean).sum() > 0
    assert len(read_scalars(run_dir)["eval/episodic_return"]) == 10

    used = []

    def frozen_normalize(obs, obs_rms, update=True, **kwargs):
        assert not update, "evaluation must not update the saved statistics"
        used.append(obs_rms.mean.copy())
        return original_normalize(obs, obs_rms, update=update, **kwargs)

    original_normalize = ppo.normalize_obs
    monkeypatch.setattr(ppo, "normalize_obs", frozen_normalize)
    monkeypatch.chdir(tmp_path)
    returns = ppo.evaluate(str(model_path), "InvertedPendulum-v4", 3, "eval", torch.device("cpu"), False, seed=1)
    assert len(returns) == 3
    assert used and all(np.array_equal(mean, saved_mean) for mean in used)


def test_capture_video_headless(tmp_path):
    run_script(SCRIPT, "--env-id", "InvertedPendulum-v4", *TINY, "--capture-video", cwd=tmp_path)
    videos = list((tmp_path / "videos" / only_run_dir(tmp_path).name).glob("*.mp4"))
    assert videos and all(v.stat().st_size > 1000 for v in videos)


def test_script_runs_when_copied_alone(tmp_path):
    assert run_copied_alone(SCRIPT, "--env-id", "InvertedPendulum-v4", *TINY, tmp_path=tmp_path)


# ---- unit tests -------------------------------------------------------------------------------


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 50)]
    rms = ppo.RunningMeanStd(shape=(4,), epsilon=1e-12)
    for batch in batches:
        rms.update(batch)
    everything = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean, everything.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rms.var, everything.var(0), rtol=1e-6)


def test_normalize_obs_clips_and_can_freeze():
    rms = ppo.RunningMeanStd(shape=(2,))
    rms.mean, rms.var = np.array([1.0, -1.0]), np.array([4.0, 1e-6])
    out = ppo.normalize_obs(np.array([[3.0, 0.0]]), rms, update=False)
    np.testing.assert_allclose(out, [[1.0, 10.0]], rtol=1e-4)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(rms.mean, [1.0, -1.0])


def test_reward_scaler_uses_the_discounted_return_and_restarts_it():
    scaler = ppo.RewardScaler(num_envs=1, gamma=0.5)
    scaler(np.array([1.0]), np.array([False]))
    assert scaler.returns[0] == 1.0
    scaler(np.array([1.0]), np.array([False]))
    assert scaler.returns[0] == 1.5  # 1 * 0.5 + 1
    scaled = scaler(np.array([2.0]), np.array([True]))
    assert scaler.returns[0] == 0.0  # the episode ended: the next return starts afresh
    # the scale is the standard deviation of the returns seen: 1, 1.5 and 2.75
    expected = 2.0 / np.sqrt(np.var([1.0, 1.5, 2.75]) + 1e-8)
    np.testing.assert_allclose(scaled, [expected], rtol=1e-2)  # rtol: the tiny epsilon count of RunningMeanStd
    big = ppo.RewardScaler(num_envs=1, gamma=0.99)
    big.return_rms.var = np.array(1e-6)
    assert big(np.array([5.0]), np.array([False]))[0] <= 10.0


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    envs = ppo.make_vector_env("InvertedPendulum-v4", 1, False, "unused")
    agent = ppo.Agent(envs)
    envs.close()
    with torch.no_grad():
        agent.actor_logstd.fill_(-0.7)
    obs = torch.randn(6, 4)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    dist = torch.distributions.Normal(agent.actor_mean(obs), agent.actor_logstd.exp())
    torch.testing.assert_close(logprob, dist.log_prob(action).sum(1))
    torch.testing.assert_close(entropy, dist.entropy().sum(1))
    assert value.shape == (6, 1)
    # the state-independent standard deviation starts at 1 and is one parameter per action component
    assert ppo.Agent(envs).actor_logstd.shape == (1, 1) and torch.all(ppo.Agent(envs).actor_logstd == 0)
