"""cleanrl/ppo.py: runs through the command line, and unit tests of the pieces that carry PPO. What every script
does the same way (importing, bad sizes, same seed, copied alone, saving, video, upload) is in test_scripts.py."""

import textwrap

import numpy as np
import pytest
import torch
from helpers import (
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_script,
    script_env,
    vector_env,
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


def test_another_seed_logs_different_losses(tiny_run, tmp_path):
    cwd, _ = tiny_run
    run_script("ppo.py", *TINY, "--seed", "2", cwd=tmp_path)
    first, second = read_scalars(only_run_dir(cwd)), read_scalars(only_run_dir(tmp_path))
    assert first["losses/value_loss"] != second["losses/value_loss"]


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
        (["--total-timesteps", "100"], ["be at most --total-timesteps"]),
        (["--gamma", "1.5"], ["--gamma must lie in [0, 1]", "1.5"]),
        (["--gae-lambda", "-0.1"], ["--gae-lambda must lie in [0, 1]", "-0.1"]),
        (["--env-id", "Pendulum-v1"], ["Pendulum-v1 has", "needs Box and Discrete ones"]),
        (["--env-id", "FrozenLake-v1"], ["FrozenLake-v1 has Discrete(16) observations", "needs Box and Discrete ones"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


def test_track_with_wandb_offline(tmp_path):
    run_script("ppo.py", *TINY, "--track", "--wandb-project-name", "cleanrl-test", cwd=tmp_path)
    offline_runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1
    assert list(offline_runs[0].glob("*.wandb"))


# ---- unit tests of the algorithm's pieces -------------------------------------------------------


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """The script's compute_gae, which works on the NumPy rollout, called with tensors and answering in tensors."""
    arrays = (t.numpy() for t in (rewards, values, dones, next_value, next_done))
    return [torch.from_numpy(a) for a in ppo.compute_gae(*arrays, gamma, gae_lambda)]


def test_gae_by_hand_across_an_episode_boundary():
    """One environment, three steps; the episode ends after step 1, so obs 2 starts a new one."""
    gamma, lam = 0.9, 0.8
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])  # dones[2]: obs 2 is the first of a new episode
    next_value, next_done = torch.tensor([[2.0]]), torch.tensor([0.0])
    advantages, returns = compute_gae(rewards, values, dones, next_value, next_done, gamma, lam)
    # step 2 bootstraps from next_value; step 1 ends the episode (no bootstrap); step 0 sees step 1
    delta2 = 3.0 + 0.9 * 2.0 - 1.5  # 3.3
    delta1 = 2.0 - 1.0  # 1.0
    delta0 = 1.0 + 0.9 * 1.0 - 0.5  # 1.4
    a2 = delta2
    a1 = delta1
    a0 = delta0 + 0.9 * 0.8 * a1  # 2.12
    torch.testing.assert_close(advantages[:, 0], torch.tensor([a0, a1, a2]))
    torch.testing.assert_close(returns, advantages + values)


def test_gae_lambda_one_is_monte_carlo_and_lambda_zero_is_td():
    generator = torch.Generator().manual_seed(0)
    rewards, values = torch.randn(5, 2, generator=generator), torch.randn(5, 2, generator=generator)
    dones = torch.zeros(5, 2)
    next_value, next_done = torch.randn(1, 2, generator=generator), torch.zeros(2)
    gamma = 0.97
    _, returns = compute_gae(rewards, values, dones, next_value, next_done, gamma, 1.0)
    discounted = next_value[0]
    for t in reversed(range(5)):
        discounted = rewards[t] + gamma * discounted
        torch.testing.assert_close(returns[t], discounted)
    advantages, _ = compute_gae(rewards, values, dones, next_value, next_done, gamma, 0.0)
    next_values = torch.cat([values[1:], next_value])
    torch.testing.assert_close(advantages, rewards + gamma * next_values - values)


def test_gae_does_not_bootstrap_past_a_final_done():
    rewards, values, dones = torch.ones(2, 1), torch.zeros(2, 1), torch.zeros(2, 1)
    advantages, _ = compute_gae(rewards, values, dones, torch.tensor([[100.0]]), torch.tensor([1.0]), 0.99, 0.95)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1 + 0.99 * 0.95, 1.0]))


def test_policy_loss_clips_the_ratio():
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    old = torch.zeros(4)
    ratio = torch.tensor([1.1, 1.5, 0.5, 0.95])
    loss, old_kl, kl, clipfrac = ppo.policy_loss(torch.log(ratio), old, adv, clip_coef=0.2)
    # per sample: max(-A r, -A clip(r)) = -1.1, -1.2, 0.8, 0.95
    assert loss.item() == pytest.approx((-1.1 - 1.2 + 0.8 + 0.95) / 4, rel=1e-5)
    assert clipfrac == pytest.approx(0.5)
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


def test_agent_shapes_and_initialisation():
    envs = vector_env(ppo, "CartPole-v1", 3)
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
    # the log-probability of a given action is that of the policy's softmax; the value is the critic's
    _, lp, _, v = agent.get_action_and_value(obs, action)
    assert torch.allclose(lp.exp(), torch.softmax(agent.actor(obs), -1).gather(1, action[:, None]).squeeze(1))
    assert torch.equal(v, agent.get_value(obs))


def test_finished_episodes_reads_final_info_of_same_step_autoreset():
    # envs 0 and 2 ended episodes in the same step, env 1 did not
    infos = {
        "final_info": {
            "episode": {"r": np.array([7.0, 0.0, 3.0]), "l": np.array([7, 0, 3]), "t": np.zeros(3)},
            "_episode": np.array([True, False, True]),
        },
        "_final_info": np.array([True, False, True]),
    }
    assert ppo.finished_episodes(infos) == [(7.0, 7), (3.0, 3)]
    assert ppo.finished_episodes({}) == []
