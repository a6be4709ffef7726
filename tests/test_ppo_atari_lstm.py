"""cleanrl/ppo_atari_lstm.py: a run through the command line, and the LSTM details: initialisation, the state reset
where an episode starts, and the update replaying the rollout's sequences from its initial state."""

import numpy as np
import pytest
import torch
from helpers import (
    FAKE_ATARI_GAME,
    assert_user_error,
    check_smoke_run,
    load_script,
    run_copied_alone,
    run_script,
)

# Two environments of 256 steps, one environment per minibatch.
TINY = ["--total-timesteps", "512", "--num-envs", "2", "--num-steps", "128", "--num-minibatches", "2"]

lstm = load_script("ppo_atari_lstm")


@pytest.fixture(scope="module")
def agent():
    envs = lstm.make_vector_env("BreakoutNoFrameskip-v4", 1, False, "unused")
    torch.manual_seed(1)
    agent = lstm.Agent(envs)
    envs.close()
    return agent


def test_copied_alone_logs_every_metric_then_saves_and_evaluates(tmp_path):
    run_dir = run_copied_alone("ppo_atari_lstm.py", *TINY, "--save-model", tmp_path=tmp_path)
    scalars = check_smoke_run(run_dir, "BreakoutNoFrameskip-v4__ppo_atari_lstm__1__", [256, 512])
    state = torch.load(run_dir / "ppo_atari_lstm.cleanrl_model")
    assert {"network.0.weight", "lstm.weight_ih_l0", "lstm.bias_hh_l0", "actor.weight", "critic.bias"} <= set(state)
    assert state["network.0.weight"].shape == (32, 1, 8, 8)  # one frame in: no frame stacking
    evals = scalars["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--num-envs", "6"], ["whole sequences of environments", "--num-envs 6 must divide into --num-minibatches 4"]),
        (["--env-id", "CartPole-v1"], ["needs an Atari game"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_atari_lstm.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_atari_lstm.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- the LSTM details ---------------------------------------------------------------------------


def test_lstm_weights_are_orthogonal_and_biases_zero(agent):
    for name, param in agent.lstm.named_parameters():
        if "bias" in name:
            assert torch.all(param == 0), name
    w_ih, w_hh = agent.lstm.weight_ih_l0, agent.lstm.weight_hh_l0  # (4 x 128, 512) and (4 x 128, 128)
    assert torch.allclose(w_ih @ w_ih.T, torch.eye(512), atol=1e-4)
    assert torch.allclose(w_hh.T @ w_hh, torch.eye(128), atol=1e-4)
    assert agent.network[0].in_channels == 1


def test_initial_state_is_zero(agent):
    h, c = lstm.initial_lstm_state(agent, 3, "cpu")
    assert h.shape == c.shape == (1, 3, 128) and not h.any() and not c.any()


def random_sequence(num_steps, num_envs, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (num_steps * num_envs, 1, 84, 84), dtype=torch.uint8, generator=generator)
    state = tuple(torch.randn(1, num_envs, 128, generator=generator) for _ in range(2))
    return x, state


@torch.no_grad()
def test_state_is_reset_where_an_episode_starts(agent):
    num_steps, num_envs = 6, 3
    x, state_a = random_sequence(num_steps, num_envs)
    _, state_b = random_sequence(num_steps, num_envs, seed=1)
    done = torch.zeros(num_steps, num_envs)
    done[3, 1] = 1.0  # environment 1 starts a new episode at step 3
    out_a, _ = agent.get_states(x, state_a, done.flatten())
    out_b, _ = agent.get_states(x, state_b, done.flatten())
    out_a, out_b = out_a.view(num_steps, num_envs, -1), out_b.view(num_steps, num_envs, -1)
    # from step 3 on, environment 1 forgets where it came from ...
    torch.testing.assert_close(out_a[3:, 1], out_b[3:, 1])
    assert not torch.allclose(out_a[:3, 1], out_b[:3, 1], atol=1e-4)
    # ... exactly as if it started from the zero state there
    steps = x.view(num_steps, num_envs, 1, 84, 84)[3:, 1]
    fresh, _ = agent.get_states(steps, lstm.initial_lstm_state(agent, 1, "cpu"), torch.zeros(3))
    torch.testing.assert_close(out_a[3:, 1], fresh)
    # the environments without a reset carry their state to the end
    assert not torch.allclose(out_a[-1, 0], out_b[-1, 0], atol=1e-4)


@torch.no_grad()
def test_a_sequence_in_one_call_equals_step_by_step(agent):
    num_steps, num_envs = 8, 2
    x, state = random_sequence(num_steps, num_envs)
    done = torch.zeros(num_steps, num_envs)
    done[2, 0] = done[5, 1] = done[5, 0] = 1.0
    whole, (h_whole, c_whole) = agent.get_states(x, state, done.flatten())
    steps = []
    x = x.view(num_steps, num_envs, 1, 84, 84)
    for t in range(num_steps):
        out, state = agent.get_states(x[t], state, done[t])
        steps.append(out)
    torch.testing.assert_close(whole, torch.cat(steps), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close((h_whole, c_whole), state, atol=1e-6, rtol=1e-5)


def test_sequence_indices_are_whole_environments_time_major():
    mb = lstm.sequence_indices(torch.tensor([2, 0]), num_steps=3, num_envs=4)
    assert mb.tolist() == [2, 0, 6, 4, 10, 8]


def test_update_replays_the_rollout_values_and_logprobs(agent):
    """Before any update, the first minibatch replayed as the update does (its environments' whole sequences,
    from the rollout's stored initial state, reset where episodes started) gives back the values and
    log-probabilities the rollout computed one step at a time."""
    num_envs, num_steps, warmup = 4, 96, 24
    envs = lstm.make_vector_env("BreakoutNoFrameskip-v4", num_envs, False, "unused")
    next_obs, _ = envs.reset(seed=1)
    next_done = np.zeros(num_envs, dtype=np.float32)
    next_lstm_state = lstm.initial_lstm_state(agent, num_envs, "cpu")
    torch.manual_seed(1)
    with torch.inference_mode():  # a few steps first, so that the rollout starts from a state that is not zero
        for _ in range(warmup):
            action, _, _, _, next_lstm_state = agent.get_action_and_value(
                torch.from_numpy(next_obs), next_lstm_state, torch.from_numpy(next_done)
            )
            next_obs, _, terminations, truncations, _ = envs.step(action.tolist())
            next_done = (terminations | truncations).astype(np.float32)
    # the rollout, as the script runs it
    rollout_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
    obs = np.zeros((num_steps, num_envs, 1, 84, 84), dtype=np.uint8)
    actions = np.zeros((num_steps, num_envs), dtype=np.int64)
    logprobs, values, dones = (np.zeros((num_steps, num_envs), dtype=np.float32) for _ in range(3))
    with torch.inference_mode():
        for step in range(num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            action, logprob, _, value, next_lstm_state = agent.get_action_and_value(
                torch.from_numpy(next_obs), next_lstm_state, torch.from_numpy(next_done)
            )
            actions[step], logprobs[step], values[step] = action.numpy(), logprob.numpy(), value.flatten().numpy()
            next_obs, _, terminations, truncations, _ = envs.step(action.tolist())
            next_done = (terminations | truncations).astype(np.float32)
    envs.close()
    b_obs, b_actions, b_logprobs, b_values, b_dones = (
        torch.from_numpy(a.reshape((-1,) + a.shape[2:])) for a in (obs, actions, logprobs, values, dones)
    )
    assert torch.count_nonzero(b_dones).item() and torch.count_nonzero(rollout_lstm_state[0]).item()

    # the first minibatch of the update: two whole environments of a shuffle
    mbenvinds = torch.randperm(num_envs, generator=torch.Generator().manual_seed(0))[:2]
    mb = lstm.sequence_indices(mbenvinds, num_steps, num_envs)
    assert torch.count_nonzero(b_dones[mb]).item(), "the replay should cross an episode start"
    mb_state = (rollout_lstm_state[0][:, mbenvinds], rollout_lstm_state[1][:, mbenvinds])
    _, newlogprob, _, newvalue, _ = agent.get_action_and_value(b_obs[mb], mb_state, b_dones[mb], b_actions[mb])
    torch.testing.assert_close(newlogprob.detach(), b_logprobs[mb], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(newvalue.detach().flatten(), b_values[mb], atol=1e-5, rtol=1e-4)
    # the stored initial state is needed: from a zero state the replay comes out different
    with torch.no_grad():
        zero_state = lstm.initial_lstm_state(agent, 2, "cpu")
        _, _, _, zero_value, _ = agent.get_action_and_value(b_obs[mb], zero_state, b_dones[mb], b_actions[mb])
    assert not torch.allclose(zero_value.flatten(), b_values[mb], atol=1e-5)


def test_logged_return_is_the_unclipped_score_of_a_whole_game():
    """The same statistics as ppo_atari.py: one point per game, its real return over all lives (see helpers)."""
    envs = lstm.make_vector_env(FAKE_ATARI_GAME, 1, False, "unused")
    envs.reset(seed=1)
    games = []
    for _ in range(100):
        games.extend(lstm.finished_games(envs.step([0])[4]))
    envs.close()
    assert len(games) >= 2 and games == [(360.0, 120)] * len(games)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_atari_lstm")
    assert list(tmp_path.iterdir()) == []
