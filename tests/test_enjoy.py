"""cleanrl_utils/enjoy.py: replaying a saved model with its script's own evaluate, from a file or from the Hub (a
stand-in huggingface_hub here), and the one-line errors. test_scripts.py replays a saved model of every script."""

import re
import shutil

import numpy as np
import pytest
from helpers import ROOT, assert_user_error, fake_hub_env, only_run_dir, run_python, run_script, script_env

UTILS_ENV = script_env(PYTHONPATH=str(ROOT))


def enjoy(*args, cwd, env=UTILS_ENV, check=True):
    return run_python("-m", "cleanrl_utils.enjoy", *args, cwd=cwd, env=env, check=check, timeout=300)


def episodes(stdout):
    """The returns of the episode lines, in order, checking that they count up from 0."""
    found = re.findall(r"^eval_episode=(\d+), episodic_return=(\S+)$", stdout, re.MULTILINE)
    assert [int(i) for i, _ in found] == list(range(len(found)))
    return [float(r) for _, r in found]


@pytest.fixture(scope="module")
def ppo_model(tmp_path_factory):
    """A model saved by a tiny run of ppo.py on CartPole-v1."""
    cwd = tmp_path_factory.mktemp("ppo")
    run_script("ppo.py", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "128", "--save-model", cwd=cwd)
    return only_run_dir(cwd) / "ppo.cleanrl_model"


def test_replays_a_pytorch_model(ppo_model, tmp_path):
    args = ["--exp-name", "ppo", "--env-id", "CartPole-v1", "--model-path", ppo_model, "--eval-episodes", "3"]
    proc = enjoy(*args, cwd=tmp_path)
    returns = episodes(proc.stdout)
    assert len(returns) == 3 and all(r > 0 for r in returns)
    summary = f"episodic return over 3 episodes: {np.mean(returns):.2f} ± {np.std(returns):.2f}"
    assert proc.stdout.splitlines()[-1] == summary
    assert list(tmp_path.iterdir()) == [], "without --capture-video nothing is written"
    # the seed fixes the replay: the same command plays the same episodes
    assert enjoy(*args, cwd=tmp_path).stdout == proc.stdout


def test_capture_video(ppo_model, tmp_path):
    args = ["--env-id", "CartPole-v1", "--model-path", ppo_model, "--eval-episodes", "1", "--capture-video"]
    enjoy(*args, cwd=tmp_path)
    (folder,) = (tmp_path / "videos").iterdir()
    assert folder.name.startswith("CartPole-v1__ppo__1__") and folder.name.endswith("-enjoy")
    assert (folder / "rl-video-episode-0.mp4").stat().st_size > 1000


def test_downloads_from_the_hub_then_replays(ppo_model, tmp_path):
    """--hf-entity downloads {entity}/{env_id}-{exp_name}-seed{seed}/{exp_name}.cleanrl_model and plays it as the
    same file given with --model-path would be played."""
    env, _ = fake_hub_env(tmp_path)
    repository = tmp_path / "hub" / "someone" / "CartPole-v1-ppo-seed2"
    repository.mkdir(parents=True)
    shutil.copy(ppo_model, repository / "ppo.cleanrl_model")
    args = ["--exp-name", "ppo", "--env-id", "CartPole-v1", "--seed", "2", "--eval-episodes", "2"]
    proc = enjoy(*args, "--hf-entity", "someone", cwd=tmp_path, env=env)
    source = "https://huggingface.co/someone/CartPole-v1-ppo-seed2"
    assert proc.stdout.splitlines()[0] == f"loading the saved model from {source}"
    from_file = enjoy(*args, "--model-path", ppo_model, cwd=tmp_path)
    assert episodes(proc.stdout) == episodes(from_file.stdout) and len(episodes(proc.stdout)) == 2


def test_a_run_missing_on_the_hub_is_one_line_and_exit_2(tmp_path):
    env, _ = fake_hub_env(tmp_path)
    proc = enjoy("--exp-name", "ppo", "--hf-entity", "nobody", cwd=tmp_path, env=env, check=False)
    assert_user_error(proc, "enjoy: error: cannot download ppo.cleanrl_model from nobody/CartPole-v1-ppo-seed1")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--exp-name", "ppo_nope", "--model-path", "MODEL"], ["no script ppo_nope.py", "ppo_atari"]),
        (["--model-path", "missing.cleanrl_model"], ["no saved model at missing.cleanrl_model"]),
        ([], ["either --model-path FILE or --hf-entity NAME"]),
        (["--model-path", "MODEL", "--hf-entity", "someone"], ["either --model-path FILE or --hf-entity NAME"]),
        (["--model-path", "MODEL", "--eval-episodes", "0"], ["--eval-episodes must be positive"]),
        (
            ["--model-path", "MODEL", "--env-id", "Acrobot-v1"],
            ["cannot replay", "with ppo.py on Acrobot-v1", "size mismatch", "trained on another environment"],
        ),
        (["--model-path", "MODEL", "--env-id", "NoSuchGame-v0"], ["cannot replay", "NoSuchGame"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(ppo_model, tmp_path, args, fragments):
    args = [str(ppo_model) if arg == "MODEL" else arg for arg in args]
    proc = enjoy(*args, cwd=tmp_path, check=False)
    assert_user_error(proc, "enjoy: error:", *fragments)
    assert list(tmp_path.iterdir()) == []


def test_capture_video_where_evaluate_records_none(ppo_model, tmp_path):
    """A JAX script's evaluate takes no run name, device or video (test_scripts.py replays a model of every script)."""
    args = ["--exp-name", "ppo_atari_envpool_xla_jax", "--env-id", "Breakout-v5", "--model-path", ppo_model]
    proc = enjoy(*args, "--capture-video", cwd=tmp_path, check=False)
    assert_user_error(proc, "enjoy: error: ppo_atari_envpool_xla_jax.py records no video")
