"""Checkpoints of a training run, so that a run that stops goes on where it stopped (CONVENTIONS §7).

A script imports this package only under `--checkpoint-every N` or `--resume PATH`, and uses it in three places:

    run_name = checkpoint.begin(args, __file__, run_name)  # with --resume: the run's name, its checkpoint checked
    first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)
    checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, obs, done)
    checkpoint.finish()  # after the loop, once the model is saved, evaluated and uploaded where asked

(a script that carries more from one iteration to the next, as an LSTM's state, passes it last to both). One run per
process: `begin` keeps its Checkpoints. The JAX pair calls save_jax and restore_jax instead.

Where the environments' state can be captured, the resumed run logs bitwise what the run that never stopped logs, on
the same machine; elsewhere the learner goes on exactly and the environments restart, seeded from the seed and the
iteration, which the script says in one line.

The parts, each a file, in the order they import each other (a part uses only those above it):
- fileformat.py: the file `runs/{run_name}/checkpoint.pt`, its header, its digest, the write that a kill cannot
  leave half done, and the refusal of a missing, damaged or crafted file (read, write, BadCheckpoint);
- plaindata.py: the plain form of what is neither a tensor, a number, a string nor a plain container, and the list
  of what may be rebuilt from a file (to_data, from_data): the one boundary between a file and code that runs;
- flags.py: which flags a resumed run takes from its checkpoint, and which it may change;
- identity.py: the code that made a checkpoint (the script's sha256, the versions in use) and
  --resume-changed-code;
- envs.py: capturing the environments' state (wrapper stacks, attributes, ALE, MuJoCo, Procgen), putting it back,
  and restarting the environments where it cannot be captured;
- run.py: the life of one run's checkpoints (Checkpoints): the lock, checking a resume, restoring, saving on
  schedule and on a signal, committing to disk, finishing; and the random generators;
- processes.py: a run in several processes under torchrun (ProcessCheckpoints);
- script_calls.py: what a PyTorch script calls (begin, restore, save, finish) and the run of this process (RUN);
- jax_calls.py: what the JAX pair calls (save_jax, restore_jax).
"""

from cleanrl_utils.checkpoint.envs import capture_envs, restore_envs
from cleanrl_utils.checkpoint.fileformat import FILE, HEADER, MAGIC, STATE_FILE, BadCheckpoint, read, write, write_whole
from cleanrl_utils.checkpoint.jax_calls import UNDER_WAY, from_named_arrays, named_arrays, restore_jax, save_jax
from cleanrl_utils.checkpoint.plaindata import Unstorable, from_data, to_data
from cleanrl_utils.checkpoint.processes import ProcessCheckpoints
from cleanrl_utils.checkpoint.run import LOCK_FILE, STOPPED, Checkpoints, capture_random, restore_random
from cleanrl_utils.checkpoint.script_calls import RUN, begin, finish, restore, save

__all__ = [
    "FILE",
    "HEADER",
    "LOCK_FILE",
    "MAGIC",
    "RUN",
    "STATE_FILE",
    "STOPPED",
    "UNDER_WAY",
    "BadCheckpoint",
    "Checkpoints",
    "ProcessCheckpoints",
    "Unstorable",
    "begin",
    "capture_envs",
    "capture_random",
    "finish",
    "from_data",
    "from_named_arrays",
    "named_arrays",
    "read",
    "restore",
    "restore_envs",
    "restore_jax",
    "restore_random",
    "save",
    "save_jax",
    "to_data",
    "write",
    "write_whole",
]
