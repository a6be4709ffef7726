"""cleanrl_utils/huggingface.py: what a run's Hub repository holds, and the upload through a stand-in HfApi. Every
script's own upload, end to end through a stand-in huggingface_hub, is tested in test_scripts.py."""

import os
import sys
import types
from pathlib import Path

import pytest
from helpers import SCRIPTS, load_script

from cleanrl_utils import huggingface

ppo = load_script("ppo")


def run_args(**changes):
    args = ppo.Args(env_id="CartPole-v1", total_timesteps=1024, hf_entity="my-org")
    vars(args).update(changes)
    return args


def finished_run(tmp_path, videos=("rl-video-episode-0.mp4", "rl-video-episode-8.mp4")):
    """A run folder with its events and model, and a video folder whose files were written in the order given."""
    run_dir, video_dir = tmp_path / "runs" / "run", tmp_path / "videos" / "run-eval"
    run_dir.mkdir(parents=True), video_dir.mkdir(parents=True)
    (run_dir / "events.out.tfevents.1.host").write_bytes(b"events")
    (run_dir / "ppo.cleanrl_model").write_bytes(b"weights")
    (run_dir / "run.lock").write_bytes(b"")  # held by the process writing the run: not for the Hub
    (run_dir / ".checkpoint.pt.0123abcd.tmp").write_bytes(b"half a checkpoint")
    for mtime, name in enumerate(videos, start=1_000_000):
        (video_dir / name).write_bytes(name.encode())
        os.utime(video_dir / name, (mtime, mtime))
    return run_dir, video_dir


def test_repository_id():
    assert huggingface.hub_repo_id("me", "CartPole-v1", "ppo", 1) == "me/CartPole-v1-ppo-seed1"
    # a repository name cannot hold a "/", which ids such as ALE/Breakout-v5 and dm_control/... do
    assert huggingface.hub_repo_id("me", "ALE/Breakout-v5", "ppo_atari", 3) == "me/ALE-Breakout-v5-ppo_atari-seed3"


def test_model_card_names_the_script_environment_and_evaluation():
    card = huggingface.model_card(run_args(), [10.0, 20.0], weights="the Flax parameters")
    metadata, body = card.split("---\n")[1], card.split("---\n")[2]
    assert "- CartPole-v1\n" in metadata and "library_name: cleanrl" in metadata
    assert "value: 15.00 +/- 5.00" in metadata
    assert "`ppo.py`" in body and "for 1024 steps" in body and "over 2 episodes: 15.00 +/- 5.00" in body
    assert "python -m cleanrl_utils.enjoy --exp-name ppo --env-id CartPole-v1 --hf-entity my-org --seed 1" in body
    assert "`ppo.cleanrl_model` (the Flax parameters)" in body
    assert "    total_timesteps: 1024," in body and "    hf_entity: 'my-org'," in body


def test_staged_folder_holds_the_run_the_script_the_last_video_and_the_card(tmp_path):
    run_dir, video_dir = finished_run(tmp_path)
    staged = tmp_path / "staged"
    files = huggingface.stage_hub_folder(staged, run_args(), [1.0], run_dir, video_dir, SCRIPTS / "ppo.py")
    assert files == ["README.md", "events.out.tfevents.1.host", "ppo.cleanrl_model", "ppo.py", "replay.mp4"]
    assert (staged / "replay.mp4").read_bytes() == b"rl-video-episode-8.mp4", "the latest video is the replay"
    assert (staged / "ppo.py").read_text() == (SCRIPTS / "ppo.py").read_text()


def test_staged_folder_without_videos(tmp_path):
    run_dir, _ = finished_run(tmp_path, videos=())
    files = huggingface.stage_hub_folder(tmp_path / "s", run_args(), [1.0], run_dir, tmp_path / "none", __file__)
    assert "replay.mp4" not in files and "ppo.py" in files


class FakeApi:
    """Records what push_to_hub asks of the Hub."""

    calls = []

    def whoami(self):
        return {"name": "someone"}

    def create_repo(self, repo_id, exist_ok=False):
        self.calls.append(("create_repo", repo_id, exist_ok))

    def upload_folder(self, repo_id, folder_path, commit_message):
        files = sorted(p.name for p in Path(folder_path).iterdir())
        self.calls.append(("upload_folder", repo_id, files, commit_message))


@pytest.mark.parametrize(("hf_entity", "owner"), [("my-org", "my-org"), ("", "someone")])
def test_push_to_hub_uploads_to_the_runs_repository(tmp_path, monkeypatch, capsys, hf_entity, owner):
    """An empty --hf-entity means the account logged in; the upload goes to {owner}/{env_id}-{exp_name}-seed{seed}."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(HfApi=FakeApi))
    monkeypatch.setattr(FakeApi, "calls", [])
    run_dir, video_dir = finished_run(tmp_path)
    args = run_args(hf_entity=hf_entity, seed=2)
    repo_id = huggingface.push_to_hub(args, [1.0, 2.0], run_dir, video_dir, SCRIPTS / "ppo.py")
    assert repo_id == f"{owner}/CartPole-v1-ppo-seed2"
    files = ["README.md", "events.out.tfevents.1.host", "ppo.cleanrl_model", "ppo.py", "replay.mp4"]
    assert FakeApi.calls == [
        ("create_repo", repo_id, True),
        ("upload_folder", repo_id, files, "ppo on CartPole-v1"),
    ]
    assert capsys.readouterr().out == f"Model pushed to https://huggingface.co/{repo_id}\n"
