"""cleanrl/ppo_atari.py: a run on a v5 id, the Atari wrappers (on a stand-in game whose score is known, and on real
ROMs) and the whole-game episode statistics. What every script does the same way is in test_scripts.py."""

import hashlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import (
    FAKE_ATARI_GAME,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    run_as_main,
    run_script,
    vector_env,
)

ppo_atari = load_script("ppo_atari")


def test_v5_id_nests_its_run_folder_and_logs_whole_games(tmp_path):
    """An ALE/...-v5 id works too (its run folder nests under runs/ALE/); a game's length counts agent steps of
    every life; the legacy gym package's notice (printed on its import, where another extra installed it) does not
    reach the console. (The emulator's banner does, once, as on the reference's stack.)"""
    args = ["--env-id", "ALE/Breakout-v5", "--total-timesteps", "512", "--num-envs", "2", "--num-steps", "128"]
    proc = run_script("ppo_atari.py", *args, cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    assert run_dir.parent.name == "ALE"
    scalars = check_smoke_run(run_dir, "Breakout-v5__ppo_atari__1__", [256, 512], proc.stdout)
    # 5 lives of at least a few steps each
    assert all(length >= 5 * 5 for _, length in scalars["charts/episodic_length"])
    assert "Gym has been unmaintained" not in proc.stderr


def test_a_game_that_is_not_atari_is_one_line_and_exit_2(tmp_path, capfd):
    proc = run_as_main("ppo_atari.py", "--env-id", "CartPole-v1", cwd=tmp_path, capfd=capfd)
    assert_user_error(
        proc, "ppo_atari.py: error: CartPole-v1 has no ale-py Atari game; this script needs one: use ppo.py instead"
    )
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- the Atari wrappers and the episode statistics ----------------------------------------------


def test_logged_return_is_the_unclipped_score_of_a_whole_game():
    """A stand-in game pays 3 points a frame and has 3 lives of 40 frames: the agent sees clipped rewards and an
    episode end at every lost life, but each game is logged once, with its real return (360) and length (120)."""
    envs = vector_env(ppo_atari, FAKE_ATARI_GAME, 2)
    envs.reset(seed=1)
    games, dones, rewards = [], 0, []
    for _ in range(100):
        _, reward, terminations, truncations, infos = envs.step([0, 2])
        rewards.extend(reward.tolist())
        dones += int((terminations | truncations).sum())
        games.extend(ppo_atari.finished_episodes(infos))
    envs.close()
    assert set(rewards) == {1.0}  # 4 frames x 3 points, clipped
    assert len(games) >= 4 and games == [(360.0, 120)] * len(games)
    # three episode ends for the agent per game (two lost lives, then game over); each open game may have lost lives
    assert 3 * len(games) <= dones <= 3 * len(games) + 2 * 2


def test_logged_return_on_a_real_rom_sums_the_raw_rewards_over_all_lives():
    """BeamRider pays 44 points and more per enemy, so clipping would show; the raw rewards are read below every
    wrapper and summed over the whole game, across its lives."""
    envs = vector_env(ppo_atari, "BeamRiderNoFrameskip-v4", 1)
    game = envs.envs[0].unwrapped
    first_game = {"rewards": [], "over": False}  # the raw reward of every frame of the first game
    step = game.step

    def recording_step(action):
        obs, reward, terminated, truncated, info = step(action)
        if not first_game["over"]:
            first_game["rewards"].append(reward)
            first_game["over"] = terminated or truncated
        return obs, reward, terminated, truncated, info

    game.step = recording_step
    envs.reset(seed=1)
    envs.action_space.seed(1)
    lives_lost, clipped, games = 0, [], []
    while not games:
        _, reward, terminations, truncations, infos = envs.step(envs.action_space.sample())
        clipped.append(float(reward[0]))
        lives_lost += int(terminations[0] or truncations[0])
        games = ppo_atari.finished_episodes(infos)
    envs.close()
    (episodic_return, episodic_length) = games[0]
    assert lives_lost == 3  # BeamRider's three lives each end an episode for the agent
    assert episodic_return == sum(first_game["rewards"]) and episodic_length == len(first_game["rewards"])
    assert episodic_return > sum(clipped) > 0 and set(clipped) <= {0.0, 1.0}


def test_finished_episodes_are_whole_games():
    # env 0 lost a life (a final_info without "episode"), envs 1 and 2 ended games in the same step
    infos = {
        "final_info": {
            "episode": {"r": np.array([0.0, 7.0, 3.0]), "l": np.array([0, 400, 120]), "t": np.zeros(3)},
            "_episode": np.array([False, True, True]),
        },
        "_final_info": np.array([True, True, True]),
    }
    assert ppo_atari.finished_episodes(infos) == [(7.0, 400), (3.0, 120)]
    # a lost life ends the agent's episode without ending the game: nothing to log
    assert ppo_atari.finished_episodes({"final_info": {"lives": np.array([2])}, "_final_info": np.array([True])}) == []
    assert ppo_atari.finished_episodes({}) == []


@pytest.mark.parametrize(("env_id", "sticky"), [("BreakoutNoFrameskip-v4", 0.0), ("ALE/Breakout-v5", 0.25)])
def test_the_wrapper_stack(env_id, sticky):
    env = ppo_atari.make_env(env_id, 0, False, "unused")()
    # MaxAndSkipEnv does the frame skipping for both kinds of id; sticky actions stay what the id defines
    assert env.unwrapped._frameskip == 1
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(sticky)
    names = []
    layer = env
    while isinstance(layer, gym.Wrapper):
        names.append(type(layer).__name__)
        layer = layer.env
    order = [
        "FrameStackObservation",
        "TransformObservation",
        "ResizeObservation",
        "ClipRewardEnv",
        "FireResetEnv",
        "EpisodicLifeEnv",
        "MaxAndSkipEnv",
        "NoopResetEnv",
        "RecordEpisodeStatistics",
    ]
    assert names[: len(order)] == order
    assert env.get_wrapper_attr("noop_max") == 30
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    env.close()


def test_grey_is_cv2s_rounded_luma_as_in_gymnasium_0x():
    """The grey of Gymnasium 0.29's GrayScaleObservation (cv2: 0.299 R + 0.587 G + 0.114 B, rounded), not 1.x's
    GrayscaleObservation (0.2125 R + 0.7154 G + 0.0721 B, truncated): pure red is 76, not 54."""
    env = ppo_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    grey = env.env  # below the frame stack
    assert type(grey).__name__ == "TransformObservation" and grey.observation_space.shape == (84, 84)
    colours = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [200, 72, 72], [1, 1, 1]]], np.uint8)
    assert grey.func(colours).tolist() == [[76, 150, 29, 110, 1]]
    env.close()


def test_frames_are_the_pixels_of_the_reference_stack():
    """BreakoutNoFrameskip-v4, seed 1, 200 steps of actions 0, 1, 2, 3, 0, ... (a life is lost on the way): the
    observations hash to what the reference's make_env gave on Gymnasium 0.29.1, ale-py 0.9.1 and OpenCV 4.10
    (Gymnasium 1.x's own grayscale gives 18% of the pixels other values)."""
    env = ppo_atari.make_env("BreakoutNoFrameskip-v4", 0, False, "unused")()
    digest = hashlib.sha256()
    obs, _ = env.reset(seed=1)
    digest.update(obs.tobytes())
    for t in range(200):
        obs, _, terminated, truncated, _ = env.step(t % 4)
        digest.update(obs.tobytes())
        if terminated or truncated:
            obs, _ = env.reset()
            digest.update(obs.tobytes())
    env.close()
    assert digest.hexdigest() == "2a7b98e7e16b5bd0d05126936ea66a3f32e7fb99f55e7d880d3adf2ac4ff3944"


def test_fire_reset_only_where_the_game_has_fire():
    env = ppo_atari.make_env("ALE/Freeway-v5", 0, False, "unused")()  # Freeway's actions: NOOP, UP, DOWN
    layer, names = env, []
    while isinstance(layer, gym.Wrapper):
        names.append(type(layer).__name__)
        layer = layer.env
    assert "FireResetEnv" not in names and "EpisodicLifeEnv" in names
    env.close()


def test_agent_shapes_scaling_and_initialisation():
    envs = vector_env(ppo_atari, "BreakoutNoFrameskip-v4", 1)
    agent = ppo_atari.Agent(envs)
    envs.close()
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (5,) and value.shape == (5, 1)
    # the policy head's small output layer: near-uniform over Breakout's 4 actions at the start
    assert entropy.mean().item() == pytest.approx(np.log(4), abs=1e-3)
    # pixels are scaled to [0, 1] inside the agent: bytes in, the same as floats in [0, 1] through the trunk
    hidden = agent.network(obs.float() / 255.0)
    assert torch.allclose(agent.get_value(obs), agent.critic(hidden))
    assert torch.all(agent.network[0].bias == 0) and agent.network[0].weight.shape == (32, 4, 8, 8)
    w = agent.network[7].weight  # the 3136 -> 512 layer: orthogonal rows, gain sqrt(2)
    assert torch.allclose(w @ w.T, 2 * torch.eye(512), atol=1e-4)
