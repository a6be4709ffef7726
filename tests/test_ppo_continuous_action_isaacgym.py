"""cleanrl/ppo_continuous_action_isaacgym.py without Isaac Gym, which needs an NVIDIA GPU and is not on PyPI.

The whole program runs on a stand-in for IsaacGymEnvs (tests/isaacgym_standin: the part of its interface the script
uses, over small batched tasks in torch), put on PYTHONPATH; the script has no case of its own for it. The stand-in
refuses to load after torch, as Isaac Gym does, and refuses actions that are not tensors on its device. Then unit
tests of the tensor pieces. (What every script shares, this one on the stand-in too, is tested in test_scripts.py.)

No record of the reference's numbers exists here (it needs Isaac Gym and a GPU), so no test pins a loss. What the
script draws is the reference's: the minibatch order is `torch.randperm` on the device every epoch, from the generator
`torch.manual_seed` seeds, as in the reference (an earlier version shuffled with NumPy, a stream the reference never
used); the tests below check that text, and their other numbers (the stand-in's episodes, the Cartpole threshold) hold
for any minibatch order."""

import ast
import importlib.util
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import (
    SCRIPTS,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_script,
    script_env,
)

SCRIPT = "ppo_continuous_action_isaacgym.py"
STANDIN = Path(__file__).parent / "isaacgym_standin"
WITH_STANDIN = script_env(PYTHONPATH=str(STANDIN))
# 4 iterations of 64 environments x 16 steps, on the task whose every return and length is known in advance
TINY = ["--env-id", "FixedEpisodes", "--num-envs", "64", "--num-steps", "16", "--total-timesteps", "4096", "--no-cuda"]

ppo = load_script("ppo_continuous_action_isaacgym")


def fixed_episodes(num_envs, env_steps, first=0):
    """Counter of (global_step, return, length) of the episodes the stand-in's FixedEpisodes task ends from step
    `first` + 1 to step `env_steps` of each environment: environment i ends one every 5 + i % 7 steps, and earns
    1 + (i % 3) / 2 at every step."""
    episodes = Counter()
    for i in range(num_envs):
        length, reward = 5 + i % 7, 1.0 + (i % 3) / 2
        for end in range(length, env_steps + 1, length):
            if end > first:
                episodes[(end * num_envs, reward * length, length)] += 1
    return episodes


def logged_episodes(scalars):
    """Counter of (global_step, return, length) of the logged episodes."""
    returns, lengths = scalars["charts/episodic_return"], scalars["charts/episodic_length"]
    assert len(returns) == len(lengths)
    return Counter((step, ret, length) for (step, ret), (_, length) in zip(returns, lengths))


def standin_isaacgymenvs():
    """A fresh copy of the stand-in IsaacGymEnvs in this process (one simulation per copy, as per process in Isaac
    Gym). Imported from its file: the stand-in isaacgym package could not load here, since torch is loaded."""
    spec = importlib.util.spec_from_file_location("isaacgymenvs_standin", STANDIN / "isaacgymenvs" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny run shared by the tests that only read its output. It also shows that the script imports Isaac
    Gym before torch: the stand-in refuses to load otherwise, and the run would stop at once."""
    cwd = tmp_path_factory.mktemp("tiny")
    proc = run_script(SCRIPT, *TINY, "--reward-scaler", "0.5", cwd=cwd, env=WITH_STANDIN)
    return cwd, proc


def test_smoke_run_logs_every_metric(tiny_run):
    cwd, proc = tiny_run
    run_dir = only_run_dir(cwd)
    prefix = "FixedEpisodes__ppo_continuous_action_isaacgym__1__"
    scalars = check_smoke_run(run_dir, prefix, [1024, 2048, 3072, 4096], proc.stdout)
    # the hand tasks' figure, logged once per iteration when the task reports it
    assert [step for step, _ in scalars["charts/consecutive_successes"]] == [1024, 2048, 3072, 4096]
    # no annealing by default: the reference's rate throughout
    assert [lr for _, lr in scalars["charts/learning_rate"]] == [pytest.approx(0.0026)] * 4


def test_every_finished_episode_is_logged_with_its_return_and_length(tiny_run):
    """Every episode that ends is one point, at the step it ended, with the task's own return: the run trained on
    rewards scaled by 0.5, which the logged returns must not show. Many episodes end at the same steps here."""
    cwd, _ = tiny_run
    logged = logged_episodes(read_scalars(only_run_dir(cwd)))
    assert logged == fixed_episodes(num_envs=64, env_steps=64)
    assert max(Counter(step for step, _, _ in logged.elements()).values()) > 1


def test_save_model_evaluates_whole_episodes_and_videos_are_recorded(tmp_path):
    """Evaluation plays on in the training environments (Isaac Gym allows one simulation per process, and the
    stand-in refuses a second), counting the next whole episode of environments 0 to 9, whose returns are known."""
    run_script(SCRIPT, *TINY, "--save-model", "--capture-video", cwd=tmp_path, env=WITH_STANDIN)
    run_dir = only_run_dir(tmp_path)
    envs = SimpleNamespace(
        single_observation_space=spaces.Box(-1, 1, (2,)), single_action_space=spaces.Box(-1, 1, (1,))
    )
    ppo.Agent(envs).load_state_dict(torch.load(run_dir / "ppo_continuous_action_isaacgym.cleanrl_model"))
    eval_returns = [ret for _, ret in read_scalars(run_dir)["eval/episodic_return"]]
    assert sorted(eval_returns) == sorted((1.0 + (i % 3) / 2) * (5 + i % 7) for i in range(10))
    for folder in (run_dir.name, f"{run_dir.name}-eval"):
        videos = list((tmp_path / "videos" / folder).glob("*.mp4"))
        assert videos and all(video.stat().st_size > 1000 for video in videos), folder


def test_without_isaac_gym_one_line_says_how_to_install_it(tmp_path):
    proc = run_script(SCRIPT, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(
        proc, "ppo_continuous_action_isaacgym.py: error: cannot import Isaac Gym", "Isaac Gym Preview 4", "IsaacGymEnvs"
    )
    assert "pip install -e python/" in proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "Humanoid"], ["IsaacGymEnvs has no task 'Humanoid'", "its tasks are Cartpole, FixedEpisodes"]),
        (["--reward-scaler", "0"], ["--reward-scaler must be positive"]),
        (["--record-video-step-frequency", "-1"], ["--record-video-step-frequency must be positive"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script(SCRIPT, *args, "--no-cuda", cwd=tmp_path, check=False, timeout=120, env=WITH_STANDIN)
    assert_user_error(proc, "ppo_continuous_action_isaacgym.py: error:", *fragments)
    assert not (tmp_path / "runs").exists()


def test_cartpole_return_improves(tmp_path):
    """Learning sanity in about ten seconds: a random policy keeps the stand-in's pole up for about 20 steps."""
    args = ["--env-id", "Cartpole", "--num-envs", "64", "--num-steps", "16", "--total-timesteps", "24576", "--no-cuda"]
    run_script(SCRIPT, *args, cwd=tmp_path, env=WITH_STANDIN)
    returns = [ret for _, ret in read_scalars(only_run_dir(tmp_path))["charts/episodic_return"]]
    first, last = np.mean(returns[:100]), np.mean(returns[-100:])
    assert first < 30 and last > 3 * first, (first, last)


# ---- the loop stays on the device ----------------------------------------------------------------


def test_the_rollout_never_reads_a_tensor_on_the_host():
    """Nothing in the rollout loop copies to the host or waits for the device: no .cpu(), .numpy(), .item(),
    .tolist() or .nonzero(), and no NumPy. (The stand-in checks the other direction: it takes tensors only.)"""
    tree = ast.parse((SCRIPTS / SCRIPT).read_text())
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and ast.unparse(node.target) == "step"]
    assert len(loops) == 1
    methods = {
        node.func.attr
        for node in ast.walk(loops[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "step" in methods and not methods & {"cpu", "numpy", "item", "tolist", "nonzero"}
    assert "np" not in {node.id for node in ast.walk(loops[0]) if isinstance(node, ast.Name)}


def test_the_update_draws_its_minibatches_on_the_device_as_the_reference_does():
    """Each epoch's order is `torch.randperm(args.batch_size, device=device)`, the reference's own draw: the stream
    torch.manual_seed(args.seed) seeds, on the device, with no NumPy (nor its random stream) in the update."""
    tree = ast.parse((SCRIPTS / SCRIPT).read_text())
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and ast.unparse(node.target) == "epoch"]
    assert len(loops) == 1
    first = ast.unparse(loops[0].body[0])
    assert first == "order = torch.randperm(args.batch_size, device=device)"
    assert "np" not in {node.id for node in ast.walk(loops[0]) if isinstance(node, ast.Name)}


def test_the_standin_takes_only_tensors_on_its_device():
    isaacgymenvs = standin_isaacgymenvs()
    env = isaacgymenvs.make(seed=1, task="FixedEpisodes", num_envs=3, sim_device="cpu", rl_device="cpu")
    with pytest.raises(TypeError, match="torch.Tensor"):
        env.step(np.zeros((3, 1), dtype=np.float32))
    with pytest.raises(ValueError, match="float32"):
        env.step(torch.zeros((3, 1), dtype=torch.float64))
    with pytest.raises(RuntimeError, match="one simulation per process"):
        isaacgymenvs.make(seed=1, task="FixedEpisodes", num_envs=3, sim_device="cpu", rl_device="cpu")


# ---- unit tests -------------------------------------------------------------------------------


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    """Without Isaac Gym (as here), importing the script works, so tests can use its functions; only running it
    as a program stops. With an Isaac Gym that cannot load (here: torch came first), the same."""
    monkeypatch.chdir(tmp_path)
    assert load_script("ppo_continuous_action_isaacgym").isaacgymenvs is None
    monkeypatch.syspath_prepend(str(STANDIN))
    module = load_script("ppo_continuous_action_isaacgym")
    assert module.isaacgymenvs is None and "torch was imported before isaacgym" in str(module.isaacgym_import_error)
    assert list(tmp_path.iterdir()) == []


class FakeTask:
    """Three environments; `step` returns the rewards and dones it is given, in its own buffers, as a task does."""

    num_envs, observation_space, action_space = 3, spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (1,))

    def __init__(self):
        self.rew_buf, self.reset_buf = torch.zeros(3), torch.zeros(3, dtype=torch.long)

    def step(self, script):
        rewards, dones = script
        self.rew_buf[:], self.reset_buf[:] = torch.tensor(rewards), torch.tensor(dones)
        return {"obs": torch.zeros((3, 2)), "states": torch.ones((3, 5))}, self.rew_buf, self.reset_buf, {}


def test_episode_statistics_count_every_ending_in_tensors():
    envs = ppo.RecordEpisodeStatisticsTorch(FakeTask(), torch.device("cpu"))
    assert envs.single_observation_space.shape == (2,) and envs.single_action_space.shape == (1,)
    obs, _, _, infos = envs.step(([1.0, 2.0, 0.5], [0, 0, 0]))
    assert obs.shape == (3, 2)  # the policy's part of the observation dictionary
    assert infos["r"].tolist() == [1.0, 2.0, 0.5] and infos["l"].tolist() == [1, 1, 1]
    # two environments end in the same step: both are reported, and their counters restart
    _, _, _, infos = envs.step(([1.0, 1.0, 1.0], [1, 0, 1]))
    assert infos["r"].tolist() == [2.0, 3.0, 1.5] and infos["l"].tolist() == [2, 2, 2]
    _, _, _, infos = envs.step(([1.0, 1.0, 1.0], [1, 1, 0]))
    assert infos["r"].tolist() == [1.0, 4.0, 1.0] and infos["l"].tolist() == [1, 3, 1]
    # the reference's counters, float32 and int32, through the restarts too
    assert infos["r"].dtype == torch.float32 and infos["l"].dtype == torch.int32
    # what the caller keeps is a copy: later steps do not change it
    envs.step(([5.0, 5.0, 5.0], [0, 0, 0]))
    assert infos["r"].tolist() == [1.0, 4.0, 1.0]


def test_finished_episodes_of_rollout_reads_where_the_rollout_ended_episodes():
    """dones[t] marks obs[t] as the first of an episode: the step that ended it is t - 1, and next_done marks the
    last step. The returns and lengths are those recorded at that step; global_step is counted after the rollout."""
    dones = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # 3 steps x 2 environments
    next_done = torch.tensor([1.0, 1.0])
    returns = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]], dtype=torch.float64)
    lengths = torch.tensor([[1, 5], [2, 6], [3, 7]])
    episodes = ppo.finished_episodes_of_rollout(dones, next_done, returns, lengths, global_step=106)
    assert sorted(episodes) == [(102, 1.0, 1), (104, 20.0, 6), (106, 3.0, 3), (106, 30.0, 7)]
    assert ppo.finished_episodes_of_rollout(torch.zeros((3, 2)), torch.zeros(2), returns, lengths, 106) == []


def test_evaluate_counts_the_next_whole_episodes_of_the_first_environments(tmp_path):
    """With fewer environments than episodes, each environment plays several in turn: 10 over 4 is 3, 3, 2, 2."""
    isaacgymenvs = standin_isaacgymenvs()
    envs = ppo.RecordEpisodeStatisticsTorch(
        isaacgymenvs.make(seed=1, task="FixedEpisodes", num_envs=4, sim_device="cpu", rl_device="cpu"),
        torch.device("cpu"),
    )
    obs = envs.reset()
    for _ in range(3):  # part of the way into the first episodes: those must not count
        obs, *_ = envs.step(torch.zeros((4, 1)))
    torch.save(ppo.Agent(envs).state_dict(), tmp_path / "model")
    returns = ppo.evaluate(tmp_path / "model", envs, obs, eval_episodes=10, device=torch.device("cpu"))
    assert Counter(returns) == Counter({5.0: 3, 9.0: 3, 14.0: 2, 8.0: 2})
