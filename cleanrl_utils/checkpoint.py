"""Checkpoints of a training run, so that a run that stops goes on where it stopped (CONVENTIONS §7).

A script imports this module only under `--checkpoint-every N` or `--resume PATH`, and uses it in three places:

    run_name = checkpoint.begin(args, __file__, run_name)  # with --resume: the run's name, its checkpoint checked
    first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)
    checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, obs, done)
    checkpoint.finish()  # after the loop, once the model is saved, evaluated and uploaded where asked

(a script that carries more from one iteration to the next, as an LSTM's state, passes it last to both). One run per
process: `begin` keeps its Checkpoints here. The JAX pair calls save_jax and restore_jax instead.

One process writes a run: `begin` takes an exclusive lock (flock) on `run.lock` in the run folder, which the kernel
releases when the process ends, however it ends; a second process on the same run stops with one line naming the
first one's pid.

The file starts with a header, a line of JSON (HEADER): the run's flags as first given, the iteration reached,
whether the run has finished, and the code that made it. The benchmark runner reads it (scripts.checkpoint_header)
to find a run again; being part of the checkpoint, it cannot disagree with it. `checkpoint.json` beside the
checkpoint repeats the header for people. The last iteration's checkpoint is written unfinished; `finish` writes
it again, finished, once the model is saved, evaluated and uploaded where asked, so a run killed before that
resumes into those steps.

On SIGUSR1 or SIGTERM (what Slurm sends before a time limit or a preemption) the run finishes its iteration, writes a
checkpoint and exits with status 75 (EX_TEMPFAIL), so that the job can be queued again and go on.

A checkpoint is the file `checkpoint.pt` in the run folder, `runs/{run_name}/`. It is written under a temporary name
of its own (`.checkpoint.pt.<random>.tmp`), synced to disk, then renamed over the previous one, so a kill at any
moment leaves the last complete checkpoint in place; it starts with a digest of its contents, so a truncated or
damaged file is refused. A write that fails (a full disk) says so in one line on stderr, removes its temporary file
and keeps the previous checkpoint; training goes on, and the next checkpoint tries again.
A checkpoint is data, never code: it is read with torch.load(weights_only=True), and what the environments hold
beyond tensors, numbers, strings and plain containers is stored in a plain form and rebuilt by this module (see
"plain data" below). It holds:
- the script's file name, the run name, the arguments (flags left out on --resume take these), the wandb run id;
- the code that made it: the script's sha256 and the versions of Python, torch, NumPy, Gymnasium and the
  environment packages the process imported; --resume refuses a checkpoint of other code in one line, and
  --resume-changed-code goes on with its learner and restarts the environments (as below; not bitwise);
- the iteration just finished, global_step, and the training time so far (for charts/SPS and the progress line);
- the agent's and the optimizer's state dicts, the observation the agent acts on next and whether it starts an
  episode (`obs`, `done`), the recent episodic returns;
- every random generator: Python's `random`, NumPy's global one, torch's CPU generator and CUDA's, where used;
- the environments: the vector environment's own attributes (autoreset flags, buffers), and for every sub-environment
  the attributes of every wrapper down its stack (episode statistics, normalisers' running means and discounted
  returns, frame stacks, lives, time limits, its np_random), plus the emulator or physics state, which lives outside
  Python: ALE's full system state with its random generator (`cloneState(include_rng=True)`), MuJoCo's whole `MjData`
  (`mj_copyData` back into the fresh one: also the derived quantities some tasks read before stepping, which
  `mjSTATE_INTEGRATION` alone would leave stale), each stored as the bytes its library serialises it to.
What a fresh build recreates identically is not stored: functions (wrappers' transforms), specs, spaces, models and
renderers.

Where a sub-environment holds state that cannot be captured (a Box2D world: pybox2d can neither pickle its bodies nor
set a world's full state, contact caches included), the checkpoint holds no environment state: on resume the learner
goes on exactly and the environments restart, seeded from the seed and the iteration, which the script says in one
line. Otherwise the resumed run logs bitwise what the uninterrupted run logs, on the same machine.

A flag left out takes the run's own value; a flag given must be the run's, except those a resumed run may change
(scripts.OPERATIONAL: --resume, --resume-changed-code, --checkpoint-every, --track and the W&B project and entity,
--save-model, --upload-model and --hf-entity: what is done with the run, not what it computes). Whatever the fresh
build does not fit (network shapes, optimizer groups, the wrapper stack, the engine) ends in one line and exit 2.
TensorBoard gets one curve per tag: the points logged after the checkpoint by the stopped run
are purged (purge_step). W&B, under --track, continues the same run (its id, resume="allow").
"""

import abc
import collections
import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import inspect
import io
import json
import os
import pickle  # for its UnpicklingError only: nothing here unpickles
import platform
import random
import secrets
import signal
import sys
import time
import zlib
from collections.abc import Mapping
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

# OPERATIONAL: what a resumed run may change
from cleanrl_utils.scripts import CHECKPOINT_MAGIC, OPERATIONAL, error_line

FILE = "checkpoint.pt"
LOCK_FILE = "run.lock"  # held by the process that writes the run's checkpoints
STATE_FILE = "checkpoint.json"  # the header again, for people, written after checkpoint.pt (a kill may fall between)
STOPPED = 75  # the exit status after a stop asked by a signal: EX_TEMPFAIL, "try again"
MAGIC = CHECKPOINT_MAGIC  # the first line; the header, a line of JSON, follows
# what the header holds of a checkpoint: what finds a run again, how far it got, and the code that made it
HEADER = ("script", "run_name", "argv", "iteration", "num_iterations", "global_step", "finished", "code")
# attributes that a fresh build recreates: the next wrapper, constructor arguments, specs
STATIC = {
    "env",
    "envs",
    "env_fns",
    "_saved_kwargs",
    "_ezpickle_args",
    "_ezpickle_kwargs",
    "spec",
    "_cached_spec",
    "metadata",
    "_metadata",
}


class BadCheckpoint(Exception):
    """A checkpoint that cannot be used: missing, truncated, damaged, or not one of ours."""


def field_defaults(args):
    """{field: its default} of the `Args` dataclass `args` is an instance of (the fields that have one)."""
    defaults = {}
    for field in dataclasses.fields(args):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


def read(path):
    """The checkpoint in the file `path`, as saved; BadCheckpoint when it is missing, truncated, damaged, or holds
    anything but data (loading builds tensors, numbers, strings and plain containers, and runs no code)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BadCheckpoint(f"cannot read {path}: {e.strerror}") from None
    if data.startswith(b"cleanrl checkpoint 1\n"):
        raise BadCheckpoint(
            f"{path} has the format of an earlier version, which loading would have to run as code: "
            "start the run afresh (or go on with the version that wrote it)"
        )
    header_end = data.find(b"\n", len(MAGIC)) + 1
    digest_end = header_end + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or header_end == 0:
        raise BadCheckpoint(f"{path} is not a checkpoint of these scripts")
    digest = hashlib.sha256(data[len(MAGIC) : header_end] + data[digest_end:]).digest()
    if len(data) < digest_end or digest != data[header_end:digest_end]:
        raise BadCheckpoint(f"{path} is truncated or damaged")
    try:
        return torch.load(io.BytesIO(data[digest_end:]), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # a type that is not plain data: what a crafted file would run on loading
        raise BadCheckpoint(f"{path} holds more than plain data (loading it would run code): refused") from None
    except Exception as e:  # whole, yet unreadable here: another version of the libraries, say
        raise BadCheckpoint(f"cannot load {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def write(state, path):
    """Writes `state` to `path` so that a kill at any moment leaves either the previous file or this one, whole. The
    file starts with a line of JSON, its header: what the benchmark runner reads (scripts.checkpoint_header), in the
    same file, so that it can never disagree with the checkpoint."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    header = json.dumps({name: state[name] for name in HEADER if name in state}).encode() + b"\n"
    write_whole([MAGIC, header, hashlib.sha256(header + payload).digest(), payload], path)


def write_whole(parts, path):
    """Writes the bytes `parts` to `path` under a temporary name of its own (`.checkpoint.pt.<random>.tmp`),
    synced, then renamed over `path`. A write that fails (a full disk) removes its temporary file and raises
    OSError, leaving `path` as it was."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "xb") as f:  # x: a name no other writer has
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(Path(path).parent, os.O_RDONLY)  # the rename itself, on disk
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def flag(name):
    return f"--{name.replace('_', '-')}"


def computed_fields(args):
    """The fields of Args computed after parsing (annotated tyro.conf.Suppress): not flags."""
    hints = {f.name: f.type for f in dataclasses.fields(args)}
    return {name for name, hint in hints.items() if "Suppress" in str(hint)}


def given_fields(args, argv):
    """The fields of `args` that the command line `argv` sets (--flag value, --flag=value, --no-flag, either
    spelling); the others have their defaults."""
    names = {field.name for field in dataclasses.fields(args)}
    given = set()
    for word in argv:
        if not str(word).startswith("--"):
            continue
        name = str(word)[2:].partition("=")[0].replace("-", "_")
        if name not in names and name.startswith("no_"):
            name = name[3:]
        if name in names:
            given.add(name)
    return given


# what each attempt of a run asks for itself; every other flag left out takes the run's own value (an upload needs
# cleanrl_utils.huggingface, which a script imports before its checkpoint is read)
ASKED_ANEW = ("resume", "resume_changed_code", "upload_model")

# computed from how the program was launched, not from its flags: a resumed run must be launched alike
LAUNCH = ("world_size",)

# The packages whose versions a checkpoint records: the first three always, the others where the process has
# imported them (the environments' and JAX's); {module: distribution}
PACKAGES = {
    "torch": "torch",
    "numpy": "numpy",
    "gymnasium": "gymnasium",
    "ale_py": "ale-py",
    "envpool": "envpool",
    "mujoco": "mujoco",
    "dm_control": "dm-control",
    "shimmy": "shimmy",
    "procgen": "procgen",
    "pettingzoo": "pettingzoo",
    "supersuit": "SuperSuit",
    "gym_microrts": "gym-microrts",
    "jpype": "JPype1",
    "isaacgym": "isaacgym",
    "jax": "jax",
    "flax": "flax",
    "optax": "optax",
}
ALWAYS = ("torch", "numpy", "gymnasium")


@functools.cache  # looking a distribution up takes milliseconds; what is installed stays within a run
def installed_version(module):
    """The installed version of the package of `module` (its distribution's, else the module's __version__), or
    None where it is not installed."""
    try:
        return importlib.metadata.version(PACKAGES[module])
    except importlib.metadata.PackageNotFoundError:
        if module in sys.modules:
            return str(getattr(sys.modules[module], "__version__", "unknown"))
        return None


def script_sha256(script):
    return hashlib.sha256(Path(script).read_bytes()).hexdigest()


def versions_in_use():
    """{"python": version, module: version} for Python and the packages of PACKAGES in use."""
    versions = {"python": platform.python_version()}
    for module in PACKAGES:
        if module in ALWAYS or module in sys.modules:
            versions[module] = installed_version(module)
    return versions


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
        """The checkpoint `state` if this program may go on from it; BadCheckpoint saying why not otherwise. The flags
        not given on the command line take the run's own values; a flag given must have the run's value, unless a
        resumed run may change it (scripts.OPERATIONAL)."""
        where = f"runs/{state['run_name']}"
        if state["script"] != self.script:
            raise BadCheckpoint(f"{where} is a run of {state['script']}, not of {self.script}: resume it with that")
        computed = computed_fields(self.args)
        ours = vars(self.args)
        # a field the script has gained since the checkpoint was written counts as its default there
        theirs = {**field_defaults(self.args), **state["args"]}
        given = given_fields(self.args, sys.argv[1:])
        differ = [name for name in ours if name in given and name not in OPERATIONAL and ours[name] != theirs[name]]
        if differ:
            shown = ", ".join(f"{flag(name)} {theirs[name]}" for name in differ)
            raise BadCheckpoint(f"{where} was run with {shown}: give the run's own flags, or leave them out")
        launched = [name for name in LAUNCH if name in ours and ours[name] != theirs[name]]
        if launched:
            name = launched[0]
            raise BadCheckpoint(f"{where} was launched with {name} {theirs[name]}, this program with {ours[name]}")
        for name in ours:  # the run's own flags where none is given, and what it computed from them
            if name not in ASKED_ANEW and (name not in given or name in computed):
                setattr(self.args, name, theirs[name])
        if state.get("finished"):
            raise BadCheckpoint(f"{where} has finished (iteration {state['iteration']} of {theirs['num_iterations']})")
        changes = self.code_changes(state["code"])
        if changes and not self.args.resume_changed_code:
            raise BadCheckpoint(
                f"{where} was made by other code ({'; '.join(changes)}): add --resume-changed-code to go on with its "
                "learner and fresh environments (not bitwise), or start the run afresh"
            )
        if changes:
            self.changed_code = f"the code changed since the checkpoint ({'; '.join(changes)})"
        return state

    def code_changes(self, code):
        """What differs between the code that wrote a checkpoint (its `code` record) and this program's."""
        changes = []
        if code["script_sha256"] != self.sha256:
            changes.append(
                f"{self.script} is another text (sha256 {code['script_sha256'][:12]}, now {self.sha256[:12]})"
            )
        for name, then in code["versions"].items():
            now = platform.python_version() if name == "python" else installed_version(name)
            if now != then:
                changes.append(f"{name} {then}, now {now or 'not installed'}")
        return changes

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
        iteration where their reset takes a seed, and the run says so in one line; returns their first observations.
        EnvPool's reset accepts a seed and ignores it, and Isaac Gym's takes none: both are seeded only when made
        (with --seed), so a resumed run of theirs is reproducible from the checkpoint all the same."""
        state = self.state
        seed = self.args.seed + envs.num_envs * state["iteration"]
        parameters = inspect.signature(envs.reset).parameters.values()
        seeded = any(p.name == "seed" or p.kind == p.VAR_KEYWORD for p in parameters)
        envpool = made_by_envpool(envs)
        if envpool:
            how = "EnvPool seeds them only when made: with --seed"
        elif seeded:
            how = f"seeded with --seed and the iteration, {seed}"
        else:
            how = "as made, with --seed"
        print(
            f"{self.script}: {why}: the environments restart ({how}); the learner goes on exactly",
            flush=True,
        )
        if envpool:
            return envs.reset()[0]
        if seeded:
            return envs.reset(seed=seed)[0]
        return envs.reset()

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
            "code": {"script_sha256": self.sha256, "versions": versions_in_use()},
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


# ---- what a script calls: one run per process ----------------------------------------------------------------------
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


def made_by_envpool(envs):
    """Whether `envs` is an EnvPool environment, or wraps one."""
    while envs is not None:
        if any(cls.__module__.startswith("envpool.") for cls in type(envs).__mro__):
            return True
        envs = getattr(envs, "env", None)
    return False


def tensors(nested):
    """The tensors of nested tuples and lists of them, in order."""
    if isinstance(nested, torch.Tensor):
        return [nested]
    return [tensor for item in nested for tensor in tensors(item)]


# ---- random generators ------------------------------------------------------------------------------------------


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


# ---- environments ---------------------------------------------------------------------------------------------------


def engine(env):
    """The emulator, physics engine or game whose state lives outside Python, "ale", "mujoco" or "procgen", or None."""
    ale_py = sys.modules.get("ale_py")
    if ale_py is not None and isinstance(getattr(env, "ale", None), ale_py.ALEInterface):
        return "ale"
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and isinstance(getattr(env, "data", None), mujoco.MjData):
        return "mujoco"
    procgen = sys.modules.get("procgen")
    if procgen is not None and isinstance(getattr(getattr(env, "venv", None), "env", None), procgen.ProcgenGym3Env):
        return "procgen"
    return None


# other environments (the next wrapper, the sub-environments) and spaces (their bounds are static, and the scripts
# never sample them, so their generators are not drawn from): a fresh build recreates them
STRUCTURE = (gym.Env, gym.vector.VectorEnv, gym.spaces.Space)
# what holds the engine: captured through the engine's own calls, or static
ENGINE_ATTRIBUTES = {"ale": {"ale"}, "mujoco": {"model", "data", "mujoco_renderer"}, "procgen": {"venv"}, None: set()}
WRAPPERS = (gym.Wrapper, gym.vector.VectorWrapper)


def attributes(obj, skip=frozenset()):
    """The state an object keeps in its own attributes, as plain data (to_data), and the names of those that have
    no plain form."""
    kept, lost = {}, []
    for name, value in vars(obj).items():
        if name in STATIC or name in skip or callable(value) or isinstance(value, STRUCTURE):
            continue
        if type(value).__module__.startswith("pygame"):  # what renders (classic control, Box2D): made anew
            continue
        try:
            kept[name] = to_data(value)
        except Unstorable:
            lost.append(f"{type(obj).__name__}.{name}")
    return kept, lost


def capture_stack(env, lost):
    """The state of an environment: every wrapper's attributes down to the base environment, the base's own and its
    engine's state, and for a SyncVectorEnv that of each sub-environment. What cannot be stored goes to `lost`."""
    layers = []
    while isinstance(env, WRAPPERS):
        kept, layer_lost = attributes(env)
        layers.append({"class": type(env).__qualname__, "attributes": kept})
        lost += layer_lost
        env = env.env
    kind = engine(env)
    kept, base_lost = attributes(env, ENGINE_ATTRIBUTES[kind])
    lost += base_lost
    base = {"class": type(env).__qualname__, "attributes": kept, "engine": kind}
    if kind == "ale":  # the emulator's whole state, its random generator included, as the bytes ALE serialises
        base["engine_state"] = to_data(env.ale.cloneState(include_rng=True).__getstate__())
    elif kind == "mujoco":
        base["engine_state"] = to_data(env.data)
    elif kind == "procgen":
        base["engine_state"] = to_data(env.venv.env.get_state())  # each game's bytes, its random generators included
    elif isinstance(env, gym.vector.SyncVectorEnv):
        base["envs"] = [capture_stack(sub_env, lost) for sub_env in env.envs]
    elif isinstance(env, gym.vector.VectorEnv) or not isinstance(env, gym.Env):
        lost.append(f"{type(env).__name__}'s environments")  # another vector env keeps them elsewhere: C++, processes
    return {"layers": layers, "base": base}


def capture_envs(envs, env_id):
    """(the state of `envs`, None) or, where some of it cannot be stored, (None, why)."""
    lost = []
    state = capture_stack(envs, lost)
    if lost:
        return None, f"{env_id}'s state cannot be saved ({lost[0]})"
    return state, None


def restore_envs(env, saved):
    """Puts the state `capture_stack` took into the freshly built `env`; BadCheckpoint where `env` is not built as
    the checkpoint's was (another wrapper stack, another number of environments, another engine)."""
    for layer in saved["layers"]:
        same_class(env, layer["class"])
        restore_attributes(env, layer["attributes"])
        env = env.env
    base = saved["base"]
    same_class(env, base["class"])
    if engine(env) != base["engine"]:
        raise BadCheckpoint(f"the checkpoint's {base['class']} runs on {base['engine']}, this one on {engine(env)}")
    restore_attributes(env, base["attributes"])
    if base["engine"] == "ale":
        import ale_py

        emulator = ale_py.ALEState.__new__(ale_py.ALEState)
        emulator.__setstate__(from_data(base["engine_state"]))
        env.ale.restoreState(emulator)
    elif base["engine"] == "mujoco":
        from_data(base["engine_state"], env.data)
    elif base["engine"] == "procgen":
        env.venv.env.set_state(from_data(base["engine_state"]))
    sub_envs, sub_states = getattr(env, "envs", []), base.get("envs", [])
    if len(sub_envs) != len(sub_states):
        raise BadCheckpoint(
            f"the checkpoint has {len(sub_states)} environments in {base['class']}, this run {len(sub_envs)}"
        )
    for sub_env, sub_state in zip(sub_envs, sub_states, strict=True):
        restore_envs(sub_env, sub_state)


def same_class(env, name):
    if type(env).__qualname__ != name:
        raise BadCheckpoint(
            f"the environments are built otherwise than in the checkpoint: {type(env).__qualname__} where it has {name}"
        )


def restore_attributes(obj, saved):
    for name, data in saved.items():
        vars(obj)[name] = from_data(data, vars(obj).get(name, MISSING))


# ---- plain data -----------------------------------------------------------------------------------------------------
# A checkpoint is data, never code: torch.load(weights_only=True) reads it, which builds tensors, numbers, strings and
# plain containers and refuses everything else. What an environment keeps beyond those is stored in a plain form,
# a dict tagged under KIND, and rebuilt here by this module's own code, never by a name the file gives: arrays from
# their bytes, random generators from their state, an enum member by its name in the class of the fresh
# environment's own value, and an object of a plain Python class (a normaliser's running statistics, a dm_control
# task) by putting its attributes into the object of the same class that the fresh build made. MuJoCo's MjData is
# rebuilt from the bytes MuJoCo serialises it to, then copied into the fresh one (mj_copyData).

KIND = "~kind"
MISSING = object()
BIT_GENERATORS = {name: getattr(np.random, name) for name in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")}
NESTING = 16  # deeper than any environment's state here: a cycle, or a graph not worth storing


class Unstorable(Exception):
    """A value with no plain-data form here."""


def byte_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.zeros(0, dtype=torch.uint8)


def to_data(value, depth=0):
    """`value` as tensors, numbers, strings and plain containers; Unstorable where it has no such form."""
    if depth > NESTING:
        raise Unstorable("nested too deep")
    inner = depth + 1
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if kind is bytes:
        return {KIND: "bytes", "data": byte_tensor(value)}
    if kind is np.ndarray:
        if value.dtype.hasobject or value.dtype.fields is not None:
            raise Unstorable(f"an array of {value.dtype}")
        data = byte_tensor(np.ascontiguousarray(value).tobytes())
        return {KIND: "array", "dtype": value.dtype.str, "shape": list(value.shape), "data": data}
    if isinstance(value, np.generic):
        return {KIND: "scalar", "array": to_data(np.asarray(value), inner)}
    if kind is np.dtype or isinstance(value, np.dtype):
        if value.hasobject or value.fields is not None:
            raise Unstorable(f"the dtype {value}")
        return {KIND: "dtype", "str": value.str}
    if kind in (list, tuple):
        return kind(to_data(item, inner) for item in value)
    if kind is dict:
        return {KIND: "dict", "items": [[to_data(k, inner), to_data(v, inner)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {KIND: kind.__name__, "items": [to_data(item, inner) for item in value]}
    if kind is collections.deque:
        return {KIND: "deque", "items": [to_data(item, inner) for item in value], "maxlen": value.maxlen}
    if kind is np.random.Generator:
        return {KIND: "generator", "state": to_data(value.bit_generator.state, inner)}
    if kind is np.random.RandomState:
        return {KIND: "randomstate", "state": to_data(value.get_state(legacy=False), inner)}
    if kind is random.Random:
        return {KIND: "random", "state": to_data(value.getstate(), inner)}
    if isinstance(getattr(kind, "__members__", None), Mapping) and isinstance(getattr(value, "name", None), str):
        return {KIND: "member", "class": kind.__qualname__, "name": value.name}  # an enum's member (Python's, pybind's)
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and kind is mujoco.MjData:  # the arena is mostly zeros
        return {KIND: "mjdata", "data": byte_tensor(zlib.compress(value.__getstate__(), 1))}
    if isinstance(value, type) or callable(value) or not hasattr(value, "__dict__"):
        raise Unstorable(f"a {kind.__name__}")
    if kind.__getstate__ is object.__getstate__:  # a plain Python object
        if not python_class(kind):
            raise Unstorable(f"a {kind.__name__}")
        attributes = {name: to_data(item, inner) for name, item in vars(value).items()}
        return {KIND: "object", "class": kind.__qualname__, "attributes": attributes}
    # an object that says itself what its state is: stored where that state is another object it holds (dm_control's
    # Physics, its MjData), which the restore fills in place
    try:
        state = value.__getstate__()
    except Exception:
        raise Unstorable(f"a {kind.__name__}") from None
    state = to_data(state, inner)
    if not (isinstance(state, dict) and state.get(KIND) in ("object", "state", "mjdata")):
        raise Unstorable(f"a {kind.__name__}")
    return {KIND: "state", "class": kind.__qualname__, "state": state}


def python_class(kind):
    """Whether objects of the class `kind` keep their state in their __dict__ as Python objects do: a class made by
    Python's own metaclass (or abc's), no __slots__, no pickling of its own. Not a class of an extension (pybind11's,
    JPype's Java proxies), whose state lives elsewhere. (Nothing is ever made from a class here: the restore puts
    the state into the object the fresh build made.)"""
    if type(kind) not in (type, abc.ABCMeta):
        return False
    if kind.__reduce_ex__ is not object.__reduce_ex__ or kind.__reduce__ is not object.__reduce__:
        return False
    return not any("__slots__" in vars(base) for base in kind.__mro__)


def from_data(data, current=MISSING):
    """The value `to_data` stored as `data`. `current` is what the freshly built environment holds in its place: an
    object, an MjData or an enum member is restored into it or taken from its class; BadCheckpoint where it does not
    match."""
    if isinstance(data, (list, tuple)):
        like = current if isinstance(current, (list, tuple)) and len(current) == len(data) else [MISSING] * len(data)
        return type(data)(from_data(item, was) for item, was in zip(data, like, strict=True))
    if not isinstance(data, dict):
        return data
    kind = data.get(KIND)
    if kind == "bytes":
        return data["data"].numpy().tobytes()
    if kind == "array":
        raw = data["data"].numpy().tobytes()
        return np.frombuffer(raw, dtype=np.dtype(data["dtype"])).reshape(data["shape"]).copy()
    if kind == "scalar":
        return from_data(data["array"])[()]
    if kind == "dtype":
        return np.dtype(data["str"])
    if kind == "dict":
        known = current if isinstance(current, dict) else {}
        pairs = [(from_data(k), v) for k, v in data["items"]]
        return {key: from_data(value, known.get(key, MISSING)) for key, value in pairs}
    if kind in ("set", "frozenset"):
        return {"set": set, "frozenset": frozenset}[kind](from_data(item) for item in data["items"])
    if kind == "deque":
        return collections.deque((from_data(item) for item in data["items"]), maxlen=data["maxlen"])
    if kind == "generator":
        state = from_data(data["state"])
        if state.get("bit_generator") not in BIT_GENERATORS:
            raise BadCheckpoint(f"the checkpoint names an unknown bit generator, {state.get('bit_generator')}")
        generator = np.random.Generator(BIT_GENERATORS[state["bit_generator"]]())
        generator.bit_generator.state = state
        return generator
    if kind == "randomstate":
        generator = np.random.RandomState()
        generator.set_state(from_data(data["state"]))
        return generator
    if kind == "random":
        generator = random.Random()
        generator.setstate(from_data(data["state"]))
        return generator
    if kind == "member":
        members = getattr(type(current), "__members__", None)
        if (
            type(current).__qualname__ != data["class"]
            or not isinstance(members, Mapping)
            or data["name"] not in members
        ):
            raise BadCheckpoint(f"the checkpoint's {data['class']}.{data['name']} has no counterpart in this build")
        return members[data["name"]]
    if kind == "mjdata":
        import mujoco

        if type(current) is not mujoco.MjData:
            raise BadCheckpoint("the checkpoint holds a MuJoCo simulation where this build has none")
        saved = mujoco.MjData.__new__(mujoco.MjData)
        saved.__setstate__(zlib.decompress(data["data"].numpy().tobytes()))
        if saved.model.nq != current.model.nq or saved.model.nv != current.model.nv:
            raise BadCheckpoint("the checkpoint's MuJoCo model is not this build's")
        mujoco.mj_copyData(current, current.model, saved)
        return current
    if kind in ("object", "state"):
        if current is MISSING or type(current).__qualname__ != data["class"]:
            have = "nothing" if current is MISSING else type(current).__qualname__
            raise BadCheckpoint(f"the checkpoint holds a {data['class']} where this build has {have}")
        if kind == "object":
            restore_attributes(current, data["attributes"])
        elif from_data(data["state"], current.__getstate__()) is not current.__getstate__():
            raise BadCheckpoint(f"the checkpoint's {data['class']} cannot be put back in place")
        return current
    raise BadCheckpoint(f"the checkpoint holds data of an unknown kind, {kind!r}")


# ---- several processes, PettingZoo, Isaac Gym ----------------------------------------------------------------------


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
        every = self.args.checkpoint_every
        due = every and iteration % every == 0 or iteration == self.args.num_iterations
        if not (due or self.stop_signal):
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


# ---- JAX scripts ----------------------------------------------------------------------------------------------------
# ppo_atari_envpool_xla_jax.py and its scan variant step EnvPool's environments inside XLA, whose state cannot be
# captured: the learner resumes exactly and the environments restart (Checkpoints.restart_envs). The learner is what
# the loop carries in JAX arrays: the TrainState (parameters, the optimizer's state and its step counts, from which
# optax's schedule anneals the learning rate), the PRNG key and the episode statistics. JAX's arrays are immutable:
# restore_jax returns them anew. The checkpoint holds them as tensors named by their path in the tree (torch.save
# stores a tensor's bytes as they are; a NumPy array it would pickle as text, a quarter larger).

# the episode statistics of the games under way, which restart with the environments (the last finished ones stay)
UNDER_WAY = ("episode_returns", "episode_lengths")


def restore_jax(envs, agent_state, key, episode_stats):
    """With --resume: the checkpoint's learner in place of the freshly built one, the environments restarted;
    returns the first iteration to run, global_step, start_time, next_obs, agent_state, key and episode_stats."""
    import jax.numpy as jnp

    run = RUN[0]
    state = run.state
    try:
        agent_state, key, episode_stats = from_named_arrays(state["agent"], (agent_state, key, episode_stats))
    except BadCheckpoint as e:
        run.fail(f"--resume: {e}")
    episode_stats = episode_stats.replace(**{name: jnp.zeros_like(getattr(episode_stats, name)) for name in UNDER_WAY})
    next_obs = run.restart_envs(envs, run.changed_code or state["envs_lost"])
    start_time = run.resumed()
    return state["iteration"] + 1, state["global_step"], start_time, next_obs, agent_state, key, episode_stats


def save_jax(iteration, global_step, start_time, writer, envs, agent_state, key, episode_stats):
    """At the end of each iteration: a checkpoint of the learner where one is due (as Checkpoints.save)."""
    run = RUN[0]
    if not run.due(iteration):
        return
    _, lost = capture_envs(envs, run.args.env_id)
    state = run.run_state(iteration, int(global_step), start_time, writer)  # global_step: a JAX array after a rollout
    state.update(agent=named_arrays((agent_state, key, episode_stats)), random=capture_random(), envs=None)
    state["envs_lost"] = lost or f"{run.args.env_id}'s state lives in XLA"
    run.commit(state)


def named_arrays(tree):
    """{path: tensor} of every leaf of a JAX tree, copied from the device."""
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(jax.device_get(tree))
    return {jax.tree_util.keystr(path): torch.from_numpy(np.array(leaf)) for path, leaf in leaves}


def from_named_arrays(saved, like):
    """The tree `like` with every leaf the array `named_arrays` saved at its path, bit for bit."""
    import jax
    import jax.numpy as jnp

    leaves, structure = jax.tree_util.tree_flatten_with_path(like)
    paths = [jax.tree_util.keystr(path) for path, _ in leaves]
    if sorted(paths) != sorted(saved):
        raise BadCheckpoint("the checkpoint's learner has other parts than this script's")
    for path, (_, leaf) in zip(paths, leaves, strict=True):
        if tuple(saved[path].shape) != tuple(np.shape(leaf)):
            raise BadCheckpoint(
                f"the checkpoint's {path} has shape {tuple(saved[path].shape)}, this script's {np.shape(leaf)}"
            )
    return jax.tree_util.tree_unflatten(structure, [jnp.asarray(saved[path].numpy()) for path in paths])
