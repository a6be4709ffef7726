"""cleanrl_utils/benchmark.py: one command over environments and seeds, run here a few at a time or as a Slurm job;
benchmark/speed.py, the speed of a script; benchmark/vs_random.py, a learning check for self-play."""

import dataclasses
import json
import os
import shlex
import subprocess
import sys

import pytest
import torch
from helpers import ROOT, assert_user_error, run_python, run_script, script_env, vector_env

import benchmark.speed as speed
from cleanrl_utils import benchmark
from cleanrl_utils.scripts import CHECKPOINT_MAGIC, OPERATIONAL, checkpoint_header, load_script, script_names

TEMPLATE = ROOT / "benchmark" / "ppo.slurm_template"

# Stands in for a training script: reports its arguments and thread settings, and fails on Broken-v0.
FAKE_TRAINING = (
    "import os, sys; env_id, seed = sys.argv[sys.argv.index('--env-id') + 1], sys.argv[sys.argv.index('--seed') + 1]; "
    "print('training', env_id, 'seed', seed); "
    "print('threads', *(os.environ[f'{lib}_NUM_THREADS'] for lib in ('OMP', 'MKL', 'OPENBLAS'))); "
    "sys.exit('boom' if env_id == 'Broken-v0' else 0)"
)
FAKE_COMMAND = f"{shlex.quote(sys.executable)} -c {shlex.quote(FAKE_TRAINING)}"


def benchmark_cli(*args, cwd, env=None):
    return run_script(ROOT / "cleanrl_utils" / "benchmark.py", *args, cwd=cwd, env=env, check=False, timeout=120)


def test_one_command_per_seed_and_environment_seeds_outermost():
    runs = benchmark.expand_runs("python cleanrl/ppo.py --no-cuda", ["CartPole-v1", "dm_control/reacher-easy-v0"], 2, 4)
    assert [run.command for run in runs] == [
        "python cleanrl/ppo.py --no-cuda --env-id CartPole-v1 --seed 4",
        "python cleanrl/ppo.py --no-cuda --env-id dm_control/reacher-easy-v0 --seed 4",
        "python cleanrl/ppo.py --no-cuda --env-id CartPole-v1 --seed 5",
        "python cleanrl/ppo.py --no-cuda --env-id dm_control/reacher-easy-v0 --seed 5",
    ]
    assert [run.seed for run in runs] == [4, 4, 5, 5]
    assert runs[1].log_name == "dm_control_reacher-easy-v0__seed4.log"


def test_workers_0_only_prints_the_commands(tmp_path):
    proc = benchmark_cli("--env-ids", "A-v0", "B-v0", "--num-seeds", "2", "--command", "python train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "python train.py --env-id A-v0 --seed 1",
        "python train.py --env-id B-v0 --seed 1",
        "python train.py --env-id A-v0 --seed 2",
        "python train.py --env-id B-v0 --seed 2",
    ]
    assert list(tmp_path.iterdir()) == [], "a dry run writes nothing"


@pytest.mark.multicore
def test_a_failed_run_does_not_stop_the_others(tmp_path):
    args = ["--env-ids", "Good-v0", "Broken-v0", "Other-v0", "--num-seeds", "2", "--start-seed", "7"]
    proc = benchmark_cli(*args, "--command", FAKE_COMMAND, "--workers", "2", "--log-dir", "logs", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "summary: 4 of 6 runs succeeded, 2 failed" in proc.stdout
    assert "succeeded: Good-v0 seeds 7 8" in proc.stdout and "succeeded: Other-v0 seeds 7 8" in proc.stdout
    [log_dir] = (tmp_path / "logs").iterdir()
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(
        f"{env}__seed{seed}.log" for env in ("Good-v0", "Broken-v0", "Other-v0") for seed in (7, 8)
    )
    for seed in (7, 8):
        failed_log = log_dir / f"Broken-v0__seed{seed}.log"
        assert f"FAILED (exit 1): {FAKE_COMMAND} --env-id Broken-v0 --seed {seed}\n    log: logs/" in proc.stdout
        assert f"log: {failed_log.relative_to(tmp_path)}" in proc.stdout
        assert "boom" in failed_log.read_text(), "stderr goes to the log"
        for env_id in ("Good-v0", "Other-v0"):
            assert f"training {env_id} seed {seed}" in (log_dir / f"{env_id}__seed{seed}.log").read_text()


@pytest.mark.multicore
@pytest.mark.parametrize("threads_per_run", [None, 3])
def test_threads_are_pinned_unless_already_set(tmp_path, threads_per_run):
    env = script_env(MKL_NUM_THREADS="7")
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.pop(name, None)
    flags = [] if threads_per_run is None else ["--threads-per-run", str(threads_per_run)]
    args = ["--env-ids", "Good-v0", "--num-seeds", "1", "--command", FAKE_COMMAND, "--workers", "2", *flags]
    proc = benchmark_cli(*args, "--log-dir", "logs", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = threads_per_run or max(1, benchmark.usable_cores() // 2)
    [log] = (tmp_path / "logs").glob("*/Good-v0__seed1.log")
    assert f"threads {expected} 7 {expected}" in log.read_text()


def test_python_in_the_command_is_the_runners_interpreter_and_a_failure_says_why(tmp_path):
    """A user who runs `.venv/bin/python -m cleanrl_utils.benchmark --command "python ..."` from a shell without the
    venv activated gets the venv's interpreter for every run; a run that fails shows its last log line."""
    (tmp_path / "bin").mkdir()
    decoy = tmp_path / "bin" / "python"  # a `python` first on PATH that is not the runner's
    decoy.write_text("#!/bin/sh\necho 'decoy python has no gymnasium' >&2\nexit 1\n")
    decoy.chmod(0o755)
    env = script_env(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    training = "import sys; print(sys.executable); sys.exit('no such environment: ' + sys.argv[-3])"
    command = f"python -c {shlex.quote(training)}"
    proc = benchmark_cli(
        "--env-ids",
        "Missing-v9",
        "--num-seeds",
        "1",
        "--command",
        command,
        "--workers",
        "1",
        "--log-dir",
        "logs",
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"`python` in the command runs {sys.executable}" in proc.stdout
    [log] = (tmp_path / "logs").glob("*/Missing-v9__seed1.log")
    assert sys.executable in log.read_text() and "decoy" not in log.read_text()
    assert "    last line: no such environment: Missing-v9" in proc.stdout.split("summary:")[1]


def test_with_this_interpreter_changes_only_a_leading_python():
    assert (
        benchmark.with_this_interpreter("python cleanrl/ppo.py --seed 1") == f"{sys.executable} cleanrl/ppo.py --seed 1"
    )
    assert benchmark.with_this_interpreter("python3 -m x").startswith(sys.executable)
    for command in (
        "torchrun --nproc_per_node=2 cleanrl/ppo_atari_multigpu.py",
        "/opt/py/bin/python a.py",
        "pythonx a",
    ):
        assert benchmark.with_this_interpreter(command) == command


# A stand-in training script with what the runner relies on (cleanrl_utils/checkpoint/ does this for the real
# scripts): a run folder per run, a checkpoint whose header holds its flags, its iteration, whether it finished and
# the sha256 of the script, --checkpoint-every and --resume FOLDER.
STANDIN_TRAINING = """
import hashlib, json, os, sys, time
MAGIC = b"cleanrl checkpoint 2\\n"
def checkpoint_header(path):
    return json.loads(open(path, "rb").read()[len(MAGIC):].split(b"\\n")[0])
argv = sys.argv[1:]
def flag(name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default
env_id, seed, every = flag("--env-id"), flag("--seed"), int(flag("--checkpoint-every", 0))
folder = flag("--resume") or f"runs/{env_id}__train__{seed}__{time.time_ns()}"
os.makedirs(folder, exist_ok=True)
start = checkpoint_header(f"{folder}/checkpoint.pt")["iteration"] + 1 if flag("--resume") else 1
code = {"script_sha256": hashlib.sha256(open(__file__, "rb").read()).hexdigest()}
print("iterations", start, "to 4 in", folder)
for iteration in range(start, 5):
    if every and iteration % every == 0:
        kept = [a for i, a in enumerate(argv) if a != "--resume" and (i == 0 or argv[i - 1] != "--resume")]
        header = {"argv": kept, "iteration": iteration, "num_iterations": 4, "finished": iteration == 4, "code": code}
        open(f"{folder}/tmp", "wb").write(MAGIC + json.dumps(header).encode() + b"\\n")
        os.replace(f"{folder}/tmp", f"{folder}/checkpoint.pt")
    if env_id == "Killed-v0" and iteration == 2 and start == 1:
        os._exit(137)  # as if killed after its second checkpoint
"""


def write_header(folder, header):
    """A checkpoint file with only its header: what the runner reads."""
    (folder / "checkpoint.pt").write_bytes(CHECKPOINT_MAGIC + json.dumps(header).encode() + b"\n")


def test_running_a_benchmark_again_continues_the_unfinished_runs_and_leaves_the_finished(tmp_path):
    (tmp_path / "train.py").write_text(STANDIN_TRAINING)
    args = ["--env-ids", "Killed-v0", "Done-v0", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs"]
    args += ["--command", f"{shlex.quote(sys.executable)} train.py", "--checkpoint-every", "1"]
    first = benchmark_cli(*args, cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "summary: 1 of 2 runs succeeded, 1 failed\n  started: Killed-v0 seed 1, Done-v0 seed 1\n" in first.stdout
    second = benchmark_cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert (
        "ok (continued) Killed-v0 seed 1" in second.stdout and "left (finished before) Done-v0 seed 1" in second.stdout
    )
    assert "  continued from their checkpoints: Killed-v0 seed 1\n" in second.stdout
    assert "  left alone: they had finished before: Done-v0 seed 1" in second.stdout
    [killed] = (tmp_path / "runs").glob("Killed-v0__train__1__*")
    log = sorted((tmp_path / "logs").glob("*/Killed-v0__seed1.log"))[-1].read_text()
    assert f"--checkpoint-every 1 --resume {killed.relative_to(tmp_path)}" in log and "iterations 3 to 4" in log
    assert checkpoint_header(killed / "checkpoint.pt")["iteration"] == 4
    assert len(list((tmp_path / "runs").iterdir())) == 2, "a continued run keeps its folder"
    third = benchmark_cli(*args, cwd=tmp_path)
    assert "  left alone: they had finished before: Killed-v0 seed 1, Done-v0 seed 1" in third.stdout


def test_a_run_of_another_text_of_its_script_is_another_run(tmp_path):
    """A script fixed since a benchmark ran: its runs, finished or not, are run afresh in new folders (their old
    folders are left as they are), and the summary says why; the runs of the new text then count as the runs."""
    (tmp_path / "train.py").write_text(STANDIN_TRAINING)
    args = ["--env-ids", "Killed-v0", "Done-v0", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs"]
    args += ["--command", f"{shlex.quote(sys.executable)} train.py", "--checkpoint-every", "1"]
    benchmark_cli(*args, cwd=tmp_path)
    before = sorted((tmp_path / "runs").iterdir())
    (tmp_path / "train.py").write_text(STANDIN_TRAINING + "# a fix\n")
    second = benchmark_cli(*args, cwd=tmp_path)
    assert "ok (restarted: its script changed since its checkpoint) Done-v0 seed 1" in second.stdout
    assert (
        "  restarted afresh in new folders: their script changed since their checkpoints: Killed-v0 seed 1, "
        "Done-v0 seed 1\n" in second.stdout
    )
    after = sorted((tmp_path / "runs").iterdir())
    assert len(after) == 4 and set(before) < set(after), "new folders; the old ones stay"
    # the stand-in's Killed-v0 dies again in its new first attempt; the runs of the new text are the runs now
    third = benchmark_cli(*args, cwd=tmp_path)
    assert "  continued from their checkpoints: Killed-v0 seed 1\n" in third.stdout
    assert "  left alone: they had finished before: Done-v0 seed 1" in third.stdout


def test_another_command_is_another_run(tmp_path):
    folder = tmp_path / "runs" / "A-v0__ppo__1__100"
    folder.mkdir(parents=True)
    state = {"argv": ["--total-timesteps", "1000", "--env-id", "A-v0", "--seed", "1"], "iteration": 3}
    write_header(folder, {**state, "num_iterations": 9, "finished": False})
    run = benchmark.Run("A-v0", 1, "python cleanrl/ppo.py --total-timesteps 1000 --env-id A-v0 --seed 1")
    assert benchmark.attempt(run, tmp_path, 2) == (
        "continued",
        f"{run.command} --checkpoint-every 2 --resume {folder}",
    )
    other = benchmark.Run("A-v0", 1, "python cleanrl/ppo.py --total-timesteps 2000 --env-id A-v0 --seed 1")
    assert benchmark.attempt(other, tmp_path, 0) == ("started", other.command)
    named = benchmark.Run("A-v0", 1, f"{run.command} --exp-name mine")
    assert benchmark.earlier_attempt(named, tmp_path) == ("new", None), "another experiment name, another folder"
    # what the scripts' --resume lets a continued run change is the same run to the runner too
    logged = benchmark.Run("A-v0", 1, f"{run.command} --track --wandb-project-name=p --save-model --hf-entity me")
    assert benchmark.earlier_attempt(logged, tmp_path) == ("unfinished", folder)


def test_the_runner_and_the_scripts_agree_on_what_a_continued_run_may_change():
    """scripts.OPERATIONAL is what --resume accepts in a changed value (checkpoint/flags.py) and what the runner leaves
    out when it matches a command with an earlier attempt: every script has those fields, the switches as booleans."""
    for name in script_names():
        fields = {field.name: field.type for field in dataclasses.fields(load_script(name).Args)}
        for flag, switch in OPERATIONAL.items():
            assert flag in fields, f"{name}.py has no --{flag}"
            assert (fields[flag] in (bool, "bool")) == switch, f"{name}.py's --{flag}"


@pytest.mark.parametrize("form", ["--env-id A-v0 --seed 1", "--env-id=A-v0 --seed=1", "--env_id=B-v0 --env-id A-v0"])
def test_a_slurm_task_finds_its_run_whichever_way_its_flags_are_written(tmp_path, monkeypatch, form):
    """--run-one (what each Slurm array task runs) reads the environment and the seed from the command, in either
    form the scripts accept, to find the run's folder: a finished run is left alone, an unfinished one continued."""
    command = f"python cleanrl/ppo.py --total-timesteps 1000 {form}"
    if "--seed" not in form:
        command += " --seed 1"
    folder = tmp_path / "runs" / "A-v0__ppo__1__100"
    folder.mkdir(parents=True)
    state = {"argv": benchmark.flags_of(command)[1], "iteration": 9, "num_iterations": 9, "finished": True}
    write_header(folder, state)
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(os, "execvp", lambda program, words: started.append(words))
    held = []  # the stop signals the run would start with blocked; this process's own stay as they are
    monkeypatch.setattr(benchmark.signal, "pthread_sigmask", lambda how, signals: held.append((how, set(signals))))
    assert benchmark.run_one(command, None) == 0 and started == [], "the finished run is left alone"
    state.update(iteration=4, finished=False)
    write_header(folder, state)
    benchmark.run_one(command, None)
    [words] = started
    assert words[-2:] == ["--resume", "runs/A-v0__ppo__1__100"], "the unfinished run goes on in its folder"
    assert held == [(benchmark.signal.SIG_BLOCK, {benchmark.signal.SIGUSR1, benchmark.signal.SIGTERM})]


def test_long_runs_get_about_100_checkpoints_and_short_ones_none():
    assert benchmark.checkpoint_every_for(f"python {ROOT / 'cleanrl' / 'ppo.py'}", None) == 9  # 976 iterations
    assert benchmark.checkpoint_every_for(f"python {ROOT / 'cleanrl' / 'ppo.py'} --total-timesteps 5120", None) == 0
    assert benchmark.checkpoint_every_for("python elsewhere.py", None) == 0
    assert benchmark.checkpoint_every_for(f"python {ROOT / 'cleanrl' / 'ppo.py'}", 3) == 3


def test_a_missing_program_is_a_failed_run(tmp_path):
    run = benchmark.Run("A-v0", 1, "no-such-program-anywhere --env-id A-v0 --seed 1")
    outcome = benchmark.execute(run, tmp_path / "a.log", dict(os.environ))
    assert outcome.returncode == 127
    assert "cannot start the command" in (tmp_path / "a.log").read_text()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--env-ids"], "no environment: give at least one with --env-ids"),
        (["--env-ids", "A-v0", "A-v0"], "--env-ids names A-v0 more than once"),
        (["--num-seeds", "0"], "--num-seeds must be at least 1, got 0"),
        (["--workers", "-1"], "--workers must be 0 (print the commands) or more, got -1"),
        (["--command", "python 'unclosed"], "check its quotes"),
        (["--slurm-template-path", "missing.template"], "no Slurm template at missing.template"),
        (["--slurm-gpus-per-task", "1"], "--slurm-gpus-per-task applies to Slurm jobs only"),
        (["--slurm-template-path", str(TEMPLATE), "--slurm-ntasks", "0"], "--slurm-ntasks must be at least 1"),
        # several Slurm tasks per run only for one torchrun per node: anything else would be several copies
        (["--slurm-template-path", str(TEMPLATE), "--slurm-ntasks", "2"], "--slurm-ntasks 2 would run 2 copies"),
        (
            ["--command", "torchrun --standalone --nproc_per_node=2 cleanrl/ppo_atari_multigpu.py"]
            + ["--slurm-template-path", str(TEMPLATE), "--slurm-ntasks", "2"],
            "--slurm-ntasks 2 would run 2 copies of this command in each array task: leave it out",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    proc = benchmark_cli("--workers", "1", *args, cwd=tmp_path)  # would run at once if the arguments were accepted
    assert_user_error(proc, "benchmark: error:", fragment)
    assert list(tmp_path.iterdir()) == [], "nothing may run or be written"


SLURM_ARGS = ["--env-ids", "CartPole-v1", "dm_control/reacher-easy-v0", "--num-seeds", "3", "--workers", "2"]
SLURM_ARGS += ["--command", "python cleanrl/ppo.py --no-cuda", "--slurm-template-path", str(TEMPLATE)]


def fake_programs(folder, **programs):
    """Executable shell scripts standing in for Slurm's commands; returns a PATH that finds them (and only them)."""
    folder.mkdir()
    for name, body in programs.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_slurm_job_script_without_sbatch(tmp_path):
    env = script_env(PATH=fake_programs(tmp_path / "bin"))  # no sbatch on it
    args = [*SLURM_ARGS, "--slurm-gpus-per-task", "1", "--slurm-total-cpus", "8"]
    proc = benchmark_cli(*args, cwd=tmp_path, env=env)
    assert_user_error(proc, "benchmark: error: sbatch is not on PATH", "slurm/ppo_")
    [script] = (tmp_path / "slurm").glob("ppo_*.slurm")
    text = script.read_text()
    sbatch_lines = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert sbatch_lines == [
        "#SBATCH --job-name=ppo",
        "#SBATCH --array=0-5%2",
        "#SBATCH --ntasks=1",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --cpus-per-task=8",
        f"#SBATCH --chdir={tmp_path}",
        f"#SBATCH --output={tmp_path}/slurm/logs/%x_%A_%a.log",
        "#SBATCH --requeue",
        "#SBATCH --signal=USR1@120",
        "#SBATCH --open-mode=append",
    ]
    assert "{{" not in text and (tmp_path / "slurm" / "logs").is_dir()

    # each array task runs its own command: run the script with a stand-in srun that prints what it was given
    expected = benchmark.expand_runs("python cleanrl/ppo.py --no-cuda", SLURM_ARGS[1:3], 3, 1)
    path = fake_programs(tmp_path / "srun_bin", srun='printf "%s|" "$@"')
    for task, run in enumerate(expected):
        task_env = {**os.environ, "PATH": f"{path}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": str(task)}
        out = subprocess.run(["bash", str(script)], env=task_env, capture_output=True, text=True, check=True).stdout
        # the task's run goes through the runner, which continues it from its checkpoint if it has one
        assert out.splitlines()[-1] == f"{sys.executable}|-m|cleanrl_utils.benchmark|--run-one|{run.command}|"


def test_slurm_job_is_submitted_with_sbatch(tmp_path):
    record = tmp_path / "sbatch_args"
    path = fake_programs(tmp_path / "bin", sbatch=f'echo "$@" > {record}; echo "Submitted batch job 42"')
    env = script_env(PATH=f"{path}:{os.environ['PATH']}")
    proc = benchmark_cli(*SLURM_ARGS, "--slurm-nodes", "2", "--slurm-dir", "jobs", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Submitted batch job 42" in proc.stdout
    [script] = (tmp_path / "jobs").glob("*.slurm")
    assert record.read_text().split() == [str(script.relative_to(tmp_path))]
    text = script.read_text()
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks=1\n" in text
    assert "--gpus-per-task" not in text and "--cpus-per-task" not in text, "options not given are left out"


@pytest.mark.parametrize("nnodes", ["2", "1:2"])
def test_several_tasks_per_run_for_a_torchrun_per_node(tmp_path, nnodes):
    """--slurm-ntasks 2 with a torchrun command of --nnodes 2 (or up to 2): two tasks, one launcher on each node,
    sharing --slurm-total-cpus."""
    path = fake_programs(tmp_path / "bin", sbatch='echo "Submitted batch job 42"')
    env = script_env(PATH=f"{path}:{os.environ['PATH']}")
    command = f"torchrun --nnodes {nnodes} --nproc-per-node=1 --rdzv-endpoint=head:29400 cleanrl/ppo_atari_multigpu.py"
    args = ["--env-ids", "BreakoutNoFrameskip-v4", "--command", command, "--slurm-template-path", str(TEMPLATE)]
    proc = benchmark_cli(
        *args, "--slurm-ntasks", "2", "--slurm-nodes", "2", "--slurm-total-cpus", "8", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    [script] = (tmp_path / "slurm").glob("*.slurm")
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=4\n" in script.read_text()


def test_fill_template_leaves_out_lines_without_a_value():
    template = "#SBATCH --job-name={{name}}\n#SBATCH --gpus={{gpus}}\nrun {{name}}\n"
    assert benchmark.fill_template(template, {"name": "ppo", "gpus": None}) == "#SBATCH --job-name=ppo\nrun ppo\n"
    with pytest.raises(benchmark.UserError, match="unknown fields"):
        benchmark.fill_template("{{nope}}", {"name": "ppo"})


def test_child_environment_keeps_what_the_user_set():
    env = benchmark.child_environment({"OMP_NUM_THREADS": "5", "HOME": "/home/x"}, threads=1)
    assert env["OMP_NUM_THREADS"] == "5" and env["MKL_NUM_THREADS"] == "1" and env["HOME"] == "/home/x"


def test_child_environment_pins_xla_threads_too():
    env = benchmark.child_environment({}, threads=1)
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert "--xla_cpu_multi_thread_eigen=false" in env["XLA_FLAGS"]
    assert benchmark.child_environment({"XLA_FLAGS": "--mine"}, threads=1)["XLA_FLAGS"] == "--mine"


# ---- benchmark/speed.py and benchmark/vs_random.py, run as modules (python -m benchmark.speed) and as files -------
BENCHMARK_ENV = script_env(PYTHONPATH=str(ROOT))
SHORT_GAMES_ENV = script_env(PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'pettingzoo_short_games'}")
SPEED_TINY = ["--total-timesteps", "256", "--num-steps", "64"]


def test_speed_of_a_script_beside_its_raw_environment(tmp_path):
    args = ["ppo", "--env-id", "Acrobot-v1", *SPEED_TINY, "--repeats", "1", "--raw-steps", "64"]
    proc = run_python("-m", "benchmark.speed", *args, cwd=tmp_path, env=BENCHMARK_ENV, timeout=300)
    header, rule, row, runs = proc.stdout.splitlines()
    assert header.startswith("| script | env | num_envs | script SPS (median of 1) | raw env SPS |")
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[:3] == ["ppo.py", "Acrobot-v1", "4"], "the script's own number of environments"
    assert all(float(cell.replace(",", "").rstrip("%")) > 0 for cell in cells[3:])
    assert runs.startswith("script SPS runs: [")
    assert list(tmp_path.iterdir()) == [], "the runs train in a temporary folder"


def test_speed_compares_two_versions_in_turn(tmp_path):
    (tmp_path / "old.py").write_text((ROOT / "cleanrl" / "ppo.py").read_text())
    args = [ROOT / "benchmark" / "speed.py", "ppo", "--compare", tmp_path / "old.py", *SPEED_TINY, "--repeats", "2"]
    lines = run_python(*args, cwd=tmp_path, env=script_env(), timeout=300).stdout.splitlines()
    versions = [line.split(": ")[1].split(" SPS")[0] for line in lines if line.startswith("run ")]
    assert versions == [str(ROOT / "cleanrl" / "ppo.py"), str(tmp_path / "old.py")] * 2
    rounds = [float(line.split()[-1]) for line in lines if line.startswith("round ")]
    assert len(rounds) == 2 and all(ratio > 0 for ratio in rounds)
    assert lines[-2].startswith("median of the rounds' ratios: ")
    assert lines[-1].startswith("new / old: ") and "(ppo.py / old.py, medians of 2 runs each)" in lines[-1]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nope"], "no script"),
        (["ppo", "--compare", "missing.py"], "no script missing.py"),
        (["ppo", "--repeats", "0"], "--repeats must be positive"),
    ],
)
def test_speed_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    proc = run_python(ROOT / "benchmark" / "speed.py", *args, cwd=tmp_path, env=script_env(), check=False)
    assert_user_error(proc, "speed: error:", fragment)


@pytest.mark.parametrize("name", ["ppo_atari_envpool", "ppo_procgen", "ppo_pettingzoo_ma_atari", "ppo_atari_multigpu"])
def test_raw_rate_steps_the_scripts_own_environments(name):
    """The vector environment of a script, as speed.py steps it: its make_env's thunks, or the vector environment
    its make_env returns (EnvPool, Procgen, PettingZoo)."""
    module = speed.load_script(name)
    assert speed.raw_env_sps(module, module.Args.env_id, 2, 16) > 0


@pytest.fixture(scope="module")
def pong_model(tmp_path_factory):
    """The weights of a fresh agent of ppo_pettingzoo_ma_atari.py for pong_v3, as --save-model would save them."""
    module = speed.load_script("ppo_pettingzoo_ma_atari")
    envs = vector_env(module, "pong_v3", 2)
    path = tmp_path_factory.mktemp("pong") / "pong.cleanrl_model"
    torch.save(module.Agent(envs).state_dict(), path)
    envs.close()
    return path


def test_vs_random_plays_each_side_against_random_players(pong_model, tmp_path):
    """The trained and a fresh agent each play the given number of games (cut here after 50 agent steps), taking
    the sides in turn, and get a table row each."""
    proc = run_python("-m", "benchmark.vs_random", pong_model, "--games", "2", cwd=tmp_path, env=SHORT_GAMES_ENV)
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines()[2:]]
    assert [row[0].strip() for row in rows] == ["untrained", "trained"]
    assert all(row[1].strip() == "2" and row[3].strip() == "50" for row in rows)
    assert all(-21 <= float(row[2].split("±")[0]) <= 21 for row in rows)
    assert proc.stderr.count("agent as player 0") == 2 and proc.stderr.count("agent as player 1") == 2


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["missing.cleanrl_model"], "no saved model"),
        (["{pong_model}", "--games", "0"], "--games must be positive"),
        (["{pong_model}", "--env-id", "nope_v0"], "cannot make environment 'nope_v0'"),
        (["{empty}"], "cannot load"),  # an empty file is no model
        (["{pong_model}", "--env-id", "boxing_v2"], "cannot load"),  # Pong's 6 actions, Boxing's 18
    ],
)
def test_vs_random_bad_input_is_one_line_and_exit_2(pong_model, tmp_path, args, fragment):
    (tmp_path / "empty.cleanrl_model").write_bytes(b"")
    args = [a.format(empty=tmp_path / "empty.cleanrl_model", pong_model=pong_model) for a in args]
    proc = run_python(ROOT / "benchmark" / "vs_random.py", *args, cwd=tmp_path, env=script_env(), check=False)
    assert_user_error(proc, "vs_random: error:", fragment)
