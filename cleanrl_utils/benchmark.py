"""Runs one training command over several environments and seeds: on this machine, a few at a time, or as a
Slurm array job.

    python -m cleanrl_utils.benchmark --env-ids CartPole-v1 Acrobot-v1 --command "python cleanrl/ppo.py --no-cuda" \\
        --num-seeds 3 --workers 2
    python -m cleanrl_utils.benchmark ... --workers 0          # only print the commands
    python -m cleanrl_utils.benchmark ... --slurm-template-path benchmark/ppo.slurm_template --slurm-gpus-per-task 1

Each run gets `--env-id ENV --seed SEED` appended to the command; for each seed, every environment in turn.
A command that starts with `python` (or `python3`) runs under the interpreter that runs this module, so
`.venv/bin/python -m cleanrl_utils.benchmark --command "python cleanrl/ppo.py"` trains with .venv's packages
whether or not that environment is activated.
"""

import contextlib
import functools
import hashlib
import io
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import tyro

from cleanrl_utils.scripts import checkpoint_header, load_script, operational_flags

# Thread pools of the numeric libraries a script may load; each run gets its share of the cores.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass
class Args:
    env_ids: list[str] = field(default_factory=lambda: ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"])
    """the environments to run the command on"""
    command: str = "python cleanrl/ppo.py --no-cuda"
    """the training command; `--env-id ENV --seed SEED` is appended for each run"""
    num_seeds: int = 3
    """how many seeds per environment"""
    start_seed: int = 1
    """the first seed; the others follow it"""
    workers: int = 0
    """how many runs at a time here (0: only print the commands); with Slurm, array tasks at a time (0: no limit)"""
    threads_per_run: int | None = None
    """threads per run, as OMP_NUM_THREADS and the like where unset (None: the cores / --workers, at least 1)"""
    log_dir: str = "benchmark/logs"
    """where each run's output goes, in a new timestamped folder per benchmark"""
    checkpoint_every: int | None = None
    """passed on to each run as --checkpoint-every (None: one checkpoint per 1% of a run of at least 100 iterations,
    none for shorter runs; 0: none)"""
    run_one: str | None = None
    """run this one command, continuing its run from its checkpoint if it has one (what each Slurm task does)"""
    slurm_template_path: str | None = None
    """a Slurm job template, e.g. benchmark/ppo.slurm_template: submit an array job, one task per run, with sbatch"""
    slurm_dir: str = "slurm"
    """where the Slurm job script and the array tasks' logs are written"""
    slurm_gpus_per_task: int | None = None
    """GPUs for each Slurm task (None: no GPU requested)"""
    slurm_ntasks: int | None = None
    """Slurm tasks (processes) per run (None: 1)"""
    slurm_total_cpus: int | None = None
    """CPUs for each run, shared among its Slurm tasks (None: the cluster's default)"""
    slurm_nodes: int | None = None
    """nodes for each run (None: the cluster's default)"""


@dataclass
class Run:
    env_id: str
    seed: int
    command: str

    @property
    def log_name(self) -> str:
        return f"{self.env_id.replace('/', '_')}__seed{self.seed}.log"


@dataclass
class Outcome:
    run: Run
    returncode: int
    seconds: float
    log_path: Path
    how: str = "started"  # started, continued (from its checkpoint), restarted (its script changed) or left


class UserError(Exception):
    """A mistake in the arguments: reported as one line on stderr with exit status 2."""


def expand_runs(command: str, env_ids: list[str], num_seeds: int, start_seed: int) -> list[Run]:
    """One run per seed and environment, all environments of the first seed first."""
    return [
        Run(env_id, seed, f"{command} --env-id {shlex.quote(env_id)} --seed {seed}")
        for seed in range(start_seed, start_seed + num_seeds)
        for env_id in env_ids
    ]


PYTHON_NAMES = ("python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}")


def with_this_interpreter(command: str) -> str:
    """`command` with a leading `python` replaced by this interpreter's path (quoted); other commands unchanged."""
    words = command.split(maxsplit=1)
    if not words or words[0] not in PYTHON_NAMES:
        return command
    return " ".join([shlex.quote(sys.executable), *words[1:]])


def last_line(path: Path) -> str:
    """The last non-empty line of a log (what a failed run said last), or "" if there is none."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


# ---- finding a run again: what a benchmark run before this one left unfinished ----------------------------------
# A script run with --checkpoint-every writes `checkpoint.pt` into its run folder; the file's header, a line of JSON,
# holds the run's command-line flags, the iteration it reached, whether it finished, and the sha256 of the script
# that wrote it (cleanrl_utils/checkpoint/fileformat.py). The header is part of the checkpoint, so the two cannot
# disagree.
CHECKPOINT_FILE = "checkpoint.pt"
# the flags a continued run may give otherwise than its first attempt (the scripts' --resume accepts them)
FLAGS_WITH_VALUE, SWITCHES = operational_flags()


def flags_of(command: str) -> tuple[str | None, list[str]]:
    """The script's path in `command` (its first word ending in .py, after `python` or `torchrun ...`) and the
    flags after it, without those that may differ between the attempts of one run (scripts.OPERATIONAL: --resume,
    --checkpoint-every, --track, --save-model, ...)."""
    words = shlex.split(command)
    at = next((i for i, word in enumerate(words) if word.endswith(".py")), None)
    if at is None or "-m" in words[:at]:  # `python -m module ... x.py`: x.py is the module's argument, not its script
        return None, []
    flags = []
    rest = iter(words[at + 1 :])
    for word in rest:
        name = word.partition("=")[0]
        if word in FLAGS_WITH_VALUE:
            next(rest, None)
        elif name not in FLAGS_WITH_VALUE and name not in SWITCHES:
            flags.append(word)
    return words[at], flags


def flag_value(flags: list[str], *names: str) -> str | None:
    """The value `flags` give the flag spelt any of `names`, as `--flag value` or `--flag=value`; the last one given
    wins, as on the command line. None where it is not given."""
    value = None
    for i, word in enumerate(flags):
        name, equals, given = word.partition("=")
        if name not in names:
            continue
        if equals:
            value = given
        elif i + 1 < len(flags):
            value = flags[i + 1]
    return value


def exp_name_of(script: str, flags: list[str]) -> str:
    return flag_value(flags, "--exp-name", "--exp_name") or Path(script).stem


def script_sha256(path: Path) -> str | None:
    """The sha256 of the script file `path`, or None where it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def earlier_attempt(run: Run, cwd: Path) -> tuple[str, Path | None]:
    """("finished" | "unfinished" | "changed", run folder) of the newest run folder under cwd/runs whose checkpoint
    says it ran this run's command ("changed": with another text of the script, which makes it another run);
    ("new", None) where there is none."""
    script, flags = flags_of(run.command)
    if script is None:
        return "new", None
    pattern = f"{run.env_id}__{exp_name_of(script, flags)}__{run.seed}__*"
    folders = sorted((cwd / "runs").glob(pattern), key=lambda folder: folder.stat().st_mtime, reverse=True)
    code_now = script_sha256(cwd / script)
    for folder in folders:
        try:
            header = checkpoint_header(folder / CHECKPOINT_FILE)
            same = flags_of(shlex.join(["x.py", *header["argv"]]))[1] == flags
            finished = bool(header["finished"])
            code_then = (header.get("code") or {}).get("script_sha256")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if same and code_then != code_now:
            return "changed", folder
        if same:
            return ("finished" if finished else "unfinished"), folder
    return "new", None


@functools.cache
def iterations_of(command: str) -> int | None:
    """How many iterations the command's run has, from its script's Args (None where that cannot be known)."""
    script, flags = flags_of(command)
    if script is None or not Path(script).is_file():
        return None
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            module = load_script(Path(script).stem, Path(script).resolve().parent)
            args = tyro.cli(module.Args, args=flags)
        num_envs = getattr(args, "num_envs", None) or getattr(args, "local_num_envs", None)
        return args.total_timesteps // (num_envs * args.num_steps)
    except (Exception, SystemExit):
        return None


def checkpoint_every_for(command: str, chosen: int | None) -> int:
    """--checkpoint-every for a run: the runner's --checkpoint-every if given, else one per 1% of the run for runs
    of at least 100 iterations (0, no checkpoints, for shorter ones or where the iterations cannot be known)."""
    if chosen is not None:
        return chosen
    iterations = iterations_of(command)
    return iterations // 100 if iterations and iterations >= 100 else 0


def attempt(run: Run, cwd: Path, chosen: int | None) -> tuple[str, str | None]:
    """How to run `run` now: ("left", None) for a finished run, ("continued", command) to go on from its last
    checkpoint, ("started", command) for a new run, ("restarted", command) for a run whose earlier attempt ran another
    text of its script (a new run, in a new folder); the command carries --checkpoint-every where due."""
    status, folder = earlier_attempt(run, cwd)
    if status == "finished":
        return "left", None
    every = checkpoint_every_for(run.command, chosen)
    command = run.command + (f" --checkpoint-every {every}" if every else "")
    if status == "unfinished":
        return "continued", f"{command} --resume {shlex.quote(str(folder))}"
    if status == "changed":
        return "restarted", command
    return "started", command


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def child_environment(base: dict[str, str], threads: int) -> dict[str, str]:
    """The environment of a run: `base` with the thread pools capped at `threads` where `base` does not
    already say, and unbuffered Python output so the log fills as the run goes."""
    env = dict(base)
    for name in THREAD_VARIABLES:
        env.setdefault(name, str(threads))
    # XLA (the JAX scripts) ignores the variables above and sizes its own pool
    env.setdefault(
        "XLA_FLAGS",
        f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} intra_op_parallelism_threads={threads}",
    )
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def check_args(args: Args) -> None:
    if not args.env_ids:
        raise UserError("no environment: give at least one with --env-ids")
    repeated = sorted({env_id for env_id in args.env_ids if args.env_ids.count(env_id) > 1})
    if repeated:
        raise UserError(f"--env-ids names {', '.join(repeated)} more than once")
    if not args.command.strip():
        raise UserError("--command is empty: give the training command, e.g. 'python cleanrl/ppo.py --no-cuda'")
    try:
        shlex.split(args.command)
    except ValueError as e:
        raise UserError(f"--command cannot be split into words ({e}): check its quotes") from None
    if args.num_seeds < 1:
        raise UserError(f"--num-seeds must be at least 1, got {args.num_seeds}")
    if args.workers < 0:
        raise UserError(f"--workers must be 0 (print the commands) or more, got {args.workers}")
    if args.checkpoint_every is not None and args.checkpoint_every < 0:
        raise UserError(f"--checkpoint-every must be 0 (no checkpoints) or more, got {args.checkpoint_every}")
    if args.threads_per_run is not None and args.threads_per_run < 1:
        raise UserError(f"--threads-per-run must be at least 1, got {args.threads_per_run}")
    slurm_options = ("slurm_gpus_per_task", "slurm_ntasks", "slurm_total_cpus", "slurm_nodes")
    for name in slurm_options:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if value is not None and args.slurm_template_path is None:
            raise UserError(f"{flag} applies to Slurm jobs only: add --slurm-template-path")
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
    if (args.slurm_ntasks or 1) > 1 and not launches_per_node(args.command):
        raise UserError(
            f"--slurm-ntasks {args.slurm_ntasks} would run {args.slurm_ntasks} copies of this command in each array "
            "task: leave it out (several tasks are for a torchrun command with --nnodes above 1, one per node)"
        )
    if args.slurm_template_path is not None and not Path(args.slurm_template_path).is_file():
        raise UserError(
            f"no Slurm template at {args.slurm_template_path} (the project ships benchmark/ppo.slurm_template)"
        )


def new_folder(parent: Path, name: str) -> Path:
    """A folder `parent/name` that did not exist before (`name-2`, `name-3`, ... if it did)."""
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        folder = parent / (name if attempt == 1 else f"{name}-{attempt}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot find a free folder name for {parent / name}")


def execute(run: Run, log_path: Path, env: dict[str, str], checkpoint_every: int | None = None) -> Outcome:
    """Runs one command with its output (stdout and stderr) in `log_path`, continuing its run where an earlier
    benchmark left it unfinished and leaving it alone where it finished; never raises for a failed run."""
    start = time.time()
    how, command = attempt(run, Path("."), checkpoint_every)
    with open(log_path, "w") as log:
        if command is None:
            log.write(f"left: {run.command} finished before\n")
            return Outcome(run, 0, 0.0, log_path, how)
        log.write(f"$ {command}\n")
        log.flush()
        try:
            returncode = subprocess.run(
                shlex.split(with_this_interpreter(command)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            ).returncode
        except OSError as e:  # the program itself is missing or cannot be executed
            log.write(f"cannot start the command: {e}\n")
            returncode = 127
    return Outcome(run, returncode, time.time() - start, log_path, how)


# ---- one run in a Slurm task -----------------------------------------------------------------------------------
# Slurm asks a run to stop with SIGUSR1 or SIGTERM; the script then finishes its iteration, writes a checkpoint and
# exits with this status (cleanrl_utils.checkpoint.STOPPED), and the task queues itself again.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
STOPPED = 75


def torchrun_arguments(words: list[str]) -> list[str] | None:
    """torchrun's arguments where the command `words` starts torchrun (`torchrun ...` or `python -m
    torch.distributed.run ...`), else None."""
    if words and Path(words[0]).name == "torchrun":
        return words[1:]
    if words and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "torch.distributed.run"]:
        return words[3:]
    return None


def launches_per_node(command: str) -> bool:
    """Whether `command` is a torchrun whose --nnodes is above 1: one launcher per node, whose processes find each
    other; any other command run in several Slurm tasks is as many copies of one run."""
    arguments = torchrun_arguments(shlex.split(command))
    if arguments is None:
        return False
    script_at = next((i for i, word in enumerate(arguments) if word.endswith(".py")), len(arguments))
    nnodes = flag_value(arguments[:script_at], "--nnodes") or "1"
    return nnodes.rpartition(":")[2].isdigit() and int(nnodes.rpartition(":")[2]) > 1


def checkpoints(command: str) -> bool:
    """Whether the script of `command` keeps checkpoints: --checkpoint-every above 0, or --resume."""
    words = shlex.split(command)
    at = next((i for i, word in enumerate(words) if word.endswith(".py")), len(words))
    every = flag_value(words[at + 1 :], "--checkpoint-every", "--checkpoint_every")
    return (every is not None and every.isdigit() and int(every) > 0) or "--resume" in words[at + 1 :]


def launch_torchrun(arguments: list[str]) -> int:
    """Runs torchrun with `arguments` in this process and returns the status its processes mean: 75 where those
    that ended first all stopped after a checkpoint (torchrun itself would exit with 1, and the task would not be
    queued again), 1 where any failed otherwise, 0 where all finished. Its processes run under this interpreter."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(arguments))
    except ChildFailedError as e:
        statuses = sorted({failure.exitcode for failure in e.failures.values()})
        # the first process to stop ends torchrun's wait, and torchrun ends the others with SIGTERM, which may reach
        # one before it exits 75 itself; the run then goes on from its last complete checkpoint all the same
        if STOPPED in statuses and set(statuses) <= {STOPPED, -signal.SIGTERM}:
            print(f"benchmark: torchrun's processes stopped after their checkpoint (exit status {STOPPED})", flush=True)
            return STOPPED
        said = ", ".join(map(str, statuses))
        print(f"benchmark: torchrun's processes failed (exit status {said})", file=sys.stderr, flush=True)
        return 1
    return 0


def run_one(command: str, checkpoint_every: int | None) -> int:
    """One run, as a Slurm task runs it: continued from its checkpoint if an earlier attempt left one, left alone
    if it finished; the training command replaces this process, so Slurm's signals reach the script itself (a
    torchrun command runs in this process instead, which reads its processes' exit statuses). A run that keeps
    checkpoints starts with SIGUSR1 and SIGTERM held (blocked): one sent while it imports and sets up is delivered
    when its checkpoint machinery is ready (cleanrl_utils.checkpoint.begin), and it stops after its first iteration."""
    _, flags = flags_of(command)
    env_id = flag_value(flags, "--env-id", "--env_id")
    seed = flag_value(flags, "--seed")
    run = Run(env_id, int(seed), command) if env_id and seed and seed.isdigit() else Run("", 0, command)
    how, command = attempt(run, Path("."), checkpoint_every)
    if command is None:
        print(f"benchmark: left {run.command}: it finished before", flush=True)
        return 0
    print(f"benchmark: {how} {command}", flush=True)
    words = shlex.split(with_this_interpreter(command))
    if checkpoints(command):
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # inherited by what this process starts
    arguments = torchrun_arguments(words)
    if arguments is not None:
        return launch_torchrun(arguments)
    os.execvp(words[0], words)


def duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


def run_locally(
    runs: list[Run], workers: int, threads: int, log_dir: Path, checkpoint_every: int | None = None
) -> list[Outcome]:
    """Runs `workers` commands at a time, each in its own process, printing a line as each one ends."""
    env = child_environment(dict(os.environ), threads)
    for run in runs:  # each script's Args read here, in this thread, before the runs start in several
        checkpoint_every_for(run.command, checkpoint_every)
    outcomes = []
    print(f"benchmark: {len(runs)} runs, {workers} at a time, {threads} thread(s) each; logs in {log_dir}", flush=True)
    if with_this_interpreter(runs[0].command) != runs[0].command:
        print(f"benchmark: `python` in the command runs {sys.executable}, the interpreter of this runner", flush=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(execute, run, log_dir / run.log_name, env, checkpoint_every) for run in runs]
        try:
            for future in as_completed(futures):
                outcome = future.result()
                outcomes.append(outcome)
                status = "ok" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode})"
                status = {
                    "continued": f"{status} (continued)",
                    "restarted": f"{status} (restarted: its script changed since its checkpoint)",
                    "left": "left (finished before)",
                }.get(outcome.how, status)
                said = "" if outcome.returncode == 0 else f"\n    {last_line(outcome.log_path)}"
                print(
                    f"[{len(outcomes)}/{len(runs)}] {status} {outcome.run.env_id} seed {outcome.run.seed} "
                    f"in {duration(outcome.seconds)}: {outcome.log_path}{said}",
                    flush=True,
                )
        except KeyboardInterrupt:
            # the running children got the same Ctrl-C; do not start the queued ones
            for future in futures:
                future.cancel()
            raise
    return [future.result() for future in futures]  # in the order of `runs`


def summary(outcomes: list[Outcome]) -> str:
    failed = [o for o in outcomes if o.returncode != 0]
    succeeded = {}
    for o in outcomes:
        if o.returncode == 0:
            succeeded.setdefault(o.run.env_id, []).append(str(o.run.seed))
    lines = [f"summary: {len(outcomes) - len(failed)} of {len(outcomes)} runs succeeded, {len(failed)} failed"]
    for how in ("started", "continued", "restarted", "left"):
        runs = [f"{o.run.env_id} seed {o.run.seed}" for o in outcomes if o.how == how]
        explained = {
            "continued": " from their checkpoints",
            "restarted": " afresh in new folders: their script changed since their checkpoints",
            "left": " alone: they had finished before",
        }.get(how, "")
        lines += [f"  {how}{explained}: {', '.join(runs)}"] if runs else []
    lines += [f"  succeeded: {env_id} seeds {' '.join(seeds)}" for env_id, seeds in succeeded.items()]
    for o in failed:
        lines.append(f"  FAILED (exit {o.returncode}): {o.run.command}")
        lines.append(f"    log: {o.log_path}")
        lines.append(f"    last line: {last_line(o.log_path) or '(the log is empty)'}")
    return "\n".join(lines)


def fill_template(template: str, values: dict[str, str | None]) -> str:
    """Replaces each {{name}} in `template` by values[name]; a line naming a value that is None is left out."""
    known = set(values)
    unknown = sorted(set(PLACEHOLDER.findall(template)) - known)
    if unknown:
        raise UserError(f"the Slurm template names unknown fields {unknown}; known fields: {sorted(known)}")
    lines = []
    for line in template.splitlines(keepends=True):
        if any(values[name] is None for name in PLACEHOLDER.findall(line)):
            continue
        lines.append(PLACEHOLDER.sub(lambda m: values[m.group(1)], line))
    return "".join(lines)


def job_name(command: str) -> str:
    """The script's name without `.py` (`ppo` for `python cleanrl/ppo.py ...`), else `benchmark`."""
    scripts = [Path(word).stem for word in shlex.split(command) if word.endswith(".py")]
    return scripts[0] if scripts else "benchmark"


def slurm_values(args: Args, runs: list[Run], workdir: Path, log_dir: Path) -> dict[str, str | None]:
    """What goes into the Slurm template."""
    ntasks = args.slurm_ntasks or 1
    return {
        "job_name": job_name(args.command),
        "array": f"0-{len(runs) - 1}" + (f"%{args.workers}" if args.workers > 0 else ""),
        "num_runs": str(len(runs)),
        "nodes": None if args.slurm_nodes is None else str(args.slurm_nodes),
        "ntasks": str(ntasks),
        "gpus_per_task": None if args.slurm_gpus_per_task is None else str(args.slurm_gpus_per_task),
        "cpus_per_task": None if args.slurm_total_cpus is None else str(math.ceil(args.slurm_total_cpus / ntasks)),
        "workdir": shlex.quote(str(workdir)),
        "output": shlex.quote(str(log_dir / "%x_%A_%a.log")),
        "commands": "\n".join(f"    {shlex.quote(run.command)}" for run in runs),
        "runner": " ".join(
            [shlex.quote(sys.executable), "-m", "cleanrl_utils.benchmark"]
            + ([] if args.checkpoint_every is None else ["--checkpoint-every", str(args.checkpoint_every)])
        ),
    }


def submit_to_slurm(args: Args, runs: list[Run]) -> int:
    """Writes the array job script into --slurm-dir and submits it; returns the exit status."""
    template = Path(args.slurm_template_path).read_text()
    slurm_dir = Path(args.slurm_dir)
    log_dir = (slurm_dir / "logs").resolve()
    values = slurm_values(args, runs, Path.cwd(), log_dir)
    script = fill_template(template, values)
    log_dir.mkdir(parents=True, exist_ok=True)  # Slurm does not create the folder of --output itself
    path = slurm_dir / f"{values['job_name']}_{time.strftime('%Y%m%d-%H%M%S')}.slurm"
    path.write_text(script)
    print(f"benchmark: wrote {path}: an array job of {len(runs)} runs; task logs go to {log_dir}")
    if shutil.which("sbatch") is None:
        raise UserError(f"sbatch is not on PATH; submit {path} with `sbatch {path}` on a machine with Slurm")
    return subprocess.run(["sbatch", str(path)]).returncode


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="python -m cleanrl_utils.benchmark")
    if args.run_one is not None:
        return run_one(args.run_one, args.checkpoint_every)
    try:
        check_args(args)
        runs = expand_runs(args.command, args.env_ids, args.num_seeds, args.start_seed)
        if args.slurm_template_path is not None:
            return submit_to_slurm(args, runs)
    except UserError as e:
        print(f"benchmark: error: {e}", file=sys.stderr)
        return 2
    if args.workers == 0:
        print("\n".join(run.command for run in runs))
        return 0
    threads = args.threads_per_run or max(1, usable_cores() // args.workers)
    log_dir = new_folder(Path(args.log_dir), time.strftime("%Y%m%d-%H%M%S"))
    try:
        outcomes = run_locally(runs, args.workers, threads, log_dir, args.checkpoint_every)
    except KeyboardInterrupt:
        print(f"benchmark: interrupted; the logs so far are in {log_dir}", file=sys.stderr)
        return 130
    print(summary(outcomes), flush=True)
    return 0 if all(o.returncode == 0 for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
