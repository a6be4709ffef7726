"""Isaac Gym's task interface on Newton: IsaacGymEnvs' Ant, Humanoid and Cartpole, thousands of copies simulated
together by MuJoCo Warp, on a GPU (as one CUDA graph a step) or on a CPU.

    import isaacgym_tasks_newton
    envs = isaacgym_tasks_newton.make("Ant", num_envs=4096, device="cuda", seed=1)
    obs = envs.reset()["obs"]
    obs_dict, rewards, resets, extras = envs.step(actions)  # torch tensors on the device, both ways

See the package's README for what follows IsaacGymEnvs and where it differs."""

import warp as wp

from .cartpole import Cartpole
from .locomotion import Ant, Humanoid
from .vec_task import VecTask

TASKS = {"Ant": Ant, "Cartpole": Cartpole, "Humanoid": Humanoid}

__all__ = ["Ant", "Cartpole", "Humanoid", "VecTask", "make", "tasks"]


def tasks():
    """The names `make` knows."""
    return sorted(TASKS)


def make(task, num_envs, device="cpu", seed=0, render=False, verbose=False):
    """`num_envs` copies of `task` on `device` (a torch device or its name: "cpu", "cuda", "cuda:1"), their reset
    noise drawn from a generator seeded with `seed`. With `render`, the task's camera is made at once (else at the
    first `render()`). Warp's start-up and compile messages are shown only when `verbose`."""
    if task not in TASKS:
        raise ValueError(f"no task '{task}'; the tasks are {', '.join(tasks())}")
    if not verbose:  # Warp's greeting and its line for each module it loads are information, below warnings
        wp.config.log_level = wp.LOG_WARNING
    return TASKS[task](num_envs, device, seed, render=render)
