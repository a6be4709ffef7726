"""cleanrl/ppo_procgen.py: runs through the command line, the Gymnasium adapter of Procgen's games, the IMPALA
network and the reward normalisation."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import (
    assert_same_scalars,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_copied_alone,
    run_script,
)

# bossfight: random play ends its episodes in about 30 steps, so two environments of 128 steps finish several.
TINY = [
    "--env-id", "bossfight", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256",
    "--num-minibatches", "2", "--capture-video", "--save-model",
]  # fmt: skip

ppo_procgen = load_script("ppo_procgen")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny training run (with video and the saved model's evaluation), shared by the tests that read its output."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = run_script("ppo_procgen.py", *TINY, cwd=cwd)
    return cwd, proc


def test_smoke_run_logs_every_metric(tiny_run):
    cwd, proc = tiny_run
    scalars = check_smoke_run(only_run_dir(cwd), "bossfight__ppo_procgen__1__", [128, 256], proc.stdout)
    # no annealing by default: the rate stays at the reference's 5e-4
    assert [lr for _, lr in scalars["charts/learning_rate"]] == [pytest.approx(5e-4)] * 2
    # the game's own rewards, not the normalised ones: bossfight pays whole points
    returns = [value for _, value in scalars["charts/episodic_return"]]
    assert len(returns) >= 2 and all(value == int(value) >= 0 for value in returns)
    # the legacy gym package's notice, printed when procgen is imported, does not reach the console
    assert "Gym has been unmaintained" not in proc.stderr


def test_capture_video_records_game_0(tiny_run):
    cwd, _ = tiny_run
    name = only_run_dir(cwd).name
    for folder in (f"videos/{name}", f"videos/{name}-eval"):
        videos = list((cwd / folder).glob("*.mp4"))
        assert videos and all(v.stat().st_size > 1000 for v in videos), folder


def test_save_model_then_evaluate(tiny_run):
    cwd, _ = tiny_run
    run_dir = only_run_dir(cwd)
    state = torch.load(run_dir / "ppo_procgen.cleanrl_model")
    assert {"network.0.conv.weight", "network.2.res_block1.conv1.bias", "actor.weight", "critic.bias"} <= set(state)
    evals = read_scalars(run_dir)["eval/episodic_return"]
    assert [step for step, _ in evals] == list(range(10))


def test_copied_alone_logs_the_same_scalars(tiny_run, tmp_path):
    """The script needs nothing from this repository, and the seed fixes Procgen's levels: a second run with the
    same arguments logs exactly the same scalars."""
    cwd, _ = tiny_run
    run_dir = run_copied_alone("ppo_procgen.py", *TINY, tmp_path=tmp_path)
    assert_same_scalars(only_run_dir(cwd), run_dir)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "CartPole-v1"], ["unknown Procgen game 'CartPole-v1'", "starpilot"]),
        (["--num-envs", "0"], ["--num-envs must be positive"]),
        (["--num-envs", "3", "--num-steps", "5"], ["does not divide", "--num-minibatches 8"]),
        (["--upload-model"], ["add --save-model"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_procgen.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_procgen.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


# ---- unit tests ---------------------------------------------------------------------------------------------


def play(envs, seed, steps=100):
    """Resets with `seed` and plays fixed actions; returns everything the environment gave back."""
    obs, info = envs.reset(seed=seed)
    history = [obs]
    actions = np.arange(envs.num_envs) % envs.single_action_space.n
    for _ in range(steps):
        history.extend(envs.step(actions)[:4])
    return history


def test_vector_adapter_speaks_gymnasium():
    envs = ppo_procgen.make_vector_env("bossfight", 3, False, "unused")
    assert isinstance(envs, gym.vector.VectorEnv) and envs.num_envs == 3
    assert envs.single_observation_space == gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    assert envs.single_action_space == gym.spaces.Discrete(15)
    assert envs.observation_space.shape == (3, 64, 64, 3) and envs.action_space == gym.spaces.MultiDiscrete([15] * 3)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, info = envs.reset(seed=1)
    assert obs.shape == (3, 64, 64, 3) and obs.dtype == np.uint8 and info == {}
    episodes_ended = 0
    for _ in range(100):
        obs, rewards, terminations, truncations, info = envs.step(np.array([0, 1, 2]))
        assert obs.shape == (3, 64, 64, 3) and obs.dtype == np.uint8
        assert rewards.shape == (3,) and terminations.dtype == truncations.dtype == np.bool_
        assert not truncations.any()  # Procgen never truncates
        episodes_ended += terminations.sum()
    assert episodes_ended > 0
    envs.close()


def test_reset_seed_fixes_the_levels():
    envs = ppo_procgen.make_vector_env("bossfight", 2, False, "unused")
    first, again, other = play(envs, 7), play(envs, 7), play(envs, 8)
    envs.close()
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0])


def test_capture_video_records_the_episodes_of_game_0(tmp_path, monkeypatch):
    import imageio.v3 as iio

    monkeypatch.chdir(tmp_path)
    envs = ppo_procgen.make_vector_env("bossfight", 2, True, "run")
    envs.reset(seed=1)
    rng = np.random.default_rng(0)
    length = 0
    while True:  # until game 0 ends its first episode
        length += 1
        _, _, terminations, _, _ = envs.step(rng.integers(0, 15, 2))
        if terminations[0]:
            break
    envs.close()
    videos = sorted(v.name for v in (tmp_path / "videos" / "run").glob("*.mp4"))
    assert videos == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    # the first observation, then one frame per step but the last (same-step autoreset shows the next episode's first)
    frames = iio.imread(tmp_path / "videos" / "run" / "rl-video-episode-0.mp4")
    assert frames.shape == (length, 64, 64, 3)


def test_unknown_game_is_caught_before_procgen_aborts():
    assert ppo_procgen.check_env_id("starpilot") is None
    assert "unknown Procgen game 'Pong'" in ppo_procgen.check_env_id("Pong")


def test_reward_scaler_uses_gamma_and_restarts_returns():
    scaler = ppo_procgen.RewardScaler(2, gamma=0.999)
    scaled = scaler(np.array([1.0, 0.0]), np.array([False, True]))
    # the discounted returns seen so far, (1, 0), with the prior count of 1e-4 at variance 1
    rms = ppo_procgen.RunningMeanStd()
    rms.update(np.array([1.0, 0.0]))
    np.testing.assert_allclose(scaled, np.array([1.0, 0.0]) / np.sqrt(rms.var + 1e-8))
    # environment 1's episode ended: its return restarts; environment 0's is discounted with 0.999
    np.testing.assert_allclose(scaler.returns, [1.0, 0.0])
    scaler(np.array([2.0, 3.0]), np.array([False, False]))
    np.testing.assert_allclose(scaler.returns, [0.999 + 2.0, 3.0])
    # a huge reward is clipped to 10
    assert ppo_procgen.RewardScaler(1, gamma=0.999, clip=10.0)(np.array([1e6]), np.array([False]))[0] <= 10.0


def test_impala_network_shapes_and_initialisation():
    envs = ppo_procgen.make_vector_env("starpilot", 1, False, "unused")
    agent = ppo_procgen.Agent(envs)
    envs.close()
    stages = [agent.network[i] for i in range(3)]
    assert [stage.conv.out_channels for stage in stages] == [16, 32, 32]
    assert all(len([m for m in stage.modules() if isinstance(m, torch.nn.Conv2d)]) == 5 for stage in stages)
    hidden = agent.network[5]
    assert isinstance(hidden, torch.nn.Linear) and (hidden.in_features, hidden.out_features) == (32 * 8 * 8, 256)
    obs = torch.randint(0, 256, (5, 64, 64, 3), dtype=torch.uint8)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (5,) and value.shape == (5, 1)
    # a policy head of gain 0.01: nearly uniform over the 15 actions at the start
    assert entropy.mean().item() == pytest.approx(np.log(15), abs=1e-2)
    # the pixels are scaled to [0, 1]: the trunk sees the same input as from float frames divided by 255
    expected = agent.network(obs.permute(0, 3, 1, 2).float() / 255.0)
    assert torch.allclose(agent.hidden(obs), expected, atol=1e-5)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_procgen")
    assert list(tmp_path.iterdir()) == []


def test_episode_statistics_count_every_ending():
    stats = ppo_procgen.EpisodeStatistics(3)
    assert stats.step(np.array([1.0, 2.0, 0.5]), np.array([False, False, False])) == []
    assert stats.step(np.array([1.0, 1.0, 1.0]), np.array([True, False, True])) == [(2.0, 2), (1.5, 2)]
