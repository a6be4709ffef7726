"""cleanrl/ppo.py: end-to-end runs through the command line, and unit tests of the pieces that carry PPO."""

import json
import textwrap

import numpy as np
import pytest
import torch
from helpers import (
    assert_same_scalars,
    assert_user_error,
    check_smoke_run,
    fake_hub_env,
    load_script,
    only_run_dir,
    read_scalars,
    run_copied_alone,
    run_script,
    script_env,
)

TINY = ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128"]

ppo = load_script("ppo")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny training run shared by the tests that only read its output."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = run_script("ppo.py", *TINY, cwd=cwd)
    return cwd, proc


def test_smoke_run_logs_every_metric(tiny_run):
    cwd, proc = tiny_run
    # global_step counts the steps of all environments: 4 iterations of 2 x 128
    scalars = check_smoke_run(only_run_dir(cwd), "CartPole-v1__ppo__1__", [256, 512, 768, 1024], proc.stdout)
    # the learning rate is annealed linearly from 2.5e-4
    lrs = [lr for _, lr in scalars["charts/learning_rate"]]
    assert lrs[0] == pytest.approx(2.5e-4) and lrs[-1] == pytest.approx(2.5e-4 / 4)


def test_same_seed_logs_identical_scalars(tiny_run, tmp_path):
    cwd, _ = tiny_run
    run_script("ppo.py", *TINY, cwd=tmp_path)
    assert_same_scalars(only_run_dir(cwd), only_run_dir(tmp_path))


def test_another_seed_logs_different_losses(tiny_run, tmp_path):
    cwd, _ = tiny_run
    run_script("ppo.py", *TINY, "--seed", "2", cwd=tmp_path)
    first, second = read_scalars(only_run_dir(cwd)), read_scalars(only_run_dir(tmp_path))
    assert first["losses/value_loss"] != second["losses/value_loss"]


def test_underscore_flags_are_accepted(tmp_path):
    run_script("ppo.py", "--env_id", "Acrobot-v1", "--total_timesteps", "256", "--num_envs", "2", cwd=tmp_path)
    assert only_run_dir(tmp_path).name.startswith("Acrobot-v1__ppo__1__")


FIXED_LENGTH_ENV = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np

    class FixedLength(gym.Env):
        # every episode lasts `length` steps and pays 1 per step, whatever the actions
        observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, length=10):
            self.length = length

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(3, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(3, self.t / self.length, np.float32), 1.0, self.t >= self.length, False, {}

    gym.register("FixedLength-v0", entry_point=FixedLength, kwargs={"length": 10})
    # never terminates: only the time limit ends its episodes, as a truncation
    gym.register("Truncated-v0", entry_point=FixedLength, kwargs={"length": 10**9}, max_episode_steps=7)
    """
)


@pytest.mark.parametrize(("env_id", "length"), [("FixedLength-v0", 10), ("Truncated-v0", 7)])
def test_every_finished_episode_is_logged(tmp_path, env_id, length):
    """Four environments end their episodes in the same step: all four are logged, at that step,
    and a truncation ends an episode just like a termination."""
    (tmp_path / "fixedenv.py").write_text(FIXED_LENGTH_ENV)
    env = script_env(PYTHONPATH=str(tmp_path))
    args = ["--env-id", f"fixedenv:{env_id}", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256"]
    run_script("ppo.py", *args, cwd=tmp_path, env=env)
    scalars = read_scalars(only_run_dir(tmp_path))
    returns, lengths = scalars["charts/episodic_return"], scalars["charts/episodic_length"]
    episodes = 256 // 4 // length  # complete episodes per environment
    expected_steps = [4 * length * (k + 1) for k in range(episodes) for _ in range(4)]
    assert [step for step, _ in returns] == expected_steps
    assert [value for _, value in returns] == [float(length)] * len(expected_steps)
    assert [value for _, value in lengths] == [float(length)] * len(expected_steps)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--num-envs", "0"], ["--num-envs must be positive"]),
        (["--num-minibatches", "3"], ["does not divide", "--num-minibatches 3"]),
        (["--total-timesteps", "100"], ["less than one batch"]),
        (["--gamma", "1.5"], ["--gamma must lie in [0, 1]"]),
        (["--learning-rate", "-1"], ["--learning-rate must be positive"]),
        (["--env-id", "NoSuchGame-v0"], ["cannot make environment 'NoSuchGame-v0'", "doesn't exist"]),
        (["--env-id", "Pendulum-v1"], ["Discrete action space", "ppo_continuous_action.py"]),
        (["--env-id", "FrozenLake-v1"], ["flat Box observation space"]),
        (["--upload-model"], ["add --save-model"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


def test_save_model_then_evaluate(tmp_path):
    run_script("ppo.py", *TINY, "--save-model", cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    model_path = run_dir / "ppo.cleanrl_model"
    assert model_path.is_file()
    state = torch.load(model_path)
    assert {"actor.0.weight", "critic.4.bias"} <= set(state)
    evals = read_scalars(run_dir)["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))
    assert all(value > 0 for _, value in evals)


def test_capture_video_writes_mp4(tmp_path):
    run_script("ppo.py", *TINY, "--capture-video", cwd=tmp_path)
    videos = list((tmp_path / "videos" / only_run_dir(tmp_path).name).glob("*.mp4"))
    assert videos and all(v.stat().st_size > 1000 for v in videos)


def test_track_with_wandb_offline(tmp_path):
    run_script("ppo.py", *TINY, "--track", "--wandb-project-name", "cleanrl-test", cwd=tmp_path)
    offline_runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1
    assert list(offline_runs[0].glob("*.wandb"))


@pytest.mark.parametrize(("hf_entity", "owner"), [("my-org", "my-org"), ("", "someone")])
def test_upload_model_builds_repository(tmp_path, hf_entity, owner):
    env, record = fake_hub_env(tmp_path)
    args = [*TINY, "--save-model", "--upload-model", "--capture-video", "--hf-entity", hf_entity]
    run_script("ppo.py", *args, cwd=tmp_path, env=env)
    uploaded = json.loads(record.read_text())
    assert uploaded["created"] == uploaded["uploaded"] == f"{owner}/CartPole-v1-ppo-seed1"
    files = uploaded["files"]
    assert {"ppo.cleanrl_model", "ppo.py", "README.md", "replay.mp4"} <= set(files)
    assert any(f.startswith("events.out.tfevents") for f in files)
    assert "CartPole-v1" in uploaded["card"] and "mean_reward" in uploaded["card"]


def test_script_runs_when_copied_alone(tmp_path):
    assert run_copied_alone("ppo.py", *TINY, tmp_path=tmp_path).name.startswith("CartPole-v1__ppo__1__")


# ---- unit tests of the algorithm's pieces -------------------------------------------------------


def test_gae_by_hand_across_an_episode_boundary():
    """One environment, three steps; the episode ends after step 1, so obs 2 starts a new one."""
    gamma, lam = 0.9, 0.8
    rewards = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    values = np.array([[0.5], [1.0], [1.5]], dtype=np.float32)
    dones = np.array([[0.0], [0.0], [1.0]], dtype=np.float32)  # dones[2]: obs 2 is the first of a new episode
    next_value, next_done = np.array([2.0], dtype=np.float32), np.array([0.0], dtype=np.float32)
    advantages, returns = ppo.compute_gae(rewards, values, dones, next_value, next_done, gamma, lam)
    # step 2 bootstraps from next_value; step 1 ends the episode (no bootstrap); step 0 sees step 1
    delta2 = 3.0 + 0.9 * 2.0 - 1.5  # 3.3
    delta1 = 2.0 - 1.0  # 1.0
    delta0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    a2 = delta2
    a1 = delta1
    a0 = delta0 + 0.9 * 0.8 * a1  # 2.12
    np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(returns, advantages + values, rtol=1e-6)


def test_gae_lambda_one_is_monte_carlo_and_lambda_zero_is_td():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(5, 2)).astype(np.float32)
    values = rng.normal(size=(5, 2)).astype(np.float32)
    dones = np.zeros((5, 2), np.float32)
    next_value, next_done = rng.normal(size=2).astype(np.float32), np.zeros(2, np.float32)
    gamma = 0.97
    _, returns = ppo.compute_gae(rewards, values, dones, next_value, next_done, gamma, 1.0)
    discounted = next_value.copy()
    for t in reversed(range(5)):
        discounted = rewards[t] + gamma * discounted
        np.testing.assert_allclose(returns[t], discounted, rtol=1e-5)
    advantages, _ = ppo.compute_gae(rewards, values, dones, next_value, next_done, gamma, 0.0)
    next_values = np.concatenate([values[1:], next_value[None]])
    np.testing.assert_allclose(advantages, rewards + gamma * next_values - values, rtol=1e-5)


def test_gae_does_not_bootstrap_past_a_final_done():
    rewards = np.ones((2, 1), np.float32)
    values = np.zeros((2, 1), np.float32)
    dones = np.zeros((2, 1), np.float32)
    advantages, _ = ppo.compute_gae(rewards, values, dones, np.array([100.0]), np.array([1.0]), 0.99, 0.95)
    np.testing.assert_allclose(advantages[:, 0], [1 + 0.99 * 0.95, 1.0], rtol=1e-6)


def test_policy_loss_clips_the_ratio():
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    old = torch.zeros(4)
    new = torch.log(torch.tensor([1.1, 1.5, 0.5, 0.95]))  # ratios
    loss, old_kl, kl, clipfrac = ppo.policy_loss(new, old, adv, clip_coef=0.2)
    # per sample: max(-A r, -A clip(r)) = -1.1, -1.2, 0.8, 0.95
    assert loss.item() == pytest.approx((-1.1 - 1.2 + 0.8 + 0.95) / 4, rel=1e-5)
    assert clipfrac.item() == pytest.approx(0.5)
    ratio = torch.tensor([1.1, 1.5, 0.5, 0.95])
    assert old_kl.item() == pytest.approx((-torch.log(ratio)).mean().item(), rel=1e-5)
    assert kl.item() == pytest.approx(((ratio - 1) - torch.log(ratio)).mean().item(), rel=1e-5)


def test_policy_loss_gradient_vanishes_where_clipped():
    new = torch.log(torch.tensor([1.5, 1.05])).requires_grad_()
    loss, *_ = ppo.policy_loss(new, torch.zeros(2), torch.tensor([1.0, 1.0]), clip_coef=0.2)
    loss.backward()
    assert new.grad[0] == 0.0 and new.grad[1] != 0.0


def test_value_loss_with_and_without_clipping():
    newvalue, oldvalue, returns = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0]), torch.tensor([3.0, 1.0])
    assert ppo.value_loss(newvalue, oldvalue, returns, 0.2, clip_vloss=False).item() == pytest.approx(0.5 * (1 + 1) / 2)
    # sample 0: the clipped value 1.2 is further from 3 than 2.0 is, so max picks (3 - 1.2)^2 = 3.24
    clipped = ppo.value_loss(newvalue, oldvalue, returns, 0.2, clip_vloss=True).item()
    assert clipped == pytest.approx(0.5 * (3.24 + 1.0) / 2, rel=1e-5)


def test_explained_variance():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert ppo.explained_variance(y, y) == pytest.approx(1.0)
    assert ppo.explained_variance(np.zeros(4) + y.mean(), y) == pytest.approx(0.0)
    assert np.isnan(ppo.explained_variance(y, np.ones(4)))


def test_agent_shapes_and_initialisation():
    envs = ppo.make_vector_env("CartPole-v1", 3, False, "unused")
    agent = ppo.Agent(envs)
    envs.close()
    obs = torch.zeros(5, 4)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (5,) and value.shape == (5, 1)
    # small output layer for the policy: near-uniform logits at the start
    assert entropy.mean().item() == pytest.approx(np.log(2), abs=1e-3)
    assert torch.all(agent.actor[0].bias == 0)
    w = agent.actor[2].weight
    assert torch.allclose(w @ w.T, 2 * torch.eye(64), atol=1e-4)  # orthogonal, gain sqrt(2)
    # the log-probability of the rollout's action agrees between the two entry points
    torch.manual_seed(0)
    a = agent.get_action(obs)
    _, lp, _, _ = agent.get_action_and_value(obs, a)
    assert torch.allclose(lp.exp(), torch.softmax(agent.actor(obs), -1).gather(1, a[:, None]).squeeze(1))


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo")
    assert list(tmp_path.iterdir()) == []


def test_episode_statistics_count_every_ending():
    stats = ppo.EpisodeStatistics(3)
    assert stats.step(np.array([1.0, 2.0, 0.5]), np.array([False, False, False])) == []
    # two environments end in the same step: both are reported, and their counters restart
    finished = stats.step(np.array([1.0, 1.0, 1.0]), np.array([True, False, True]))
    assert finished == [(2.0, 2), (1.5, 2)]
    assert stats.step(np.array([1.0, 1.0, 1.0]), np.array([True, True, False])) == [(1.0, 1), (4.0, 3)]


def test_derived_sizes_are_not_flags(tmp_path):
    help_text = run_script("ppo.py", "--help", cwd=tmp_path).stdout
    assert "--total-timesteps" in help_text
    for derived in ("--batch-size", "--minibatch-size", "--num-iterations"):
        assert derived not in help_text
