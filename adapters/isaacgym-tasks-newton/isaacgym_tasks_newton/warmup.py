"""Compiles and caches Warp's kernels for every task, so that the first run of a task starts in seconds:

    python -m isaacgym_tasks_newton.warmup [--device cpu] [--tasks Ant Humanoid] [--num-envs 10 64]

Each task is made with each number of copies, stepped a few times, and drawn once (the camera's kernels). Warp
keeps what it compiles in its kernel cache (warp.config.kernel_cache_dir: $WARP_CACHE_PATH/<warp version> when that
variable is set, else ~/.cache/warp/<warp version>), where later processes find it. Nearly every kernel serves any
number of copies; MuJoCo Warp's broad phase is built anew for each number (a second or a few on a CPU), hence the
numbers to warm: by default 2 and 10 (evaluations) and 64 (the tests' runs). A warm cache makes this command
take seconds."""

import argparse
import time

import torch
import warp as wp

from . import make, tasks


def warm_up(task, device, num_envs, draw, steps=4):
    """Makes and steps `num_envs` copies of `task` on `device`, and with `draw` takes a picture; returns the
    seconds it took."""
    start = time.time()
    envs = make(task, num_envs=num_envs, device=device, seed=0)
    envs.reset()
    actions = torch.zeros((envs.num_envs, envs.num_acts), device=envs.device)
    for _ in range(steps):
        envs.step(actions)
    if draw:
        envs.render()
    envs.close()
    return time.time() - start


def main():
    parser = argparse.ArgumentParser(prog="python -m isaacgym_tasks_newton.warmup", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device whose kernels to build (default: cpu)")
    parser.add_argument("--tasks", nargs="+", default=tasks(), choices=tasks(), help="tasks to build (default: all)")
    parser.add_argument(
        "--num-envs", nargs="+", type=int, default=[2, 10, 64], help="numbers of copies (default: 2 10 64)"
    )
    args = parser.parse_args()
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    print(f"warming up Warp's kernel cache in {wp.config.kernel_cache_dir} for {args.device}", flush=True)
    total = 0.0
    for task in args.tasks:
        for index, num_envs in enumerate(args.num_envs):
            seconds = warm_up(task, args.device, num_envs, draw=index == 0)
            total += seconds
            print(f"  {task}, {num_envs} copies: {seconds:.1f} s", flush=True)
    print(f"done in {total:.1f} s", flush=True)


if __name__ == "__main__":
    main()
