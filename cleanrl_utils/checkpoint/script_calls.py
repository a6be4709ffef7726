"""What a PyTorch script calls, with the one run of its process: begin, restore, save, finish. Uses run.py
(Checkpoints) and processes.py (ProcessCheckpoints, for a run in several processes).

`begin` keeps the run's Checkpoints in RUN, where the other calls, and jax_calls.py's, find it. It also sets the
signal handlers: SIGUSR1 and SIGTERM (what Slurm sends before a time limit or a preemption) stop the run at the end
of its iteration, after a checkpoint (Checkpoints.ask_to_stop).
"""

import signal

from cleanrl_utils.checkpoint.processes import ProcessCheckpoints
from cleanrl_utils.checkpoint.run import Checkpoints

RUN = []  # the Checkpoints of this process's run, once `begin` has made it


def begin(args, script, run_name):
    """Made right after the run name, before any work: checks --checkpoint-every, and with --resume reads and checks
    the run's checkpoint (or ends the program with one line on stderr and exit status 2); SIGUSR1 and SIGTERM then
    stop the run at the end of an iteration, after a checkpoint. Returns the run's name: with --resume, the name of
    the run it goes on with."""
    several = getattr(args, "world_size", 1) > 1  # a run in several processes (torchrun): ProcessCheckpoints
    run = (ProcessCheckpoints if several else Checkpoints)(args, script, run_name)
    RUN[:] = [run]
    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, run.ask_to_stop)
    # The benchmark runner starts a run with these two held (blocked), so that one sent before this point waits:
    # it reaches ask_to_stop now, and the run stops after its first iteration.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGUSR1, signal.SIGTERM))
    return run.run_name


def restore(envs, agent, optimizer, *carried):
    """With --resume: puts the checkpoint into the freshly built objects; returns the first iteration to run,
    global_step, start_time, next_obs and next_done (Checkpoints.restore)."""
    return RUN[0].restore(envs, agent, optimizer, *carried)


def save(iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried):
    """At the end of each iteration: a checkpoint where one is due (Checkpoints.save)."""
    RUN[0].save(iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried)


def finish():
    """After the loop, once the model is saved, evaluated and uploaded where asked: the run is finished
    (Checkpoints.finish)."""
    RUN[0].finish()
