"""The life of one run's checkpoints, the class Checkpoints: it begins right after the run name, takes the run's lock,
reads and checks the checkpoint it resumes, puts it into the freshly built objects, saves on schedule and after a stop
asked by a signal, commits each checkpoint to disk, and finishes the run. Uses fileformat.py (the file), flags.py and
identity.py (whether a resume may go on), envs.py (the environments) and plaindata.py (NumPy's random state).

One process writes a run: it takes an exclusive lock (flock) on `run.lock` in the run folder, which the kernel
releases when the process ends, however it ends; a second process on the same run stops with one line naming the
first one's pid. A resumed run purges what the stopped run logged to TensorBoard after its checkpoint (purge_step), so
that each tag has one curve; under --track W&B continues the same run (its id, resume="allow").

A checkpoint holds, beside its header (fileformat.HEADER): the arguments (flags left out on --resume take these), the
wandb run id, the training time so far (for charts/SPS and the progress line), the agent's and the optimizer's state
dicts, the observation the agent acts on next and whether it starts an episode (`obs`, `done`), what else the loop
carries from one iteration to the next (an LSTM's state), every random generator (Python's `random`, NumPy's global
one, torch's CPU generator and CUDA's, where used) and the environments (envs.py). Whatever the fresh build does not
fit (network shapes, optimizer groups, the wrapper stack, the engine) ends in one line and exit status 2.

A checkpoint is written every --checkpoint-every iterations and at the last one, unfinished; `finish` writes the last
one again, finished, once the model is saved, evaluated and uploaded where asked, so a run killed before that resumes
into those steps. A write that fails (a full disk) says so in one line on stderr and keeps the previous checkpoint;
training goes on, and the next checkpoint tries again. On SIGUSR1 or SIGTERM (what Slurm sends before a time limit or
a preemption) the run finishes its iteration, writes a checkpoint and exits with status 75 (EX_TEMPFAIL), so that the
job can be queued again and go on.
"""

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cleanrl_utils.checkpoint.envs import capture_envs, restart_envs, restore_envs
from cleanrl_utils.checkpoint.fileformat import FILE, HEADER, STATE_FILE, BadCheckpoint, read, write, write_whole
from cleanrl_utils.checkpoint.flags import take_run_flags
from cleanrl_utils.checkpoint.identity import check_code, code_record, script_sha256
from cleanrl_utils.checkpoint.plaindata import from_data, to_data
from cleanrl_utils.scripts import error_line

LOCK_FILE = "run.lock"  # held by the process that writes the run's checkpoints
STOPPED = 75  # the exit status after a stop asked by a signal: EX_TEMPFAIL, "try again"


class Checkpoints:
    """The checkpoints of one run: made right after the run name, before any work. With --resume it reads and checks
    the run's checkpoint, or ends the program with one line on stderr and exit status 2."""

    def __init__(self, args, script, run_name):
        self.args = args
        self.script = os.path.basename(script)
        self.sha256 = script_sha256(script)
        self.state = None
        self.last = None  # the state of the last checkpoint written, which finish() writes again as finished
        self.changed_code = None  # with --resume-changed-code: what changed since the checkpoint
        self.wandb_id = None
        self.stop_signal = None
        self.lock = None
        if args.checkpoint_every < 0:
            self.fail(f"--checkpoint-every must be at least 0 (0: no checkpoints), got {args.checkpoint_every}")
        if args.resume:
            try:
                self.state = self.check(self.read_resume(Path(args.resume)))
            except BadCheckpoint as e:
                self.fail(f"--resume: {e}")
            run_name = self.state["run_name"]
            self.wandb_id = self.state["wandb_id"]
            if args.track and self.wandb_id:  # the same W&B run goes on
                os.environ["WANDB_RUN_ID"] = self.wandb_id
                os.environ["WANDB_RESUME"] = "allow"
        self.run_name = run_name
        self.path = Path("runs", run_name, FILE)
        self.claim()

    def claim(self):
        """From here on this process writes the run: it takes the run's lock, then, with --resume, purges the logs
        the stopped run wrote after its checkpoint."""
        self.take_lock()
        if self.state is not None:
            self.purge_logs()

    def take_lock(self):
        """An exclusive lock on the run folder for as long as this process lives (the kernel lets go of it when the
        process ends, however it ends): a second process on the same run stops here, naming the first."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(LOCK_FILE)
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(descriptor)
            self.fail(
                f"{self.path.parent} is in use by process {holder}, which writes its checkpoints: "
                "wait for it to end, or stop it, before you go on with the run"
            )
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        self.lock = descriptor

    def purge_logs(self):
        """One curve per tag: what the stopped run logged after its checkpoint is dropped (TensorBoard reads the
        file written here before the resumed run's own, which is named after it)."""
        from torch.utils.tensorboard import SummaryWriter

        SummaryWriter(f"runs/{self.run_name}", purge_step=self.state["global_step"] + 1).close()

    def fail(self, message):
        print(f"{self.script}: error: {message}", file=sys.stderr)
        sys.exit(2)

    def read_resume(self, path):
        if path.is_dir():
            if not (path / FILE).is_file():
                raise BadCheckpoint(f"no checkpoint in {path}: a run writes one with --checkpoint-every N")
            path = path / FILE
        elif not path.exists():
            raise BadCheckpoint(f"{path} does not exist: give a run folder (runs/...) or its {FILE}")
        state = read(path)
        if not isinstance(state, dict) or "script" not in state:
            raise BadCheckpoint(f"{path} is not a checkpoint of these scripts")
        folder = Path("runs", state["run_name"])
        if path.parent.resolve() != folder.resolve():
            raise BadCheckpoint(f"{path} goes on in {folder}, which is not its folder: run it from where runs/ is")
        return state

    def check(self, state):
        """The checkpoint `state` if this program may go on from it; BadCheckpoint saying why not otherwise: another
        script, other flags (flags.py), a finished run, other code (identity.py)."""
        where = f"runs/{state['run_name']}"
        if state["script"] != self.script:
            raise BadCheckpoint(f"{where} is a run of {state['script']}, not of {self.script}: resume it with that")
        theirs = take_run_flags(self.args, state["args"], sys.argv[1:], where)
        if state.get("finished"):
            raise BadCheckpoint(f"{where} has finished (iteration {state['iteration']} of {theirs['num_iterations']})")
        self.changed_code = check_code(state["code"], self.script, self.sha256, self.args.resume_changed_code, where)
        return state

    def restore(self, envs, agent, optimizer, *carried):
        """Puts the checkpoint into the freshly built `envs`, `agent`, `optimizer`, the tensors
        `carried` (what else the loop carries from one iteration to the next, as an LSTM's state: in place) and the
        random generators; returns the first iteration to run, global_step, start_time, next_obs and next_done.
        Where what was built does not match the checkpoint, the program ends with one line and exit status 2."""
        state = self.state
        device = next(agent.parameters()).device
        try:
            agent.load_state_dict(state["agent"])
            optimizer.load_state_dict(state["optimizer"])
            saved_carried = state["carried"]
            if len(saved_carried) != len(tensors(carried)):
                raise ValueError(f"it carries {len(saved_carried)} tensors from one iteration to the next")
            for tensor, saved in zip(tensors(carried), saved_carried, strict=True):
                tensor.copy_(saved)
        except (RuntimeError, ValueError, KeyError) as e:
            self.fail(f"--resume: the checkpoint's learner does not fit this script's ({error_line(e)})")
        next_obs = state["next_obs"].to(device)
        next_done = state["next_done"].to(device)
        lost = self.changed_code or state["envs_lost"]
        if state["envs"] is not None and not self.changed_code:
            try:
                restore_envs(envs, state["envs"])
            except BadCheckpoint as e:
                self.fail(f"--resume: {e}")
        else:
            next_obs = torch.as_tensor(self.restart_envs(envs, lost), dtype=torch.float32, device=device)
            next_done = torch.zeros_like(next_done)
        start_time = self.resumed()
        return state["iteration"] + 1, state["global_step"], start_time, next_obs, next_done

    def resumed(self):
        """The last of a restore: the random generators as saved, and one line saying where the run goes on;
        returns the start_time that makes charts/SPS the run's steps over its training time so far."""
        state = self.state
        restore_random(state["random"])
        print(f"resumed {self.path.parent} at iteration {state['iteration']}, step {state['global_step']}", flush=True)
        return time.time() - state["elapsed"]

    def restart_envs(self, envs, why):
        """Where the checkpoint holds no environment state: the environments restart, seeded from the seed and the
        iteration (envs.restart_envs), saying `why`; returns their first observations."""
        return restart_envs(envs, self.args.seed, self.state["iteration"], self.script, why)

    def save(self, iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried):
        """Writes a checkpoint every --checkpoint-every iterations, at the last one (finish() marks it finished once
        the model is saved) and after a stop asked by a signal, then ends the program. What the writer holds goes to
        disk first: the checkpoint never runs ahead of the logs."""
        if not self.due(iteration):
            return
        env_state, lost = capture_envs(envs, self.args.env_id)
        state = self.run_state(iteration, global_step, start_time, writer)
        state.update(
            agent=agent.state_dict(),
            optimizer=optimizer.state_dict(),
            next_obs=next_obs.cpu(),
            next_done=next_done.cpu(),
            carried=[tensor.cpu() for tensor in tensors(carried)],
            random=capture_random(),
            envs=env_state,
            envs_lost=lost,
        )
        self.commit(state)

    def due(self, iteration):
        """Whether a checkpoint is due after `iteration`: every --checkpoint-every, the last one, after a signal."""
        every = self.args.checkpoint_every
        return every and iteration % every == 0 or iteration == self.args.num_iterations or bool(self.stop_signal)

    def run_state(self, iteration, global_step, start_time, writer):
        """What every checkpoint holds about the run, once what the writer holds is on disk."""
        writer.flush()
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            self.wandb_id = wandb.run.id
        return {
            "script": self.script,
            "run_name": self.run_name,
            "argv": self.state["argv"] if self.state is not None else [str(word) for word in sys.argv[1:]],
            "args": dict(vars(self.args)),
            "wandb_id": self.wandb_id,
            "iteration": iteration,
            "num_iterations": self.args.num_iterations,
            "finished": False,
            "global_step": global_step,
            "elapsed": time.time() - start_time,
            "code": code_record(self.sha256),
        }

    def commit(self, state):
        """Writes the checkpoint `state`, then checkpoint.json (its header, for people and other tools: the benchmark
        runner reads the header of checkpoint.pt itself, which cannot disagree with it); after a stop asked by a
        signal, ends the program."""
        iteration = state["iteration"]
        self.last = state
        try:
            write(state, self.path)
            plain = {name: state[name] for name in HEADER}
            write_whole([json.dumps(plain).encode()], self.path.with_name(STATE_FILE))
        except OSError as e:  # a full disk, say: training goes on, and the next checkpoint tries again
            print(
                f"{self.script}: the checkpoint of iteration {iteration} was not written ({e.strerror or e}); "
                "the previous one is kept",
                file=sys.stderr,
                flush=True,
            )
            written = "the previous checkpoint"
        else:
            self.committed(iteration)
            written = f"the checkpoint of iteration {iteration}"
        if self.stop_signal and iteration < self.args.num_iterations:
            name = signal.Signals(self.stop_signal).name
            print(f"{self.script}: stopped by {name} after {written}; --resume {self.path.parent} goes on", flush=True)
            sys.exit(STOPPED)

    def finish(self):
        """After the loop, once the model is saved, evaluated and uploaded where asked: the last checkpoint is written
        again, marked finished. Until then a resumed run goes on into those steps."""
        state = self.last if self.last is not None else self.state
        if state is None or state["iteration"] < self.args.num_iterations:
            return
        state["finished"] = True
        self.stop_signal = None
        self.commit(state)

    def committed(self, iteration):
        """Called once the checkpoint of `iteration` is on disk (ProcessCheckpoints removes older parts then)."""

    def ask_to_stop(self, signum, frame):
        """A signal handler: the run stops at the end of its iteration, after a checkpoint."""
        self.stop_signal = signum


def tensors(nested):
    """The tensors of nested tuples and lists of them, in order."""
    if isinstance(nested, torch.Tensor):
        return [nested]
    return [tensor for item in nested for tensor in tensors(item)]


def capture_random():
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    numpy = to_data(np.random.get_state(legacy=False))
    return {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state(), "cuda": cuda}


def restore_random(saved):
    random.setstate(saved["python"])
    np.random.set_state(from_data(saved["numpy"]))
    torch.set_rng_state(saved["torch"])
    if saved["cuda"] is not None:
        torch.cuda.set_rng_state_all(saved["cuda"])
