"""cleanrl/ppo_pettingzoo_ma_atari.py: what is its own: real PettingZoo Atari games (ale-py's ROMs) through SuperSuit's
wrappers, seen through Gymnasium's vector API with a sub-environment per player; the per-player statistics, the
agent-indicator planes, and the actions reaching each player's own paddle."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import COMMON_METRICS, load_script, only_run_dir, read_scalars, run_script, script_env

ppo_pz = load_script("ppo_pettingzoo_ma_atari")

# On PYTHONPATH, Python imports it at startup: every game ends after 200 frames, 50 agent steps (PettingZoo's own
# truncation), so that random play finishes games in a tiny run.
SHORT_GAMES = """
import pettingzoo.atari.base_atari_env as base

full_length_init = base.ParallelAtariEnv.__init__


def short_game_init(self, *args, **kwargs):
    full_length_init(self, *args, **kwargs)
    self.max_cycles = 200


base.ParallelAtariEnv.__init__ = short_game_init
"""
SHORT = ["--env-id", "surround_v2", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "512"]


def test_every_player_episode_is_logged(tmp_path):
    """Two games of two players, every game truncated after 50 agent steps: each player's episode is logged under
    its player's tags and the common ones, with the length in agent steps and the game's own score."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SHORT_GAMES)
    env = script_env(PYTHONPATH=str(tmp_path / "site"))
    proc = run_script("ppo_pettingzoo_ma_atari.py", *SHORT, cwd=tmp_path, env=env)
    scalars = read_scalars(only_run_dir(tmp_path))
    per_player = {f"charts/episodic_{what}-player{i}" for what in ("return", "length") for i in (0, 1)}
    assert COMMON_METRICS | per_player <= set(scalars), (COMMON_METRICS | per_player) - set(scalars)
    # 128 steps of 4 environments: every environment ends an episode at its 50th and 100th step
    for i in (0, 1):
        lengths = scalars[f"charts/episodic_length-player{i}"]
        assert lengths == [(200, 50.0), (200, 50.0), (400, 50.0), (400, 50.0)]
    assert len(scalars["charts/episodic_length"]) == 8
    # zero-sum: within a game, what one player scores the other concedes
    returns0 = [value for _, value in scalars["charts/episodic_return-player0"]]
    returns1 = [value for _, value in scalars["charts/episodic_return-player1"]]
    assert returns0 == [-value for value in returns1]
    # in self-play the returns cancel out: the progress shows the length of the games
    assert "episodic length 50.0" in proc.stdout


def test_num_envs_must_hold_whole_games(tmp_path):
    proc = run_script("ppo_pettingzoo_ma_atari.py", "--num-envs", "3", cwd=tmp_path, check=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "cannot make environment 'pong_v3': --num-envs must be a multiple of 2, the players of a game" in lines[0]
    assert not (tmp_path / "runs").exists()


# ---- unit tests ---------------------------------------------------------------------------------------------


def test_vector_env_has_a_player_per_sub_environment():
    envs = ppo_pz.make_env("pong_v3", 4, False, "unused")
    assert isinstance(envs, gym.vector.VectorEnv) and envs.num_envs == 4
    assert envs.single_observation_space.shape == (84, 84, 6) and envs.single_action_space == gym.spaces.Discrete(6)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (4, 84, 84, 6) and obs.dtype == np.uint8
    # sub-environment i is player i % 2: its own indicator plane is set, the other's is not
    assert (obs[0::2, ..., 4] == 255).all() and (obs[0::2, ..., 5] == 0).all()
    assert (obs[1::2, ..., 5] == 255).all() and (obs[1::2, ..., 4] == 0).all()
    history = [obs]
    for t in range(20):
        obs, rewards, terminations, truncations, info = envs.step(np.array([t % 6, 1, 2, 3]))
        assert rewards.shape == terminations.shape == truncations.shape == (4,) and isinstance(info, dict)
        history.append(obs)
    # the seed fixes the games
    obs, _ = envs.reset(seed=3)
    again = [obs] + [envs.step(np.array([t % 6, 1, 2, 3]))[0] for t in range(20)]
    assert all(np.array_equal(a, b) for a, b in zip(history, again))
    envs.close()


def test_wrappers_and_statistics_of_every_player(monkeypatch):
    """The reference's SuperSuit stack, then Gymnasium's episode statistics over every player's raw rewards."""
    import pettingzoo.atari.base_atari_env as base_atari_env

    init = base_atari_env.ParallelAtariEnv.__init__

    def short_game_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.max_cycles = 40  # 10 agent steps

    monkeypatch.setattr(base_atari_env.ParallelAtariEnv, "__init__", short_game_init)
    envs = ppo_pz.make_env("boxing_v2", 2, False, "unused")
    assert type(envs).__name__ == "RecordEpisodeStatistics" and isinstance(envs.env, ppo_pz.SelfPlayVectorEnv)
    envs.reset(seed=1)
    sums, finished = np.zeros(2), []
    for t in range(10):
        _, rewards, terminations, truncations, infos = envs.step(np.array([1, 1]))  # both players punch
        sums += rewards
        finished += ppo_pz.finished_episodes_by_env(infos)
    envs.close()
    assert (truncations == 1).all()
    assert finished == [(0, sums[0], 10), (1, sums[1], 10)]


def test_finished_episodes_by_env_name_the_sub_environment():
    infos = {
        "episode": {"r": np.array([0.0, 1.0, -1.0, 0.0]), "l": np.array([0, 9, 9, 0]), "t": np.zeros(4)},
        "_episode": np.array([False, True, True, False]),
    }
    assert ppo_pz.finished_episodes_by_env(infos) == [(1, 1.0, 9), (2, -1.0, 9)]
    assert ppo_pz.finished_episodes_by_env({}) == []


def test_indicator_planes_reach_the_network_as_0_or_1():
    """The 4 stacked frames and the player-indicator planes, which SuperSuit sets to the space's maximum, 255: all
    divided by 255, the frames reach the network in [0, 1] and the indicators as exactly 0 or 1."""
    envs = ppo_pz.make_env("pong_v3", 2, False, "unused")
    obs, _ = envs.reset(seed=1)
    agent = ppo_pz.Agent(envs)
    envs.close()
    assert set(np.unique(obs[..., 4:])) == {0, 255}
    assert agent.network[0].in_channels == 6
    x = torch.as_tensor(obs)
    expected = agent.critic(agent.network(x.permute(0, 3, 1, 2).float() / 255.0))
    assert torch.allclose(agent.get_value(x), expected, atol=1e-6)
    _, _, entropy, _ = agent.get_action_and_value(x)
    assert entropy.mean().item() == pytest.approx(np.log(6), abs=1e-3)


def test_roms_come_from_ale_py():
    assert "ale_py" in ppo_pz.ROM_DIR


def test_num_envs_is_whole_games_of_any_number_of_players():
    """None asks for one game; otherwise num_envs must hold whole games. The player count comes with the envs."""
    for env_id, players in (("tennis_v3", 2), ("warlords_v3", 4)):
        envs = ppo_pz.make_env(env_id, None, False, "unused")
        assert envs.num_envs == envs.num_players == players
        envs.close()
    envs = ppo_pz.make_env("warlords_v3", 8, False, "unused")
    assert envs.num_envs == 8 and envs.num_players == 4
    envs.close()
    with pytest.raises(ValueError, match="multiple of 4"):
        ppo_pz.make_env("warlords_v3", 6, False, "unused")


def test_evaluate_returns_player_0s_games(tmp_path, monkeypatch):
    """evaluate plays one game at a time and keeps player 0's return of each: the same as a replay that sums
    sub-environment 0's rewards with the same seeds."""
    import pettingzoo.atari.base_atari_env as base_atari_env

    init = base_atari_env.ParallelAtariEnv.__init__

    def short_game_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.max_cycles = 400  # 100 agent steps

    monkeypatch.setattr(base_atari_env.ParallelAtariEnv, "__init__", short_game_init)
    monkeypatch.chdir(tmp_path)
    envs = ppo_pz.make_env("pong_v3", None, False, "unused")
    torch.manual_seed(3)
    agent = ppo_pz.Agent(envs)
    torch.save(agent.state_dict(), "model")
    torch.manual_seed(5)
    returns = ppo_pz.evaluate("model", "pong_v3", 2, "eval", "cpu", capture_video=False, seed=7)
    torch.manual_seed(5)
    ppo_pz.Agent(envs)  # evaluate builds one before loading the weights: the same draws from the generator
    obs, _ = envs.reset(seed=7)
    replay = []
    for _ in range(2):
        sums, done = np.zeros(2), False
        while not done:
            with torch.no_grad():
                actions = agent.get_action_and_value(torch.Tensor(obs))[0]
            obs, rewards, terminations, truncations, _ = envs.step(actions.numpy())
            sums, done = sums + rewards, truncations[0] or terminations[0]
        replay.append(sums)
    envs.close()
    assert returns == [game[0] for game in replay]
    assert any(game[0] != game[1] for game in replay), "the games tell the players apart"


def test_capture_video_records_game_0(tmp_path, monkeypatch):
    import imageio.v3 as iio

    monkeypatch.chdir(tmp_path)
    envs = ppo_pz.make_env("pong_v3", 2, True, "run")
    envs.reset(seed=1)
    for _ in range(10):
        envs.step(np.array([0, 0]))
    envs.close()
    (video,) = (tmp_path / "videos" / "run").glob("*.mp4")
    # the first screen and one per step, in the emulator's colours
    assert iio.imread(video).shape == (11, 210, 160, 3)


def test_each_sub_environment_moves_its_own_players_paddle():
    """The action at index i of the vector environment controls player i: in Pong, player 0 is the right paddle and
    player 1 the left one. A paddle's height is read from the last frame, in the columns where it is drawn."""
    envs = ppo_pz.make_env("pong_v3", 2, False, "x")
    envs.reset(seed=1)

    def paddle_heights(actions, steps=15):
        for _ in range(steps):
            obs, *_ = envs.step(np.array(actions))
        frame = obs[0, 14:78, :, 3].astype(int)  # the playing field of the newest frame
        background = np.median(frame[:, 30:50])
        return [
            np.flatnonzero((np.abs(frame[:, cols] - background) > 20).any(axis=1)).mean()
            for cols in (slice(72, 78), slice(6, 12))
        ]

    up, noop = 2, 0
    # each step: one player moves up, the other does nothing; then both rest, for the paddles' inertia to settle
    right, left = paddle_heights([noop, noop])
    paddle_heights([up, noop], steps=8)
    right_after, left_after = paddle_heights([noop, noop], steps=10)
    assert right_after < right - 10 and abs(left_after - left) < 3
    paddle_heights([noop, up], steps=8)
    right_last, left_last = paddle_heights([noop, noop], steps=10)
    assert left_last < left_after - 10 and abs(right_last - right_after) < 3
    envs.close()
