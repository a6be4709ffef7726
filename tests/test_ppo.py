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
    run_as_main,
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


NEEDS = "this script needs Discrete actions and Box observations"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--total-timesteps", "100"], ["be at most --total-timesteps"]),
        (["--gamma", "1.5"], ["--gamma must lie in [0, 1]", "1.5"]),
        (["--gae-lambda", "-0.1"], ["--gae-lambda must lie in [0, 1]", "-0.1"]),
        (["--env-id", "Pendulum-v1"], ["Pendulum-v1 has Box(", f"{NEEDS}: use ppo_continuous_action.py instead"]),
        (["--env-id", "FrozenLake-v1"], ["FrozenLake-v1 has Discrete(4) actions and Discrete(16) observations", NEEDS]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments, capfd):
    proc = run_as_main("ppo.py", *args, cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, "ppo.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


def test_track_with_wandb_offline(tmp_path):
    run_script("ppo.py", *TINY, "--track", "--wandb-project-name", "cleanrl-test", cwd=tmp_path)
    offline_runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1
    assert list(offline_runs[0].glob("*.wandb"))


# ---- the algorithm's pieces, checked through a run whose first update can be worked out by hand ----------


ZERO_OBSERVATION_ENV = FIXED_LENGTH_ENV.replace(
    "np.full(3, self.t / self.length, np.float32)", "np.zeros(3, np.float32)"
)


@pytest.mark.parametrize(("env_id", "length"), [("FixedLength-v0", 10), ("Truncated-v0", 7)])
def test_first_update_losses_match_gae_worked_out_by_hand(tmp_path, env_id, length):
    """Zero observations make the fresh network's outputs exactly zero (zero biases): every value is 0 and every
    logit 0, so the ratio is exactly 1. With one epoch of one minibatch, the losses logged at iteration 1 are those
    of the rollout's own batch, and the returns are GAE's over episodes of `length` steps paying 1 per step,
    ended by a termination or by the time limit (a truncation also ends GAE's sum, as in the reference)."""
    (tmp_path / "zeroenv.py").write_text(ZERO_OBSERVATION_ENV)
    env = script_env(PYTHONPATH=str(tmp_path))
    gamma, lam, num_envs, num_steps = 0.9, 0.8, 2, 32
    args = ["--env-id", f"zeroenv:{env_id}", "--num-envs", str(num_envs), "--num-steps", str(num_steps)]
    args += ["--total-timesteps", str(num_envs * num_steps), "--update-epochs", "1", "--num-minibatches", "1"]
    run_script("ppo.py", *args, "--gamma", str(gamma), "--gae-lambda", str(lam), cwd=tmp_path, env=env)
    scalars = read_scalars(only_run_dir(tmp_path))
    # values are 0, so each return is the advantage: the sum of (gamma lambda)^k over the rest of the episode
    # inside the rollout (the last step bootstraps from the value 0)
    left = np.array([min(length - t % length, num_steps - t) for t in range(num_steps)])
    returns = (1 - (gamma * lam) ** left) / (1 - gamma * lam)
    logged = {tag: points[0][1] for tag, points in scalars.items()}
    assert logged["losses/value_loss"] == pytest.approx(0.5 * np.mean(returns**2), rel=1e-6)
    assert logged["losses/policy_loss"] == pytest.approx(0.0, abs=1e-6)  # minus the mean normalised advantage
    assert logged["losses/entropy"] == pytest.approx(np.log(2), rel=1e-6)
    assert logged["losses/old_approx_kl"] == logged["losses/approx_kl"] == logged["losses/clipfrac"] == 0.0
    assert logged["losses/explained_variance"] == 0.0


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
