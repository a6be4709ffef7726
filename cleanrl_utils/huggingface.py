"""Uploads a finished run to the Hugging Face Hub: the saved model, the TensorBoard logs, the script that trained it,
the last evaluation video and a model card. A script calls `push_to_hub` under `if args.upload_model:` (its only
import from this package), so a script copied alone still trains, saves, evaluates and records video.

    from cleanrl_utils.huggingface import push_to_hub
    push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__)
"""

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

TORCH_WEIGHTS = "a PyTorch state dict of the script's `Agent`"


def hub_repo_id(hf_entity, env_id, exp_name, seed):
    """The model repository of one run: `{hf_entity}/{env_id}-{exp_name}-seed{seed}`, any "/" of the environment id
    (ALE/Breakout-v5, dm_control/...) made a "-", since a repository name cannot hold one."""
    return f"{hf_entity}/{env_id.replace('/', '-')}-{exp_name}-seed{seed}"


def model_card(args, episodic_returns, weights=TORCH_WEIGHTS):
    """The README of the model repository: metadata the Hub reads, the evaluation, how to train and replay it."""
    mean, std = np.mean(episodic_returns), np.std(episodic_returns)
    hyperparameters = "\n".join(f"    {key}: {value!r}," for key, value in vars(args).items())
    return f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- ppo
library_name: cleanrl
model-index:
- name: PPO
  results:
  - task:
      type: reinforcement-learning
      name: reinforcement-learning
    dataset:
      name: {args.env_id}
      type: {args.env_id}
    metrics:
    - type: mean_reward
      value: {mean:.2f} +/- {std:.2f}
      name: mean_reward
      verified: false
---

# PPO agent playing {args.env_id}

Trained with `{args.exp_name}.py` (included in this repository) for {args.total_timesteps} steps.
Evaluated over {len(episodic_returns)} episodes: {mean:.2f} +/- {std:.2f}.

To train it again: `python {args.exp_name}.py --env-id {args.env_id} --seed {args.seed}`.
To replay it: `python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --env-id {args.env_id} \
--hf-entity {args.hf_entity or "<user>"} --seed {args.seed}`.
The weights are `{args.exp_name}.cleanrl_model` ({weights}).

## Hyperparameters
```python
{{
{hyperparameters}
}}
```
"""


def stage_hub_folder(folder, args, episodic_returns, run_dir, video_dir, script_path, weights=TORCH_WEIGHTS):
    """Writes what the Hub repository holds into `folder`; returns the files' paths relative to it."""
    folder = Path(folder)
    # not the lock a running process holds on the run folder, nor a checkpoint being written
    # (cleanrl_utils/checkpoint/run.py)
    private = shutil.ignore_patterns("run.lock", ".checkpoint.pt.*.tmp")
    shutil.copytree(run_dir, folder, dirs_exist_ok=True, ignore=private)
    shutil.copy(script_path, folder / f"{args.exp_name}.py")
    videos = sorted(Path(video_dir).glob("*.mp4"), key=os.path.getmtime) if Path(video_dir).is_dir() else []
    if videos:
        shutil.copy(videos[-1], folder / "replay.mp4")
    (folder / "README.md").write_text(model_card(args, episodic_returns, weights))
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def push_to_hub(args, episodic_returns, run_dir, video_dir, script_path, weights=TORCH_WEIGHTS):
    """Creates (or reuses) the run's model repository under `args.hf_entity` (empty: the logged-in account) and
    uploads the run to it; `weights` is the card's one sentence on what the saved file holds. Returns the repo id."""
    from huggingface_hub import HfApi

    api = HfApi()
    hf_entity = args.hf_entity or api.whoami()["name"]
    repo_id = hub_repo_id(hf_entity, args.env_id, args.exp_name, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        stage_hub_folder(folder, args, episodic_returns, run_dir, video_dir, script_path, weights)
        api.create_repo(repo_id=repo_id, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=f"{args.exp_name} on {args.env_id}")
    print(f"Model pushed to https://huggingface.co/{repo_id}")
    return repo_id
