"""cleanrl/ppo_atari.py: runs through the command line on real ROMs, the Atari wrappers, and the episode statistics."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import (
    FAKE_ATARI_GAME,
    assert_same_scalars,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_copied_alone,
    run_script,
)

# Two environments of 256 steps each: enough for random play to finish a few Breakout games.
TINY = ["--total-timesteps", "512", "--num-envs", "2", "--num-steps", "128"]

ppo_atari = load_script("ppo_atari")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny training run on BreakoutNoFrameskip-v4, shared by the tests that only read its output."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = run_script("ppo_atari.py", *TINY, cwd=cwd)
    return cwd, proc


def test_smoke_run_logs_every_metric(tiny_run):
    cwd, proc = tiny_run
    scalars = check_smoke_run(only_run_dir(cwd), "BreakoutNoFrameskip-v4__ppo_atari__1__", [256, 512], proc.stdout)
    # a game's length counts emulator frames: at least 4 per agent step
    assert all(length >= 4 * 5 for _, length in scalars["charts/episodic_length"])
    # neither the emulator's banner nor the legacy gym package's notice reaches the console
    assert "A.L.E" not in proc.stdout + proc.stderr and "Gym has been unmaintained" not in proc.stderr


def test_same_seed_logs_identical_scalars(tiny_run, tmp_path):
    cwd, _ = tiny_run
    run_script("ppo_atari.py", *TINY, cwd=tmp_path)
    assert_same_scalars(only_run_dir(cwd), only_run_dir(tmp_path))


def test_v5_id_copied_alone_then_save_model_and_evaluate(tmp_path):
    """An ALE/...-v5 id works too (its run folder nests under runs/ALE/), the script needs nothing from this
    repository, and --save-model saves the weights and evaluates them for 10 whole games."""
    args = ["--env-id", "ALE/Breakout-v5", "--total-timesteps", "64", "--num-envs", "2", "--num-steps", "32"]
    run_dir = run_copied_alone("ppo_atari.py", *args, "--save-model", tmp_path=tmp_path)
    assert run_dir.parent.name == "ALE" and run_dir.name.startswith("Breakout-v5__ppo_atari__1__")
    state = torch.load(run_dir / "ppo_atari.cleanrl_model")
    assert {"network.0.weight", "network.7.weight", "actor.weight", "critic.bias"} <= set(state)
    evals = read_scalars(run_dir)["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))
    assert all(value >= 0 for _, value in evals)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "CartPole-v1"], ["needs an Atari game", "use ppo.py"]),
        (["--env-id", "NoSuchGameNoFrameskip-v4"], ["cannot make environment 'NoSuchGameNoFrameskip-v4'"]),
        (["--num-minibatches", "3"], ["does not divide", "--num-minibatches 3"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_atari.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_atari.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- the Atari wrappers and the episode statistics ----------------------------------------------


def test_logged_return_is_the_unclipped_score_of_a_whole_game():
    """A stand-in game pays 3 points a frame and has 3 lives of 40 frames: the agent sees clipped rewards and an
    episode end at every lost life, but each game is logged once, with its real return (360) and length (120)."""
    envs = ppo_atari.make_vector_env(FAKE_ATARI_GAME, 2, False, "unused")
    envs.reset(seed=1)
    games, dones, rewards = [], 0, []
    for _ in range(100):
        _, reward, terminations, truncations, infos = envs.step([0, 2])
        rewards.extend(reward.tolist())
        dones += int((terminations | truncations).sum())
        games.extend(ppo_atari.finished_games(infos))
    envs.close()
    assert set(rewards) == {1.0}  # 4 frames x 3 points, clipped
    assert len(games) >= 4 and games == [(360.0, 120)] * len(games)
    # three episode ends for the agent per game (two lost lives, then game over); each open game may have lost lives
    assert 3 * len(games) <= dones <= 3 * len(games) + 2 * 2


def test_logged_return_on_a_real_rom_sums_the_raw_rewards_over_all_lives():
    """BeamRider pays 44 points and more per enemy, so clipping would show; the raw rewards are read below every
    wrapper and summed over the whole game, across its lives."""
    envs = ppo_atari.make_vector_env("BeamRiderNoFrameskip-v4", 1, False, "unused")
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
        games = ppo_atari.finished_games(infos)
    envs.close()
    (episodic_return, episodic_length) = games[0]
    assert lives_lost == 3  # BeamRider's three lives each end an episode for the agent
    assert episodic_return == sum(first_game["rewards"]) and episodic_length == len(first_game["rewards"])
    assert episodic_return > sum(clipped) > 0 and set(clipped) <= {0.0, 1.0}


def test_finished_games_reads_final_info_of_same_step_autoreset():
    # env 0 lost a life (a final_info without "episode"), envs 1 and 2 ended games in the same step
    infos = {
        "final_info": {
            "episode": {"r": np.array([0.0, 7.0, 3.0]), "l": np.array([0, 400, 120]), "t": np.zeros(3)},
            "_episode": np.array([False, True, True]),
        },
        "_final_info": np.array([True, True, True]),
    }
    assert ppo_atari.finished_games(infos) == [(7.0, 400), (3.0, 120)]
    assert ppo_atari.finished_games({"final_info": {"lives": np.array([2])}, "_final_info": np.array([True])}) == []
    assert ppo_atari.finished_games({}) == []


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
        "GrayscaleObservation",
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


def test_fire_reset_only_where_the_game_has_fire():
    env = ppo_atari.make_env("ALE/Freeway-v5", 0, False, "unused")()  # Freeway's actions: NOOP, UP, DOWN
    layer, names = env, []
    while isinstance(layer, gym.Wrapper):
        names.append(type(layer).__name__)
        layer = layer.env
    assert "FireResetEnv" not in names and "EpisodicLifeEnv" in names
    env.close()


def test_check_env_id():
    assert ppo_atari.check_env_id("PongNoFrameskip-v4") is None
    assert ppo_atari.check_env_id("ALE/BeamRider-v5") is None
    assert "needs an Atari game" in ppo_atari.check_env_id("Acrobot-v1")
    assert "doesn't exist" in ppo_atari.check_env_id("ALE/NoSuchGame-v5")


def test_agent_shapes_scaling_and_initialisation():
    envs = ppo_atari.make_vector_env("BreakoutNoFrameskip-v4", 1, False, "unused")
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
    # channels-last weights (the script's layout) compute the same function
    fast = ppo_atari.Agent(envs).to(memory_format=torch.channels_last)
    fast.load_state_dict(agent.state_dict())
    assert torch.allclose(fast.get_value(obs), agent.get_value(obs), atol=1e-5)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_atari")
    assert list(tmp_path.iterdir()) == []
