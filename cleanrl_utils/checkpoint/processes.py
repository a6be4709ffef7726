"""A run in several processes (torchrun, ppo_atari_multigpu.py): ProcessCheckpoints, the Checkpoints of one process,
each writing its own part of the run's checkpoint. Uses run.py (Checkpoints, which it extends), fileformat.py (the
files) and envs.py (the environments).
"""

import contextlib
import io
import os
import sys
from pathlib import Path

from cleanrl_utils.checkpoint.envs import capture_envs
from cleanrl_utils.checkpoint.fileformat import FILE, BadCheckpoint, read, write
from cleanrl_utils.checkpoint.run import STOPPED, Checkpoints, capture_random, tensors


class ProcessCheckpoints(Checkpoints):
    """The checkpoints of one process of a run in several (torchrun, ppo_atari_multigpu.py). The learner is the same in
    every process; each process has its own environments, random generators, next_obs and next_done.

    Every process calls `save` at the end of every iteration (the first call agrees on rank 0's run name, every call
    on whether a signal asked any of them to stop, so that all stop after the same iteration). Where a checkpoint is
    due, each process but rank 0 writes its own part, `checkpoint-rank{r}-iteration{i}.pt` (written, then renamed);
    once all have (a barrier), rank 0 writes `checkpoint.pt`, its own state and the learner's, which names the
    iteration all processes completed, then `checkpoint.json`, and removes the parts of other iterations. A kill at
    any moment leaves `checkpoint.pt` naming an iteration whose parts are all there; --resume reads it in every
    process, and each process but rank 0 its own part of that iteration. The run folder must be on a filesystem that
    every process sees (one machine, or a shared one)."""

    def __init__(self, args, script, run_name):
        self.rank = int(os.getenv("RANK", "0"))
        self.agreed = False
        super().__init__(args, script, run_name)
        if self.state is not None:
            iteration = self.state["iteration"]
            try:  # every process checks every part, so that rank 0 alone says what is wrong
                parts = {rank: read(self.part_path(iteration, rank)) for rank in range(1, self.args.world_size)}
            except BadCheckpoint as e:
                self.fail(f"--resume: {e}")
            if self.rank != 0:
                self.state.update(parts[self.rank])
        if self.rank == 0:  # rank 0 alone locks the run and logs; once the checkpoint is known whole
            super().claim()

    def fail(self, message):
        """Every process finds the same error in the flags or the checkpoint: rank 0 alone says it."""
        if self.rank == 0:
            super().fail(message)
        sys.exit(2)

    def claim(self):
        """Done by rank 0 once the parts are checked (__init__)."""

    def finish(self):
        """Rank 0 writes the run's checkpoint: it alone marks the run finished."""
        if self.rank == 0:
            super().finish()

    def committed(self, iteration):
        """checkpoint.pt names `iteration`: the parts of other iterations are no longer needed."""
        for stale in self.path.parent.glob("checkpoint-rank*-iteration*.pt"):
            if not stale.name.endswith(f"-iteration{iteration}.pt"):
                stale.unlink(missing_ok=True)

    def part_path(self, iteration, rank=None):
        rank = self.rank if rank is None else rank
        return self.path.with_name(f"checkpoint-rank{rank}-iteration{iteration}.pt")

    def restore(self, envs, agent, optimizer, *carried):
        if self.rank == 0:
            return super().restore(envs, agent, optimizer, *carried)
        with contextlib.redirect_stdout(io.StringIO()):  # rank 0 alone says what it does
            return super().restore(envs, agent, optimizer, *carried)

    def save(self, iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried):
        import torch.distributed as dist

        everyone = [None] * self.args.world_size
        dist.all_gather_object(everyone, (self.run_name, self.stop_signal))
        if not self.agreed:  # a fresh run's name: each process made its own from the clock; rank 0's it is
            self.agreed = True
            self.run_name = everyone[0][0]
            self.path = Path("runs", self.run_name, FILE)
        self.stop_signal = max((signum for _, signum in everyone if signum), default=None)
        if not self.due(iteration):  # due as in one process, once the processes agree on the signal
            return
        if self.rank != 0:
            env_state, lost = capture_envs(envs, self.args.env_id)
            part = {
                "iteration": iteration,
                "next_obs": next_obs.cpu(),
                "next_done": next_done.cpu(),
                "carried": [tensor.cpu() for tensor in tensors(carried)],
                "random": capture_random(),
                "envs": env_state,
                "envs_lost": lost,
            }
            write(part, self.part_path(iteration))
        dist.barrier()  # every part of this iteration is on disk: rank 0 names it complete
        if self.rank == 0:
            super().save(
                iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried
            )
        elif self.stop_signal and iteration < self.args.num_iterations:
            sys.exit(STOPPED)
