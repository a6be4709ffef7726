"""cleanrl/ppo_atari_lstm.py: the LSTM details: initialisation, the state reset where an episode starts, the update
replaying whole sequences from the rollout's initial state, and the evaluation carrying the state."""

import numpy as np
import pytest
import torch
from helpers import FAKE_ATARI_GAME, load_script, vector_env

lstm = load_script("ppo_atari_lstm")


def zero_state(num_envs):
    return (torch.zeros(1, num_envs, 128), torch.zeros(1, num_envs, 128))


@pytest.fixture(scope="module")
def agent():
    envs = vector_env(lstm, "BreakoutNoFrameskip-v4", 1)
    torch.manual_seed(1)
    agent = lstm.Agent(envs)
    envs.close()
    return agent


def test_one_frame_in_no_frame_stacking():
    envs = vector_env(lstm, "BreakoutNoFrameskip-v4", 1)
    obs, _ = envs.reset(seed=1)
    envs.close()
    assert obs.shape == (1, 1, 84, 84) and obs.dtype == np.uint8


def test_lstm_weights_are_orthogonal_and_biases_zero(agent):
    for name, param in agent.lstm.named_parameters():
        if "bias" in name:
            assert torch.all(param == 0), name
    w_ih, w_hh = agent.lstm.weight_ih_l0, agent.lstm.weight_hh_l0  # (4 x 128, 512) and (4 x 128, 128)
    assert torch.allclose(w_ih @ w_ih.T, torch.eye(512), atol=1e-4)
    assert torch.allclose(w_hh.T @ w_hh, torch.eye(128), atol=1e-4)
    assert agent.network[0].in_channels == 1
    assert agent.actor.in_features == agent.critic.in_features == 128


def test_a_minibatch_holds_whole_environments():
    """2 x 128 steps divide into 4 minibatches of steps, but 2 environments do not divide into 4 minibatches."""
    args = lstm.Args(num_envs=2, num_steps=128, num_minibatches=4, total_timesteps=1024)
    assert "--num-minibatches 4 must divide --num-envs 2" in lstm.check_args(args)
    assert lstm.check_args(lstm.Args(num_envs=4, num_steps=128, num_minibatches=4, total_timesteps=1024)) is None


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
    fresh, _ = agent.get_states(steps, zero_state(1), torch.zeros(3))
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


@torch.no_grad()
def test_heads_read_the_lstm_outputs_with_the_policy_softmax(agent):
    """get_action_and_value: the heads take the LSTM's outputs; the log-probability and entropy are those of the
    softmax of the logits, the sampled actions follow it, and the new state is the LSTM's last state."""
    num_steps, num_envs = 3, 2
    x, state = random_sequence(num_steps, num_envs)
    done = torch.zeros(num_steps * num_envs)
    bias = agent.actor.bias.clone()
    agent.actor.bias += torch.tensor([0.0, 1.0, -1.0, 2.0])  # a policy away from uniform, for the sampling check
    try:
        hidden, last_state = agent.get_states(x, state, done)
        policy = torch.distributions.Categorical(logits=agent.actor(hidden))
        action, logprob, entropy, value, new_state = agent.get_action_and_value(x, state, done)
        # 2000 environments in the state of environment 0 at step 0 draw their actions from its softmax
        many = 2000
        state0 = tuple(s[:, :1].expand(1, many, 128).contiguous() for s in state)
        torch.manual_seed(0)
        actions = agent.get_action_and_value(x[:1].expand(many, 1, 84, 84), state0, torch.zeros(many))[0]
    finally:
        agent.actor.bias.copy_(bias)
    torch.testing.assert_close(logprob, policy.log_prob(action))
    torch.testing.assert_close(entropy, policy.entropy())
    torch.testing.assert_close(value, agent.critic(hidden))
    torch.testing.assert_close(new_state, last_state)
    torch.testing.assert_close(torch.bincount(actions, minlength=4) / many, policy.probs[0], atol=0.04, rtol=0)


def test_update_replays_the_rollout_values_and_logprobs(agent):
    """Before any update, a minibatch replayed as the update does (its environments' whole sequences, from the
    rollout's initial state, reset where episodes started) gives back the values and log-probabilities the rollout
    computed one step at a time."""
    num_envs, num_steps, warmup = 4, 96, 24
    envs = vector_env(lstm, "BreakoutNoFrameskip-v4", num_envs)
    next_obs, _ = envs.reset(seed=1)
    next_obs = torch.Tensor(next_obs)
    next_done = torch.zeros(num_envs)
    next_lstm_state = zero_state(num_envs)
    torch.manual_seed(1)

    def env_step(action):  # the script's step: numpy to the environments, tensors back
        next_obs, _, terminations, truncations, _ = envs.step(action.numpy())
        return torch.Tensor(next_obs), torch.Tensor(np.logical_or(terminations, truncations))

    with torch.no_grad():  # a few steps first, so that the rollout starts from a state that is not zero
        for _ in range(warmup):
            action, _, _, _, next_lstm_state = agent.get_action_and_value(next_obs, next_lstm_state, next_done)
            next_obs, next_done = env_step(action)
    # the rollout, as the script runs it, into its storage
    initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
    obs = torch.zeros((num_steps, num_envs, 1, 84, 84))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    with torch.no_grad():
        for step in range(num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            action, logprob, _, value, next_lstm_state = agent.get_action_and_value(
                next_obs, next_lstm_state, next_done
            )
            values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs, next_done = env_step(action)
    envs.close()
    b_obs = obs.reshape((-1, 1, 84, 84))
    b_actions = actions.reshape(-1)
    b_logprobs = logprobs.reshape(-1)
    b_values = values.reshape(-1)
    b_dones = dones.reshape(-1)
    assert torch.count_nonzero(b_dones).item() and torch.count_nonzero(initial_lstm_state[0]).item()

    # a minibatch of the update: two whole environments, with the script's indexing
    flatinds = np.arange(num_steps * num_envs).reshape(num_steps, num_envs)
    mbenvinds = np.array([3, 1])
    mb_inds = flatinds[:, mbenvinds].ravel()
    assert mb_inds[:4].tolist() == [3, 1, 7, 5]  # time-major: step 0 of both environments, then step 1
    assert torch.count_nonzero(b_dones[mb_inds]).item(), "the replay should cross an episode start"
    mb_state = (initial_lstm_state[0][:, mbenvinds], initial_lstm_state[1][:, mbenvinds])
    with torch.no_grad():
        _, newlogprob, _, newvalue, _ = agent.get_action_and_value(
            b_obs[mb_inds], mb_state, b_dones[mb_inds], b_actions.long()[mb_inds]
        )
        # the stored initial state is needed: from a zero state the replay comes out different
        _, _, _, zero_value, _ = agent.get_action_and_value(
            b_obs[mb_inds], zero_state(2), b_dones[mb_inds], b_actions.long()[mb_inds]
        )
    torch.testing.assert_close(newlogprob, b_logprobs[mb_inds], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(newvalue.flatten(), b_values[mb_inds], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(zero_value.flatten(), b_values[mb_inds], atol=1e-5)


def test_evaluate_carries_the_lstm_state(tmp_path, monkeypatch):
    """evaluate starts from the zero state, hands each step's new state to the next step, and passes done = 1 to the
    step after an episode ended (a lost life of the stand-in game, 40 frames = 10 agent steps)."""
    envs = vector_env(lstm, FAKE_ATARI_GAME, 1)
    torch.manual_seed(1)
    torch.save(lstm.Agent(envs).state_dict(), tmp_path / "model.cleanrl_model")
    envs.close()
    calls = []
    original = lstm.Agent.get_action_and_value

    def recording(self, x, lstm_state, done, action=None):
        result = original(self, x, lstm_state, done, action)
        calls.append((lstm_state, done.clone(), result[4]))
        return result

    monkeypatch.setattr(lstm.Agent, "get_action_and_value", recording)
    returns = lstm.evaluate(tmp_path / "model.cleanrl_model", FAKE_ATARI_GAME, 1, "unused", "cpu", False, 1)
    assert returns == [360.0]
    assert not any(t.any() for t in calls[0][0])
    for (_, _, new_state), (state, _, _) in zip(calls, calls[1:]):
        assert all(a is b for a, b in zip(new_state, state))
    assert any(t.any() for t in calls[1][0])
    dones = [done.item() for _, done, _ in calls]
    assert dones[0] == 0 and 2 <= sum(dones) <= 3  # the lost lives of the one game played
