"""Replays a saved model with the evaluation of the script that trained it.

    python -m cleanrl_utils.enjoy --exp-name ppo --env-id CartPole-v1 --model-path runs/.../ppo.cleanrl_model
    python -m cleanrl_utils.enjoy --exp-name ppo --env-id CartPole-v1 --hf-entity cleanrl --seed 1 --capture-video

The script cleanrl/{exp-name}.py is imported as a module and its own `evaluate` plays the episodes, printing one
line each; the mean and standard deviation of their returns come last. With --hf-entity instead of --model-path,
the model is first downloaded from the Hugging Face Hub repository {hf-entity}/{env-id}-{exp-name}-seed{seed},
where --upload-model puts it.
"""

import inspect
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from cleanrl_utils.huggingface import hub_repo_id
from cleanrl_utils.scripts import SCRIPTS, error_line, load_script, script_names, vector_env


@dataclass
class Args:
    exp_name: str = "ppo"
    """the script that trained the model: cleanrl/{exp_name}.py"""
    env_id: str = "CartPole-v1"
    """the id of the environment the model was trained on"""
    model_path: str | None = None
    """the saved model (runs/{run_name}/{exp_name}.cleanrl_model); or give --hf-entity"""
    hf_entity: str | None = None
    """the Hugging Face Hub user or organisation to download the model from, instead of --model-path"""
    seed: int = 1
    """the seed of the evaluation, and of the run whose model is downloaded"""
    eval_episodes: int = 10
    """the number of episodes to play"""
    capture_video: bool = False
    """whether to record videos of the episodes (in the `videos` folder)"""
    cuda: bool = True
    """if toggled, cuda will be used where available (PyTorch scripts)"""


def fail(message):
    print(f"enjoy: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_args(args):
    """What is wrong with the arguments, or None."""
    if args.exp_name not in script_names():
        return f"no script {args.exp_name}.py in {SCRIPTS}; --exp-name is one of {', '.join(script_names())}"
    if (args.model_path is None) == (args.hf_entity is None):
        return "give the model with either --model-path FILE or --hf-entity NAME (to download it from the Hub)"
    if args.model_path is not None and not Path(args.model_path).is_file():
        return f"no saved model at {args.model_path}; train with --save-model first"
    if args.eval_episodes <= 0:
        return f"--eval-episodes must be positive, got {args.eval_episodes}"


def download(args):
    """The path of the model downloaded from the run's Hub repository."""
    from huggingface_hub import hf_hub_download

    repo_id = hub_repo_id(args.hf_entity, args.env_id, args.exp_name, args.seed)
    print(f"loading the saved model from https://huggingface.co/{repo_id}")
    try:
        return hf_hub_download(repo_id=repo_id, filename=f"{args.exp_name}.cleanrl_model")
    except Exception as e:  # no such repository or file, no network: all end the same way for the user
        fail(f"cannot download {args.exp_name}.cleanrl_model from {repo_id}: {error_line(e)}")


def evaluate_arguments(args, script, model_path):
    """The arguments of the script's `evaluate`, as its signature asks for them: PyTorch scripts take a run name and
    a device, JAX ones do not; Isaac Gym's plays on in environments made by its caller (one simulation a process)."""
    values = dict(model_path=model_path, env_id=args.env_id, eval_episodes=args.eval_episodes, seed=args.seed)
    values.update(run_name=f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}-enjoy")
    parameters = inspect.signature(script.evaluate).parameters
    if "device" in parameters:  # a PyTorch script, whose evaluate samples its actions with torch's generator
        import torch

        torch.manual_seed(args.seed)
        values["device"] = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if "envs" in parameters:
        made = dict(seed=args.seed, device=values.get("device"), capture_video=args.capture_video)
        envs = vector_env(script, args.env_id, args.eval_episodes, run_name=values["run_name"], **made)
        values.update(envs=envs, next_obs=envs.reset())
    elif "capture_video" in parameters:
        values["capture_video"] = args.capture_video
    elif args.capture_video:
        fail(f"{args.exp_name}.py records no video: leave out --capture-video")
    if missing := [name for name, p in parameters.items() if p.default is p.empty and name not in values]:
        fail(f"{args.exp_name}.py's evaluate needs {', '.join(missing)}: it cannot replay a model on its own")
    return {name: values[name] for name in parameters if name in values}


def main():
    args = tyro.cli(Args, prog="python -m cleanrl_utils.enjoy")
    if problem := check_args(args):
        fail(problem)
    script = load_script(args.exp_name)
    model_path = args.model_path or download(args)
    try:
        episodic_returns = script.evaluate(**evaluate_arguments(args, script, model_path))
    except Exception as e:  # a model of another environment or script, or an environment the script cannot make
        problem = f"cannot replay {model_path} with {args.exp_name}.py on {args.env_id}: {error_line(e)}"
        if "size mismatch" in str(e) or "shape" in str(e):
            problem += f"; the model was trained on another environment than {args.env_id}, or by another script"
        fail(problem)
    print(
        f"episodic return over {len(episodic_returns)} episodes: "
        f"{np.mean(episodic_returns):.2f} ± {np.std(episodic_returns):.2f}"
    )


if __name__ == "__main__":
    main()
