"""Checkpoints of a training run, so that a run that stops goes on where it stopped (CONVENTIONS §7).

A script imports this module only under `--checkpoint-every N` or `--resume PATH`, and uses it in three places:

    run_name = checkpoint.begin(args, __file__, run_name)  # with --resume: the run's name, its checkpoint checked
    first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)
    checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, obs, done)

(a script that carries more from one iteration to the next, as an LSTM's state, passes it last to both). One run per
process: `begin` keeps its Checkpoints here.

Beside the checkpoint, `checkpoint.json` says in plain JSON what the benchmark runner needs to find the run again:
its command-line flags, the iteration reached and the run's number of iterations.

On SIGUSR1 or SIGTERM (what Slurm sends before a time limit or a preemption) the run finishes its iteration, writes a
checkpoint and exits with status 75 (EX_TEMPFAIL), so that the job can be queued again and go on.

A checkpoint is the file `checkpoint.pt` in the run folder, `runs/{run_name}/`. It is written under a temporary name
of its own (`.checkpoint.pt.<random>.tmp`), synced to disk, then renamed over the previous one, so a kill at any
moment leaves the last complete checkpoint in place; it starts with a digest of its contents, so a truncated or
damaged file is refused. A write that fails (a full disk) says so in one line on stderr, removes its temporary file
and keeps the previous checkpoint; training goes on, and the next checkpoint tries again.
It holds:
- the script's file name, the run name, the arguments (a resumed run must be given the same flags), the wandb run id;
- the iteration just finished, global_step, and the training time so far (for charts/SPS and the progress line);
- the agent's and the optimizer's state dicts, the observation the agent acts on next and whether it starts an
  episode (`obs`, `done`), the recent episodic returns;
- every random generator: Python's `random`, NumPy's global one, torch's CPU generator and CUDA's, where used;
- the environments: the vector environment's own attributes (autoreset flags, buffers), and for every sub-environment
  the attributes of every wrapper down its stack (episode statistics, normalisers' running means and discounted
  returns, frame stacks, lives, time limits, its np_random), plus the emulator or physics state, which lives outside
  Python: ALE's full system state with its random generator (`cloneState(include_rng=True)`), MuJoCo's whole `MjData`
  (`mj_copyData` back into the fresh one: also the derived quantities some tasks read before stepping, which
  `mjSTATE_INTEGRATION` alone would leave stale).
What a fresh build recreates identically is not stored: functions (wrappers' transforms), specs, spaces, models and
renderers.

Where a sub-environment holds state that cannot be captured (a Box2D world: pybox2d can neither pickle its bodies nor
set a world's full state, contact caches included), the checkpoint holds no environment state: on resume the learner
goes on exactly and the environments restart, seeded from the seed and the iteration, which the script says in one
line. Otherwise the resumed run logs bitwise what the uninterrupted run logs, on the same machine.

The flags a resumed run may change: --resume and --checkpoint-every, --track and the W&B project and entity,
--save-model, --upload-model and --hf-entity (what is done with the run, not what it computes). Every other flag must
be the checkpoint's. TensorBoard gets one curve per tag: the points logged after the checkpoint by the stopped run
are purged (purge_step). W&B, under --track, continues the same run (its id, resume="allow").
"""

import contextlib
import dataclasses
import hashlib
import inspect
import io
import json
import os
import pickle
import random
import secrets
import signal
import sys
import time
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from cleanrl_utils.scripts import OPERATIONAL  # what the resumed run may do differently

FILE = "checkpoint.pt"
STATE_FILE = "checkpoint.json"  # what the benchmark runner reads: the flags, the iteration reached, the iterations
STOPPED = 75  # the exit status after a stop asked by a signal: EX_TEMPFAIL, "try again"
MAGIC = b"cleanrl checkpoint 1\n"
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
    """The checkpoint in the file `path`, as saved; BadCheckpoint when it is missing, truncated or damaged."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BadCheckpoint(f"cannot read {path}: {e.strerror}") from None
    digest_end = len(MAGIC) + hashlib.sha256().digest_size
    if not data.startswith(MAGIC):
        raise BadCheckpoint(f"{path} is not a checkpoint of these scripts")
    if len(data) < digest_end or hashlib.sha256(data[digest_end:]).digest() != data[len(MAGIC) : digest_end]:
        raise BadCheckpoint(f"{path} is truncated or damaged")
    try:
        return torch.load(io.BytesIO(data[digest_end:]), map_location="cpu", weights_only=False)
    except Exception as e:  # whole, yet unreadable here: another version of the libraries, say
        raise BadCheckpoint(f"cannot load {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def write(state, path):
    """Writes `state` to `path` so that a kill at any moment leaves either the previous file or this one, whole."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    write_whole([MAGIC, hashlib.sha256(payload).digest(), payload], path)


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


class Checkpoints:
    """The checkpoints of one run: made right after the run name, before any work. With --resume it reads and checks
    the run's checkpoint, or ends the program with one line on stderr and exit status 2."""

    def __init__(self, args, script, run_name):
        self.args = args
        self.script = os.path.basename(script)
        self.state = None
        self.wandb_id = None
        self.stop_signal = None
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
        if self.state is not None:
            self.purge_logs()

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
        """The checkpoint `state` if this program may go on from it; BadCheckpoint saying why not otherwise."""
        where = f"runs/{state['run_name']}"
        if state["script"] != self.script:
            raise BadCheckpoint(f"{where} is a run of {state['script']}, not of {self.script}: resume it with that")
        computed = computed_fields(self.args)
        ours = vars(self.args)
        # a field the script has gained since the checkpoint was written counts as its default there
        theirs = {**field_defaults(self.args), **state["args"]}
        differ = [name for name in ours if name not in OPERATIONAL and ours[name] != theirs.get(name)]
        flags = [name for name in differ if name not in computed]
        if differ:  # the flags; what is computed from them (or from the launch, as a world size) where they agree
            shown = [f"{flag(name)} {theirs.get(name)}" for name in flags] or [f"{n} {theirs.get(n)}" for n in differ]
            raise BadCheckpoint(f"{where} was run with {', '.join(shown)}: give the run's own flags")
        if state["iteration"] >= theirs["num_iterations"]:
            raise BadCheckpoint(f"{where} has finished (iteration {state['iteration']} of {theirs['num_iterations']})")
        return state

    def restore(self, envs, agent, optimizer, *carried):
        """Puts the checkpoint into the freshly built `envs`, `agent`, `optimizer`, the tensors
        `carried` (what else the loop carries from one iteration to the next, as an LSTM's state: in place) and the
        random generators; returns the first iteration to run, global_step, start_time, next_obs and next_done."""
        state = self.state
        device = next(agent.parameters()).device
        agent.load_state_dict(state["agent"])
        optimizer.load_state_dict(state["optimizer"])
        next_obs = state["next_obs"].to(device)
        next_done = state["next_done"].to(device)
        for tensor, saved in zip(tensors(carried), state["carried"], strict=True):
            tensor.copy_(saved)
        if state["envs"] is not None:
            restore_envs(envs, state["envs"])
        else:
            next_obs = torch.as_tensor(self.restart_envs(envs), dtype=torch.float32, device=device)
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

    def restart_envs(self, envs):
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
            f"{self.script}: {state['envs_lost']}: the environments restart ({how}); the learner goes on exactly",
            flush=True,
        )
        if envpool:
            return envs.reset()[0]
        if seeded:
            return envs.reset(seed=seed)[0]
        return envs.reset()

    def save(self, iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done, *carried):
        """Writes a checkpoint every --checkpoint-every iterations, at the last one (which marks the run finished)
        and after a stop asked by a signal, then ends the program. What the writer holds goes to disk first: the
        checkpoint never runs ahead of the logs."""
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
            "args": dict(vars(self.args)),
            "wandb_id": self.wandb_id,
            "iteration": iteration,
            "global_step": global_step,
            "elapsed": time.time() - start_time,
        }

    def commit(self, state):
        """Writes the checkpoint `state` and checkpoint.json; after a stop asked by a signal, ends the program."""
        iteration = state["iteration"]
        global_step = state["global_step"]
        plain = {"script": self.script, "run_name": self.run_name, "argv": sys.argv[1:], "iteration": iteration}
        plain.update(num_iterations=self.args.num_iterations, global_step=global_step)
        try:
            write(state, self.path)
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
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(), "cuda": cuda}


def restore_random(saved):
    random.setstate(saved["python"])
    np.random.set_state(saved["numpy"])
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
    """The state an object keeps in its own attributes, and the names of those that cannot be stored."""
    kept, lost = {}, []
    for name, value in vars(obj).items():
        if name in STATIC or name in skip or callable(value) or isinstance(value, STRUCTURE):
            continue
        if type(value).__module__.startswith("pygame"):  # what renders (classic control, Box2D): made anew
            continue
        try:
            pickle.dumps(value)
        except Exception:
            lost.append(f"{type(obj).__name__}.{name}")
            continue
        kept[name] = value
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
    if kind == "ale":
        base["engine_state"] = env.ale.cloneState(include_rng=True)
    elif kind == "mujoco":
        base["engine_state"] = zlib.compress(pickle.dumps(env.data), 1)  # the arena is mostly zeros
    elif kind == "procgen":
        base["engine_state"] = env.venv.env.get_state()  # each game's whole state, its random generators included
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
    """Puts the state `capture_stack` took into the freshly built `env`, which must be built the same way."""
    for layer in saved["layers"]:
        assert type(env).__qualname__ == layer["class"], (type(env).__qualname__, layer["class"])
        vars(env).update(layer["attributes"])
        env = env.env
    base = saved["base"]
    assert type(env).__qualname__ == base["class"], (type(env).__qualname__, base["class"])
    vars(env).update(base["attributes"])
    if base["engine"] == "ale":
        env.ale.restoreState(base["engine_state"])
    elif base["engine"] == "mujoco":
        import mujoco

        mujoco.mj_copyData(env.data, env.model, pickle.loads(zlib.decompress(base["engine_state"])))
    elif base["engine"] == "procgen":
        env.venv.env.set_state(base["engine_state"])
    for sub_env, sub_state in zip(getattr(env, "envs", []), base.get("envs", []), strict=True):
        restore_envs(sub_env, sub_state)


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
        if self.state is None:
            return
        iteration = self.state["iteration"]
        try:  # every process checks every part, so that rank 0 alone says what is wrong
            parts = {rank: read(self.part_path(iteration, rank)) for rank in range(1, self.args.world_size)}
        except BadCheckpoint as e:
            self.fail(f"--resume: {e}")
        if self.rank != 0:
            self.state.update(parts[self.rank])
        if self.rank == 0:  # rank 0 alone logs; once the checkpoint is known whole
            super().purge_logs()

    def fail(self, message):
        """Every process finds the same error in the flags or the checkpoint: rank 0 alone says it."""
        if self.rank == 0:
            super().fail(message)
        sys.exit(2)

    def purge_logs(self):
        """Done once the parts are checked (__init__)."""

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
    agent_state, key, episode_stats = from_named_arrays(state["agent"], (agent_state, key, episode_stats))
    episode_stats = episode_stats.replace(**{name: jnp.zeros_like(getattr(episode_stats, name)) for name in UNDER_WAY})
    next_obs = run.restart_envs(envs)
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
    assert sorted(paths) == sorted(saved), "the checkpoint's learner is not this script's"
    return jax.tree_util.tree_unflatten(structure, [jnp.asarray(saved[path].numpy()) for path in paths])
