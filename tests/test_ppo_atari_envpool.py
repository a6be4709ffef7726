"""cleanrl/ppo_atari_envpool.py: the EnvPool behaviour the script relies on (the reset step that
--exclude-reset-steps leaves out of the update), its whole-game episode statistics and its video of whole games.
What every script does the same way is in test_scripts.py."""

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
from helpers import load_script, only_run_dir, plain_run, read_scalars, run_script
from test_scripts import TABLE

envpool_script = load_script("ppo_atari_envpool")


def test_envpool_resets_in_the_step_after_an_episode_ends():
    """EnvPool's next-step autoreset, as --exclude-reset-steps leaves it out: the step after a done ignores its
    action, pays nothing, and returns the first observation of the next episode; EnvPool's own step count does not
    count it."""
    envs = envpool_script.make_env("Breakout-v5", 2, 7, False, "unused")  # environments seeded 7 and 8
    twin = envpool_script.make_env("Breakout-v5", 1, 7, False, "unused")  # the same game as the first, played alongside
    envs.reset()
    twin.reset()
    rng = np.random.default_rng(0)
    for _ in range(2000):
        action = rng.integers(0, 4, size=1)
        obs, _, terminations, truncations, infos = envs.step(np.concatenate([action, action]))
        twin.step(action)
        if terminations[0] or truncations[0]:
            break
    else:
        pytest.fail("no episode ended")
    elapsed = infos["elapsed_step"][0]
    # the reset step: the first environment gets another action than its twin, and both still show the same frames
    obs, reward, terminations, truncations, infos = envs.step(np.array([3, 0]))
    twin_obs, twin_reward, *_ = twin.step(np.array([1]))
    assert reward[0] == twin_reward[0] == 0.0 and infos["reward"][0] == 0.0
    assert not terminations[0] and not truncations[0]
    assert np.array_equal(obs[0], twin_obs[0])
    assert infos["elapsed_step"][0] in (0, elapsed)  # 0 after a game over, unchanged after a lost life
    envs.close()
    twin.close()


class ScriptedSteps(gym.vector.VectorEnv):
    """Two stand-in EnvPool environments that replay scripted steps: (unclipped rewards, lives lost, games over by
    the last life, truncations)."""

    num_envs = 2

    def __init__(self, steps):
        self.steps = iter(steps)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2), {}

    def step(self, actions):
        rewards, lives_lost, games_over, truncations = map(np.array, next(self.steps))
        infos = {"reward": rewards, "terminated": games_over.astype(np.int32)}
        return np.zeros(2), np.sign(rewards), lives_lost | games_over, truncations, infos


f, t = False, True
# environment 0 loses a life, then its last; environment 1 is cut short by the time limit, then loses its last life
SCRIPTED_STEPS = [
    ([1.0, 4.0], [f, f], [f, f], [f, f]),
    ([7.0, 0.0], [t, f], [f, f], [f, f]),
    ([0.0, 2.0], [f, f], [f, f], [f, t]),  # 0: the reset step after its lost life; 1: truncated
    ([5.0, 0.0], [f, f], [t, f], [f, f]),  # 0: its last life, the game is over; 1: the reset step
    ([0.0, 3.0], [f, f], [f, t], [f, f]),  # 0: the reset step; 1: its second game is over
    ([2.0, 0.0], [f, f], [f, f], [f, f]),
]
# (return, length) of the games that ended in each step: a length counts every step since the previous game ended,
# reset steps included; environment 1's second game counts from zero, without the truncated game's 6 points
SCRIPTED_GAMES = [[], [], [(6.0, 3)], [(13.0, 4)], [(3.0, 2)], []]


def test_episode_statistics_count_whole_games_and_restart_after_truncation():
    envs = envpool_script.RecordEpisodeStatistics(ScriptedSteps(SCRIPTED_STEPS))
    envs.reset()
    games = [envpool_script.finished_episodes(envs.step(np.zeros(2))[-1]) for _ in SCRIPTED_STEPS]
    assert games == SCRIPTED_GAMES
    assert envs.episode_returns.tolist() == [2.0, 0.0]
    assert envs.episode_lengths.tolist() == [2, 1]


def test_a_real_game_spans_all_its_lives_and_counts_its_steps():
    """On Breakout (5 lives), each game is logged once, when its last life is lost: its return sums the unclipped
    rewards of all its lives and its length counts the steps since the previous game ended, EnvPool's reset steps
    included, as the reference's statistics count them."""
    envs = envpool_script.make_env("Breakout-v5", 2, 3, False, "unused")
    envs.reset()
    rng = np.random.default_rng(0)
    steps, lives_lost, raw, clipped = (np.zeros(2) for _ in range(4))
    games = []
    while len(games) < 3:
        _, reward, terminations, truncations, infos = envs.step(rng.integers(0, 4, size=2))
        steps += 1
        lives_lost += terminations
        raw += infos["reward"]
        clipped += reward
        for i in np.flatnonzero(infos["_episode"]):
            games.append((infos["episode"]["r"][i], infos["episode"]["l"][i]))
            assert games[-1] == (raw[i], steps[i]) and lives_lost[i] == 5 and raw[i] >= clipped[i]
            steps[i] = lives_lost[i] = raw[i] = clipped[i] = 0
    envs.close()


def test_capture_video_records_whole_games_of_environment_0(tmp_path, monkeypatch):
    """One video per game of environment 0 on Gymnasium's schedule (games 0 and 1 here), one frame per step played,
    over all its lives."""
    monkeypatch.chdir(tmp_path)
    envs = envpool_script.make_env("Breakout-v5", 2, 1, True, "run")
    envs.reset()
    rng = np.random.default_rng(0)
    steps, game_steps = 0, []
    while len(game_steps) < 2:
        _, _, _, _, infos = envs.step(rng.integers(0, 4, size=2))
        steps += 1
        if infos["_episode"][0]:
            game_steps.append(steps)
            steps = 0
    envs.close()
    videos = sorted(p.name for p in (tmp_path / "videos" / "run").glob("*.mp4"))
    assert videos == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    for game, length in enumerate(game_steps):
        reader = imageio.get_reader(tmp_path / "videos" / "run" / f"rl-video-episode-{game}.mp4")
        # the mp4 may lose the last frame to rounding in the encoder
        assert length - 1 <= reader.count_frames() <= length and reader.get_data(0).shape == (210, 160, 3)
        reader.close()


def test_exclude_reset_steps_trains_on_fewer_steps_in_as_many_minibatches(tmp_path):
    """With the flag the update leaves out the reset steps (Breakout's random play loses lives within 128 steps), in
    the same number of minibatches, none empty: every loss is a number, and differs from the default run's, whose
    minibatches are the reference's slices of the whole batch (its numbers are checked by test_conformance.py)."""
    # the tiny run of test_scripts.py, whose default is made once for both (helpers.plain_run)
    tiny = next(script for script in TABLE if script.name == "ppo_atari_envpool")
    run_script("ppo_atari_envpool.py", *tiny.args, "--exclude-reset-steps", cwd=tmp_path)
    runs = {"--exclude-reset-steps": only_run_dir(tmp_path), "default": plain_run("ppo_atari_envpool.py", *tiny.args)}
    losses = {}
    for name, run_dir in runs.items():
        scalars = read_scalars(run_dir)
        losses[name] = [value for tag in ("losses/value_loss", "losses/policy_loss") for _, value in scalars[tag]]
        assert len(losses[name]) == 2 * len(tiny.sps_steps) and np.all(np.isfinite(losses[name])), losses[name]
    assert losses["--exclude-reset-steps"] != losses["default"]
