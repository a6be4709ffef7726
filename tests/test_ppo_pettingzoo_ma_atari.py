"""cleanrl/ppo_pettingzoo_ma_atari.py: runs on real PettingZoo Atari games (ale-py's ROMs), the SuperSuit vector
environment seen through Gymnasium 1.x, the per-player statistics and the agent-indicator channels."""

import runpy
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pettingzoo
import pytest
import torch
from helpers import (
    COMMON_METRICS,
    ROOT,
    SCRIPTS,
    assert_same_scalars,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_script,
)

# One two-player game of Pong, 32 steps, twice. Random play needs some 1,500 steps to end a game of Pong: the run
# shows the losses, and the episode statistics are tested on shortened games below.
TINY = ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128"]

ppo_pz = load_script("ppo_pettingzoo_ma_atari")


def test_smoke_run_on_pong(tmp_path):
    proc = run_script("ppo_pettingzoo_ma_atari.py", *TINY, cwd=tmp_path)
    # 128 steps of Pong end no game: every metric but the episodes'
    losses = {tag for tag in COMMON_METRICS if not tag.startswith("charts/episodic")}
    prefix = "pong_v3__ppo_pettingzoo_ma_atari__1__"
    check_smoke_run(only_run_dir(tmp_path), prefix, [64, 128], proc.stdout, metrics=losses)
    assert "episodic length" in proc.stdout
    assert proc.stderr == ""


def run_in_process(monkeypatch, cwd, *args, max_cycles=200):
    """Runs the script as __main__ in this process, on games that PettingZoo truncates after `max_cycles` frames
    (50 agent steps at 4 frames a step), so that random play finishes episodes within a tiny run."""
    make = pettingzoo.make
    monkeypatch.setattr(pettingzoo, "make", lambda *a, **kw: make(*a, max_cycles=max_cycles, **kw))
    monkeypatch.setattr(sys, "argv", ["ppo_pettingzoo_ma_atari.py", *map(str, args)])
    monkeypatch.chdir(cwd)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the subprocesses run (this runs in a module fixture too, before one_torch_thread)
    try:
        runpy.run_path(str(SCRIPTS / "ppo_pettingzoo_ma_atari.py"), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    return only_run_dir(cwd)


SHORT = ["--env-id", "surround_v2", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "512"]


@pytest.fixture(scope="module")
def short_games_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        cwd = tmp_path_factory.mktemp("short")
        return run_in_process(monkeypatch, cwd, *SHORT)


def test_every_player_episode_is_logged(short_games_run):
    """Two games of two players, every game truncated after 50 agent steps: each player's episode is logged under
    its player's tags and the common ones, with the length in agent steps and the game's own score."""
    scalars = read_scalars(short_games_run)
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


def test_same_seed_logs_identical_scalars(short_games_run, tmp_path, monkeypatch):
    assert_same_scalars(short_games_run, run_in_process(monkeypatch, tmp_path, *SHORT))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "Pong-v5"], ["unknown PettingZoo Atari game 'Pong-v5'", "pong_v3", "surround_v2"]),
        (["--num-envs", "3"], ["pong_v3 has 2 players", "--num-envs 3 must be a multiple of 2"]),
        (["--num-steps", "0"], ["--num-steps must be positive"]),
        (["--upload-model"], ["add --save-model"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_pettingzoo_ma_atari.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_pettingzoo_ma_atari.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- unit tests ---------------------------------------------------------------------------------------------


def fake_envs(indicator_max):
    """Spaces like SuperSuit's: 4 stacked uint8 frames, then 2 player-indicator planes of maximum `indicator_max`."""
    high = np.full((84, 84, 6), 255, np.uint8)
    high[..., 4:] = indicator_max
    return SimpleNamespace(
        single_observation_space=gym.spaces.Box(np.zeros_like(high), high, dtype=np.uint8),
        single_action_space=gym.spaces.Discrete(6),
    )


@pytest.mark.parametrize("indicator_max", [255, 1])
def test_indicator_channels_reach_the_network_as_0_or_1(indicator_max):
    """Only the frames are scaled down from [0, 255]. The indicator planes reach the network as 0 and 1: left as they
    are where they already hold 1 (the SuperSuit of the reference), divided by the maximum SuperSuit 3.11 writes."""
    agent = ppo_pz.Agent(fake_envs(indicator_max))
    obs = torch.randint(0, 256, (3, 84, 84, 6), dtype=torch.uint8)
    obs[..., 4:] = 0
    obs[0, ..., 4] = obs[1:, ..., 5] = indicator_max
    x = agent.preprocess(obs)
    assert x.shape == (3, 6, 84, 84)
    torch.testing.assert_close(x[:, :4], obs.permute(0, 3, 1, 2)[:, :4].float() / 255.0)
    assert torch.equal(x[0, 4], torch.ones(84, 84)) and torch.equal(x[0, 5], torch.zeros(84, 84))
    assert torch.equal(x[1:, 4], torch.zeros(2, 84, 84)) and torch.equal(x[1:, 5], torch.ones(2, 84, 84))
    if indicator_max == 1:
        assert torch.equal(x[:, 4:], obs.permute(0, 3, 1, 2)[:, 4:].float())  # unscaled


def test_vector_env_speaks_gymnasium_with_a_player_per_environment():
    envs = ppo_pz.make_vector_env("pong_v3", 4, False, "unused")
    assert isinstance(envs, gym.vector.VectorEnv) and envs.num_envs == 4
    assert envs.single_observation_space.shape == (84, 84, 6) and envs.single_action_space == gym.spaces.Discrete(6)
    assert envs.observation_space.shape == (4, 84, 84, 6) and envs.action_space == gym.spaces.MultiDiscrete([6] * 4)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, info = envs.reset(seed=3)
    assert obs.dtype == np.uint8 and info == {}
    # sub-environment i is player i % 2: its own indicator plane is set, the other's is not
    assert (obs[0::2, ..., 4] == 255).all() and (obs[0::2, ..., 5] == 0).all()
    assert (obs[1::2, ..., 5] == 255).all() and (obs[1::2, ..., 4] == 0).all()
    history = [obs]
    for t in range(20):
        obs, rewards, terminations, truncations, info = envs.step(np.array([t % 6, 1, 2, 3]))
        assert rewards.shape == (4,) and terminations.dtype == truncations.dtype == np.bool_ and info == {}
        history.append(obs)
    # the seed fixes the games
    obs, _ = envs.reset(seed=3)
    again = [obs] + [envs.step(np.array([t % 6, 1, 2, 3]))[0] for t in range(20)]
    assert all(np.array_equal(a, b) for a, b in zip(history, again))
    envs.close()


def test_roms_come_from_ale_py():
    game = ppo_pz.make_game("tennis_v3")
    assert game.unwrapped.rom_path.startswith(ppo_pz.ROM_DIR) and "ale_py" in ppo_pz.ROM_DIR
    assert ppo_pz.count_players("tennis_v3") == 2
    game.close()


def test_capture_video_records_game_0(tmp_path, monkeypatch):
    import imageio.v3 as iio

    monkeypatch.chdir(tmp_path)
    envs = ppo_pz.make_vector_env("pong_v3", 2, True, "run")
    envs.reset(seed=1)
    for _ in range(10):
        envs.step(np.array([0, 0]))
    envs.close()
    (video,) = (tmp_path / "videos" / "run").glob("*.mp4")
    # the first screen and one per step, in the emulator's colours
    assert iio.imread(video).shape == (11, 210, 160, 3)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_pettingzoo_ma_atari")
    assert list(tmp_path.iterdir()) == []


def test_episode_statistics_name_the_player():
    stats = ppo_pz.EpisodeStatistics(4)
    assert stats.step(np.array([1.0, -1.0, 0.0, 0.0]), np.zeros(4, bool)) == []
    # both players of game 0 finish together
    assert stats.step(np.array([0.0, 0.0, 1.0, -1.0]), np.array([True, True, False, False])) == [
        (0, 1.0, 2),
        (1, -1.0, 2),
    ]


def test_vs_random_check_plays_each_side_against_random_players(tmp_path, monkeypatch, capsys):
    """benchmark/vs_random.py, the learning check of self-play: the trained and a fresh agent each play the given
    number of games (truncated here after 50 agent steps), taking the sides in turn, and get a table row each."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmark"))  # as when run as a script: it imports speed.py beside it
    vs_random = load_script("vs_random", ROOT / "benchmark")
    envs = ppo_pz.make_vector_env("pong_v3", 2, False, "x")
    model = tmp_path / "agent.cleanrl_model"
    torch.save(ppo_pz.Agent(envs).state_dict(), model)
    envs.close()
    make = pettingzoo.make
    monkeypatch.setattr(pettingzoo, "make", lambda *a, **kw: make(*a, max_cycles=200, **kw))
    monkeypatch.setattr(sys, "argv", ["vs_random.py", str(model), "--games", "2"])
    vs_random.main()
    out, err = capsys.readouterr()
    rows = [line.split("|")[1:-1] for line in out.splitlines()[2:]]
    assert [row[0].strip() for row in rows] == ["untrained", "trained"]
    assert all(row[1].strip() == "2" and row[3].strip() == "50" for row in rows)
    assert all(-21 <= float(row[2].split("±")[0]) <= 21 for row in rows)
    assert err.count("agent as player 0") == 2 and err.count("agent as player 1") == 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["missing.cleanrl_model"], "no saved model"),
        (["{model}", "--games", "0"], "--games must be positive"),
        (["{model}", "--env-id", "nope_v0"], "unknown PettingZoo Atari game"),
        (["{model}"], "cannot load"),  # an empty file is no model
        (["{pong_model}", "--env-id", "boxing_v2"], "cannot load"),  # Pong's 6 actions, Boxing's 18
    ],
)
def test_vs_random_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    (tmp_path / "m.cleanrl_model").write_bytes(b"")
    envs = ppo_pz.make_vector_env("pong_v3", 2, False, "x")
    torch.save(ppo_pz.Agent(envs).state_dict(), tmp_path / "pong.cleanrl_model")
    envs.close()
    args = [a.format(model=tmp_path / "m.cleanrl_model", pong_model=tmp_path / "pong.cleanrl_model") for a in args]
    proc = run_script(ROOT / "benchmark" / "vs_random.py", *args, cwd=tmp_path, check=False)
    assert_user_error(proc, "vs_random.py", fragment)


def test_each_sub_environment_moves_its_own_players_paddle():
    """The action at index i of the vector environment controls player i: in Pong, player 0 is the right paddle and
    player 1 the left one. A paddle's height is read from the last frame, in the columns where it is drawn."""
    envs = ppo_pz.make_vector_env("pong_v3", 2, False, "x")
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
