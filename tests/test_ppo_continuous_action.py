"""cleanrl/ppo_continuous_action.py: MuJoCo v5 and dm_control runs, the normalisation by Gymnasium's
wrappers checked against its formulas, the saved normaliser statistics used frozen in evaluation, and the Gaussian
policy. (What every script shares is tested in test_scripts.py.)"""

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import (
    COMMON_METRICS,
    assert_user_error,
    load_script,
    only_run_dir,
    read_scalars,
    run_as_main,
    run_script,
    script_env,
)

SCRIPT = "ppo_continuous_action.py"
TINY = ["--total-timesteps", "512", "--num-steps", "256", "--num-minibatches", "4", "--update-epochs", "2"]

ppo = load_script("ppo_continuous_action")


@pytest.mark.parametrize("env_id", ["Hopper-v5", "dm_control/cartpole-balance-v0"])
def test_v5_and_dm_control_ids_train(tmp_path, env_id):
    proc = run_script(SCRIPT, "--env-id", env_id, "--total-timesteps", "2048", "--num-steps", "1024", cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    scalars = read_scalars(run_dir)
    assert COMMON_METRICS <= set(scalars)
    if env_id.startswith("dm_control"):
        # dm_control episodes last 1000 steps, logged with their real (unnormalised) returns; shimmy's import is quiet
        assert run_dir.parent.name == "dm_control"
        assert [length for _, length in scalars["charts/episodic_length"]] == [1000.0, 1000.0]
        assert all(0 < ret <= 1000 for _, ret in scalars["charts/episodic_return"])
        assert proc.stderr == ""


def test_discrete_actions_are_one_line_and_exit_2(tmp_path, capfd):
    proc = run_as_main(SCRIPT, "--env-id", "CartPole-v1", cwd=tmp_path, capfd=capfd)
    message = "CartPole-v1 has Discrete(2) actions; this script needs Box actions: use ppo.py instead"
    assert_user_error(proc, f"ppo_continuous_action.py: error: {message}")
    assert not (tmp_path / "runs").exists()


def test_without_mujoco_one_line_names_the_setup_command(tmp_path):
    """A `mujoco` that cannot be imported, as where the extra is not installed."""
    (tmp_path / "nomujoco" / "mujoco").mkdir(parents=True)
    (tmp_path / "nomujoco" / "mujoco" / "__init__.py").write_text("raise ImportError('no mujoco here')\n")
    env = script_env(PYTHONPATH=str(tmp_path / "nomujoco"))
    proc = run_script(SCRIPT, "--env-id", "Hopper-v5", cwd=tmp_path, check=False, timeout=120, env=env)
    assert_user_error(proc, "mujoco is missing; run `bash scripts/setup.sh mujoco` in a clone of this project")


@pytest.mark.parametrize("renderer", ["bogus", "egl"])
def test_a_renderer_mujoco_cannot_load_is_one_line_and_exit_2(tmp_path, renderer):
    """MUJOCO_GL (or --capture-video's egl) naming a renderer MuJoCo cannot load fails MuJoCo's own import: one line,
    not the traceback. For egl, a stand-in PyOpenGL fails as the real one did on a GPU machine without libEGL."""
    (tmp_path / "noegl" / "OpenGL").mkdir(parents=True)
    no_libegl = "raise AttributeError(\"'NoneType' object has no attribute 'eglQueryString'\")\n"
    (tmp_path / "noegl" / "OpenGL" / "__init__.py").write_text(no_libegl)
    env = script_env(MUJOCO_GL=renderer, PYTHONPATH=str(tmp_path / "noegl"))
    proc = run_script(SCRIPT, "--env-id", "Hopper-v5", *TINY, cwd=tmp_path, check=False, timeout=120, env=env)
    message = f"MuJoCo cannot load its renderer MUJOCO_GL={renderer}: set MUJOCO_GL=egl, osmesa or glfw"
    assert_user_error(proc, f"ppo_continuous_action.py: error: {message}")
    assert not (tmp_path / "runs").exists()


# ---- normalisation: Gymnasium's wrappers, as their formulas say ----------------------------------------------------

SCRIPTED = "ScriptedContinuous-v0"


class Scripted(gym.Env):
    """Known observations and rewards, recorded as emitted: episodes 0, 2, ... terminate after 3 steps, episodes
    1, 3, ... are truncated by the time limit after 5. One observation jumps to 1000, late enough to be clipped."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self.k, self.episode = 0, -1
        self.emitted_obs, self.emitted_rewards, self.terminations, self.actions = [], [], [], []

    def emit(self, obs):
        self.emitted_obs.append(np.array(obs, dtype=np.float64))
        return self.emitted_obs[-1]

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self.emit([self.k, -3.0]), {}

    def step(self, action):
        self.actions.append(np.array(action))
        self.k, self.t = self.k + 1, self.t + 1
        reward, terminated = 1.0 + self.k % 3, self.episode % 2 == 0 and self.t == 3
        self.emitted_rewards.append(reward)
        self.terminations.append(terminated)
        return self.emit([self.k, 1000.0 if self.k == 118 else -0.5 * self.k]), reward, terminated, False, {}


gym.register(SCRIPTED, entry_point=Scripted, max_episode_steps=5)


def running_mean_var(values, prior_count=1e-4):
    """The mean and variance of all `values` as Gymnasium's RunningMeanStd keeps them: it starts from a prior of
    count 1e-4 at mean 0 and variance 1, which the values join (Chan et al.'s formula for two groups)."""
    x = np.array(values, dtype=np.float64)
    n, data_mean = len(x), x.mean(axis=0)
    m2 = prior_count * 1.0 + ((x - data_mean) ** 2).sum(axis=0) + data_mean**2 * prior_count * n / (n + prior_count)
    return x.sum(axis=0) / (n + prior_count), m2 / (n + prior_count)


def test_normalisation_is_gymnasiums_wrappers_across_terminations_and_truncations():
    """Observations: every observation the environment emits counts, the last of an episode and the first of the
    next included (same-step autoreset), and each is normalised by statistics that include it. Rewards: divided by
    the running standard deviation of the discounted return G = G * gamma * (1 - terminated) + r, which a truncation
    does not restart. Both clipped to [-10, 10]. The logged episode statistics and the actions the environment
    receives (clipped to its bounds) are the raw ones."""
    gamma = 0.9
    envs = gym.vector.SyncVectorEnv(
        [ppo.make_env(SCRIPTED, 0, False, "unused", gamma)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    env = envs.envs[0].unwrapped
    obs, _ = envs.reset(seed=1)
    returns, finished, clipped = [], [], set()
    discounted = 0.0
    for step in range(130):
        mean, var = running_mean_var(env.emitted_obs)
        expected_obs = np.clip((env.emitted_obs[-1] - mean) / np.sqrt(var + 1e-8), -10, 10)
        np.testing.assert_allclose(obs[0], expected_obs, rtol=1e-5, atol=1e-6)
        clipped |= {"obs"} if np.abs(expected_obs).max() == 10 else set()

        obs, reward, _, _, infos = envs.step(np.array([[5.0 if step % 2 else -5.0]]))
        finished += ppo.finished_episodes(infos)
        discounted = discounted * gamma * (1 - env.terminations[-1]) + env.emitted_rewards[-1]
        returns.append(discounted)
        expected_reward = np.clip(env.emitted_rewards[-1] / np.sqrt(running_mean_var(returns)[1] + 1e-8), -10, 10)
        assert reward[0] == pytest.approx(expected_reward, rel=1e-6)
        clipped |= {"reward"} if expected_reward == 10 else set()
    envs.close()
    # the sequence held what it is for: terminations, truncations, and clipping of both
    assert env.terminations[2] and not any(env.terminations[3:8]) and clipped == {"obs", "reward"}
    assert finished[:3] == [(2.0 + 3 + 1, 3), (2.0 + 3 + 1 + 2 + 3, 5), (1.0 + 2 + 3, 3)]
    assert [length for _, length in finished] == [3, 5] * 16
    assert {float(action[0]) for action in env.actions} == {-1.0, 1.0}


def test_make_env_computes_as_gymnasium_0_29_with_numpy_1():
    """The two roundings by which Gymnasium 1.x with NumPy 2 departs from the reference's own stack, undone in
    make_env: float64 observation statistics (1.x makes them float32), and a MuJoCo task's control cost in float64
    (NumPy 2 computes it in float32 for a float32 action). tests/conformance checks the numbers that follow."""
    env = ppo.make_env("HalfCheetah-v4", 0, False, "unused", 0.99)()
    normalizer = env
    while not isinstance(normalizer, gym.wrappers.NormalizeObservation):
        normalizer = normalizer.env
    assert normalizer.obs_rms.mean.dtype == normalizer.obs_rms.var.dtype == np.float64
    env.reset(seed=1)
    action = np.full(6, 0.3, np.float32)
    _, _, _, _, info = env.step(action)
    env.close()
    squares = np.sum(np.square(action))  # float32, under NumPy 1 as under NumPy 2
    assert type(info["reward_ctrl"]) is np.float64 and info["reward_ctrl"] == -(0.1 * np.float64(squares))


# ---- the saved model carries the observation statistics; evaluation uses them, frozen -------------------------------


def test_save_model_saves_env_0s_observation_statistics(tmp_path):
    run_script(SCRIPT, "--env-id", "InvertedPendulum-v5", *TINY, "--save-model", cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    saved = torch.load(run_dir / "ppo_continuous_action.cleanrl_model")
    assert set(saved) == {"agent", "obs_rms"} and set(saved["obs_rms"]) == {"mean", "var", "count"}
    assert saved["obs_rms"]["mean"].shape == (4,) and saved["obs_rms"]["var"].min() > 0
    scalars = read_scalars(run_dir)
    # the wrapper counted every observation: the first, one per step, one more per reset after an ending step
    episodes = len(scalars["charts/episodic_return"])
    assert saved["obs_rms"]["count"].item() == pytest.approx(1 + 512 + episodes + 1e-4)
    assert [step for step, _ in scalars["eval/episodic_return"]] == list(range(10))


class RecordActions(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.actions = []

    def step(self, action):
        self.actions.append(np.array(action))
        return super().step(action)


@pytest.fixture
def evaluate_recording(monkeypatch, tmp_path):
    """Runs the script's evaluate on InvertedPendulum-v5 and returns (returns, actions it took, the normaliser)."""
    monkeypatch.chdir(tmp_path)
    made = []

    def recording_make_env(*args, **kwargs):
        thunk = original_make_env(*args, **kwargs)
        return lambda: made.append(RecordActions(thunk())) or made[-1]

    original_make_env = ppo.make_env
    monkeypatch.setattr(ppo, "make_env", recording_make_env)

    def run(model_path, episodes=2):
        torch.manual_seed(0)
        returns = ppo.evaluate(str(model_path), "InvertedPendulum-v5", episodes, "eval", torch.device("cpu"), False, 1)
        normalizer = made[-1]
        while not isinstance(normalizer, gym.wrappers.NormalizeObservation):
            normalizer = normalizer.env
        return returns, np.array(made[-1].actions), normalizer

    return run


def saved_model(path, mean, var, count=1000.0):
    """A model file as the script saves it: a fresh agent for InvertedPendulum and the given statistics."""
    torch.manual_seed(3)
    envs = SimpleNamespace(
        single_observation_space=gym.spaces.Box(-1, 1, (4,)), single_action_space=gym.spaces.Box(-1, 1, (1,))
    )
    agent = ppo.Agent(envs)
    with torch.no_grad():
        agent.actor_logstd.fill_(-3.0)  # nearly the mean action: the statistics decide what it does
    obs_rms = {"mean": torch.tensor(mean), "var": torch.tensor(var), "count": torch.tensor(count)}
    torch.save({"agent": agent.state_dict(), "obs_rms": obs_rms}, path)
    return path


def test_evaluate_uses_the_saved_statistics_frozen(tmp_path, evaluate_recording):
    mean, var = np.array([0.01, -0.02, 0.03, 0.04]), np.array([0.05, 0.01, 0.2, 0.3])
    model = saved_model(tmp_path / "a.cleanrl_model", mean, var)
    returns, actions, normalizer = evaluate_recording(model)
    # InvertedPendulum-v5 pays 1 per step but the one on which the pole falls
    assert len(returns) == 2 and len(actions) == sum(returns) + 2
    # after playing, the statistics are still the saved ones, and updating is off
    assert normalizer.update_running_mean is False
    np.testing.assert_array_equal(normalizer.obs_rms.mean, mean)
    np.testing.assert_array_equal(normalizer.obs_rms.var, var)
    assert float(normalizer.obs_rms.count) == 1000.0
    # the same model plays the same way again; with other statistics it acts otherwise
    again_returns, again_actions, _ = evaluate_recording(model)
    assert again_returns == returns and np.array_equal(again_actions, actions)
    other = saved_model(tmp_path / "b.cleanrl_model", mean + 0.5, var * 4)
    _, other_actions, _ = evaluate_recording(other)
    n = min(len(actions), len(other_actions))
    assert not np.allclose(actions[:n], other_actions[:n], atol=1e-3)


# ---- the Gaussian policy ---------------------------------------------------------------------------------------


def test_gaussian_policy_sums_log_prob_and_entropy_over_action_dimensions():
    envs = SimpleNamespace(
        single_observation_space=gym.spaces.Box(-1, 1, (5,)), single_action_space=gym.spaces.Box(-1, 1, (3,))
    )
    agent = ppo.Agent(envs)
    # the state-independent standard deviation starts at 1, one parameter per action component
    assert agent.actor_logstd.shape == (1, 3) and torch.all(agent.actor_logstd == 0)
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([[-0.7, 0.0, 0.4]]))
    obs = torch.randn(6, 5)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == (6, 3) and logprob.shape == entropy.shape == (6,) and value.shape == (6, 1)
    std = torch.tensor([-0.7, 0.0, 0.4]).exp()
    z = (action - agent.actor_mean(obs)) / std
    expected_logprob = (-0.5 * z**2 - std.log() - 0.5 * np.log(2 * np.pi)).sum(1)
    torch.testing.assert_close(logprob, expected_logprob)
    torch.testing.assert_close(entropy, (0.5 + 0.5 * np.log(2 * np.pi) + std.log()).sum().expand(6))
