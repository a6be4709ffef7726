"""cleanrl/ppo_atari_envpool.py: runs through the command line, the EnvPool behaviour the script relies on, and its
game statistics."""

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
)

# 2 environments x 256 steps: a fresh policy plays a whole game of Breakout (5 lives) in 120 to 250 steps
TINY = ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "512"]
# one thread: the machine running the tests is usually busy, and two threads then wait on each other

envpool_script = load_script("ppo_atari_envpool")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny run that trains, records videos, saves and evaluates: shared by the tests that read its output."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = run_script("ppo_atari_envpool.py", *TINY, "--capture-video", "--save-model", cwd=cwd)
    return cwd, proc


def test_smoke_run_logs_every_metric(tiny_run):
    cwd, proc = tiny_run
    run_dir = only_run_dir(cwd)
    scalars = check_smoke_run(run_dir, "Breakout-v5__ppo_atari_envpool__1__", range(64, 513, 64), proc.stdout)
    # whole games: unclipped scores (whole points in Breakout) and lengths in agent steps, several lives long
    games = scalars["charts/episodic_return"]
    assert len(games) >= 1
    assert all(value >= 0 and value == int(value) for _, value in games)
    assert all(value > 50 for _, value in scalars["charts/episodic_length"])


def test_save_model_then_evaluate(tiny_run):
    cwd, _ = tiny_run
    run_dir = only_run_dir(cwd)
    state = torch.load(run_dir / "ppo_atari_envpool.cleanrl_model")
    assert {"network.0.weight", "actor.weight", "critic.bias"} <= set(state)
    evals = read_scalars(run_dir)["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))


def test_capture_video_records_games_of_training_and_evaluation(tiny_run):
    cwd, _ = tiny_run
    name = only_run_dir(cwd).name
    training = sorted(p.name for p in (cwd / "videos" / name).glob("*.mp4"))
    evaluation = sorted(p.name for p in (cwd / "videos" / f"{name}-eval").glob("*.mp4"))
    # Gymnasium's schedule: games 0, 1, 8, ...; the evaluation plays 10 games, training at least 1 on environment 0
    assert "rl-video-episode-0.mp4" in training
    assert evaluation == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4", "rl-video-episode-8.mp4"]
    assert all(p.stat().st_size > 1000 for p in (cwd / "videos").rglob("*.mp4"))


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "CartPole-v1"], ["needs one of EnvPool's Atari games", "ppo.py"]),
        (["--env-id", "BreakoutNoFrameskip-v4"], ["cannot make environment", "ppo_atari.py"]),
        (["--num-minibatches", "3"], ["does not divide", "--num-minibatches 3"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_atari_envpool.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_atari_envpool.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- the EnvPool behaviour the script relies on, and its statistics -------------------------------------------------


def test_envpool_resets_in_the_step_after_an_episode_ends():
    """EnvPool's next-step autoreset, as the script masks it: the step after a done ignores its action, pays
    nothing, and returns the first observation of the next episode; EnvPool's own step count does not count it."""
    envs = envpool_script.make_env("Breakout-v5", 2, seed=7)  # environments seeded 7 and 8
    twin = envpool_script.make_env("Breakout-v5", 1, seed=7)  # the same game as the first, played alongside
    envs.reset()
    twin.reset()
    rng = np.random.default_rng(0)
    for _ in range(2000):
        action = rng.integers(0, 4, size=1)
        obs, _, terminations, truncations, infos = envs.step(np.concatenate([action, action]).astype(np.int32))
        twin.step(action.astype(np.int32))
        if terminations[0] or truncations[0]:
            break
    else:
        pytest.fail("no episode ended")
    elapsed = infos["elapsed_step"][0]
    # the reset step: the first environment gets another action than its twin, and both still show the same frames
    obs, reward, terminations, truncations, infos = envs.step(np.array([3, 0], np.int32))
    twin_obs, twin_reward, *_ = twin.step(np.array([1], np.int32))
    assert reward[0] == twin_reward[0] == 0.0 and infos["reward"][0] == 0.0
    assert not terminations[0] and not truncations[0]
    assert np.array_equal(obs[0], twin_obs[0])
    assert infos["elapsed_step"][0] in (0, elapsed)  # 0 after a game over, unchanged after a lost life
    envs.close()
    twin.close()


def test_episode_statistics_count_whole_games_and_restart_after_truncation():
    stats = envpool_script.EpisodeStatistics(2)
    f, t = False, True
    # (unclipped rewards, dones: a life lost or the game ended, game overs: the last life or the time limit)
    steps = [
        ([1.0, 4.0], [f, f], [f, f]),
        ([7.0, 0.0], [t, f], [f, f]),  # environment 0 loses a life: no game ends
        ([0.0, 2.0], [f, t], [f, t]),  # 0: the reset step (not counted); 1: truncated by the time limit
        ([5.0, 0.0], [t, f], [t, f]),  # 0: its last life: the game is over; 1: the reset step
        ([0.0, 3.0], [f, t], [f, t]),  # 0: the reset step; 1: its second game ends (its last life)
        ([2.0, 0.0], [f, f], [f, f]),
    ]
    finished = [stats.step(np.array(r), np.array(d), np.array(g)) for r, d, g in steps]
    # environment 1's second game counts from zero: the truncated game's 6 points do not leak into it
    assert finished == [[], [], [(6.0, 3)], [(13.0, 3)], [(3.0, 1)], []]
    assert stats.returns.tolist() == [2.0, 0.0] and stats.lengths.tolist() == [1, 0]


def test_ended_games_are_game_overs_and_truncations():
    infos = {"terminated": np.array([1, 0, 0], np.int32)}
    truncations = np.array([False, True, False])
    assert envpool_script.ended_games(truncations, infos).tolist() == [True, True, False]


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_atari_envpool")
    assert list(tmp_path.iterdir()) == []
