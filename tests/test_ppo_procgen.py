"""cleanrl/ppo_procgen.py: what is its own: Procgen's games behind Gymnasium's vector API, the wrappers (episode
statistics of the game's own rewards, reward normalisation with the algorithm's gamma, clipping), the IMPALA network,
video of game 0, and the saved model's evaluation."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import load_script, only_run_dir, read_scalars, run_script

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


def test_smoke_run_logs_the_games_own_returns(tiny_run):
    cwd, proc = tiny_run
    run_dir = only_run_dir(cwd)
    assert run_dir.name.startswith("bossfight__ppo_procgen__1__")
    scalars = read_scalars(run_dir)
    assert [step for step, _ in scalars["charts/SPS"]] == [128, 256] and "[100%] step 256/256" in proc.stdout
    # no annealing by default: the rate stays at the reference's 5e-4
    assert [lr for _, lr in scalars["charts/learning_rate"]] == [pytest.approx(5e-4)] * 2
    # the game's own rewards, not the normalised ones: bossfight pays whole points
    returns = [value for _, value in scalars["charts/episodic_return"]]
    assert len(returns) >= 2 and all(value == int(value) >= 0 for value in returns)
    assert len(scalars["charts/episodic_length"]) == len(returns)
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
    assert all(value == int(value) >= 0 for _, value in evals)


def test_unknown_game_is_one_line_before_procgen_aborts(tmp_path):
    """Procgen ends the whole process on a game it does not know: the script checks the name first."""
    proc = run_script("ppo_procgen.py", "--env-id", "Pong", cwd=tmp_path, check=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "ppo_procgen.py: error: Pong is not a Procgen game" in lines[0] and "starpilot" in lines[0]
    assert not (tmp_path / "runs").exists()


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
    envs = ppo_procgen.ProcgenVectorEnv("bossfight", 3)
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
        assert obs.shape == (3, 64, 64, 3) and obs.dtype == np.uint8 and info == {}
        assert rewards.shape == (3,) and terminations.dtype == truncations.dtype == np.bool_
        assert not truncations.any()  # Procgen never truncates
        # render gives the frame each game shows the agent
        assert all(np.array_equal(frame, o) for frame, o in zip(envs.render(), obs))
        episodes_ended += terminations.sum()
    assert episodes_ended > 0
    envs.close()


def test_reset_seed_fixes_the_levels():
    envs = ppo_procgen.make_env("bossfight", 2, False, "unused")
    first, again, other = play(envs, 7), play(envs, 7), play(envs, 8)
    envs.close()
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0])


def test_wrappers_log_raw_returns_and_normalise_rewards_with_gamma():
    """RecordEpisodeStatistics sits under the reward normalisation: it sums the game's own rewards. The agent gets
    them divided by the running standard deviation of the return discounted with the algorithm's gamma, clipped."""
    envs = ppo_procgen.make_env("starpilot", 2, False, "unused", gamma=0.9)  # random play scores in starpilot
    layers, layer = [], envs
    while isinstance(layer, gym.vector.VectorWrapper):
        layers.append(layer)
        layer = layer.env
    assert [type(w).__name__ for w in layers] == ["ClipReward", "ScaleRewardByReturn", "RecordEpisodeStatistics"]
    normalize = layers[1]
    assert normalize.gamma == 0.9
    assert isinstance(layer, ppo_procgen.ProcgenVectorEnv)
    raw_step = layer.step
    raw = {}

    def recording_step(actions):
        result = raw_step(actions)
        raw["rewards"] = result[1]
        return result

    layer.step = recording_step
    envs.reset(seed=1)
    rng = np.random.default_rng(0)
    sums, finished = np.zeros(2), []
    for _ in range(200):
        _, rewards, terminations, _, infos = envs.step(rng.integers(0, 15, 2))
        expected = np.clip(raw["rewards"] / np.sqrt(normalize.return_rms.var + 1e-8), -10, 10)
        np.testing.assert_allclose(rewards, expected, rtol=1e-6)
        sums += raw["rewards"]
        for (episodic_return, _), i in zip(ppo_procgen.finished_episodes(infos), np.flatnonzero(terminations)):
            finished.append(episodic_return)
            assert episodic_return == sums[i]
        sums[terminations] = 0
    envs.close()
    assert len(finished) >= 2 and any(value > 0 for value in finished)


class FixedRewards(gym.vector.VectorEnv):
    """Two sub-environments that pay the rewards and end the episodes they are told to."""

    num_envs = 2
    single_observation_space = gym.spaces.Box(0, 1, (1,))
    single_action_space = gym.spaces.Discrete(2)

    def __init__(self, rewards, terminations):
        self.rewards, self.terminations = iter(rewards), iter(terminations)

    def step(self, actions):
        terminations = np.array(next(self.terminations))
        return (
            np.zeros((2, 1)),
            np.array(next(self.rewards), dtype=np.float32),
            terminations,
            np.zeros_like(terminations),
            {},
        )


def test_reward_scale_is_gym_0x_normalize_reward():
    """The running return takes in the reward of an episode's last step and restarts after it (as in Gym 0.23, the
    reference's; Gymnasium 1.x's vector NormalizeReward restarts it on the last step); its variance, over every
    sub-environment's return at every step, scales the rewards."""
    rewards = [[1.0, 2.0], [3.0, -1.0], [5.0, 0.5]]
    terminations = [[False, False], [True, False], [False, True]]
    envs = ppo_procgen.ScaleRewardByReturn(FixedRewards(rewards, terminations), gamma=0.5)
    seen = []
    for _ in rewards:
        seen.append(envs.step(np.zeros(2))[1])
    # the returns: [1, 2], then [1 * 0.5 + 3, 2 * 0.5 - 1] (sub-environment 0 ends here), then [5, 0 * 0.5 + 0.5]
    returns = np.array([[1.0, 2.0], [3.5, 0.0], [5.0, 0.5]])
    rms = gym.wrappers.utils.RunningMeanStd(shape=())
    for step in range(3):
        rms.update(returns[step])
        expected = np.float32(rewards[step]) / np.float32(np.sqrt(rms.var + 1e-8))  # divided in float32
        assert seen[step].dtype == np.float32 and np.array_equal(seen[step], expected)
    assert np.array_equal(envs.returns, [5.0, 0.0])  # sub-environment 1 ended in the last step: its return restarts


def test_finished_episodes_reads_the_vector_statistics():
    infos = {
        "episode": {"r": np.array([0.0, 7.0, 3.0]), "l": np.array([0, 40, 12]), "t": np.zeros(3)},
        "_episode": np.array([False, True, True]),
    }
    assert ppo_procgen.finished_episodes(infos) == [(7.0, 40), (3.0, 12)]
    assert ppo_procgen.finished_episodes({}) == []


# in a process of its own: once, in the suite, the worker running it crashed (a segfault while Python collected
# garbage as the video recorder stopped), after other tests had made and closed procgen games in that process
@pytest.mark.own_process
def test_capture_video_records_the_episodes_of_game_0(tmp_path, monkeypatch):
    import imageio.v3 as iio

    monkeypatch.chdir(tmp_path)
    envs = ppo_procgen.make_env("bossfight", 2, True, "run")
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


def test_impala_network_shapes_and_initialisation():
    envs = ppo_procgen.ProcgenVectorEnv("starpilot", 1)
    agent = ppo_procgen.Agent(envs)
    stages = [agent.network[i] for i in range(3)]
    assert [stage.conv.out_channels for stage in stages] == [16, 32, 32]
    assert all(len([m for m in stage.modules() if isinstance(m, torch.nn.Conv2d)]) == 5 for stage in stages)
    assert [stage.output_shape for stage in stages] == [(16, 32, 32), (32, 16, 16), (32, 8, 8)]
    hidden = agent.network[5]
    assert isinstance(hidden, torch.nn.Linear) and (hidden.in_features, hidden.out_features) == (32 * 8 * 8, 256)
    obs = torch.randint(0, 256, (5, 64, 64, 3), dtype=torch.uint8)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (5,) and value.shape == (5, 1)
    # a policy head of gain 0.01: nearly uniform over the 15 actions at the start
    assert entropy.mean().item() == pytest.approx(np.log(15), abs=1e-2)
    # height x width x channels pixels, channels first for the network and scaled to [0, 1]
    expected = agent.critic(agent.network(obs.permute(0, 3, 1, 2).float() / 255.0))
    assert torch.allclose(agent.get_value(obs), expected, atol=1e-5)
    # a residual block adds its input back (with its last convolution zeroed, it passes the input through); a stage
    # halves height and width, rounding up
    block = ppo_procgen.ResidualBlock(4)
    torch.nn.init.zeros_(block.conv1.weight)
    torch.nn.init.zeros_(block.conv1.bias)
    x = torch.randn(2, 4, 9, 9)
    assert torch.equal(block(x), x)
    stage = ppo_procgen.ConvSequence((3, 9, 9), 16)  # its forward asserts the shape it announces
    assert stage.output_shape == (16, 5, 5)
    assert stage(torch.randn(2, 3, 9, 9)).shape == (2, 16, 5, 5)
