"""The Slurm template on a real one-node Slurm cluster on this machine, a private one that scripts/slurm-local.sh starts
in a folder of the test's own (as root; `bash scripts/slurm-local.sh install` installs the packages, scripts/test.sh
runs it): the benchmark's array job runs and writes its runs, the --slurm-* flags reach the job's tasks, a requeued
task continues its run (a torchrun task stopped by a signal too), and nothing of the machine outside that folder
changes: /etc/slurm and /etc/munge, and the Slurm daemons that ran before (a stand-in named slurmctld among them).
tests/test_benchmark.py checks the job script itself with stand-ins for sbatch, including what one node cannot show
(several nodes, GPUs)."""

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from helpers import (
    MULTIGPU_RUN,
    ROOT,
    assert_same_scalars,
    read_scalars,
    run_dirs,
    script_env,
    torchrun_env,
)

TEMPLATE = ROOT / "benchmark" / "ppo.slurm_template"
SLURM_LOCAL = ROOT / "scripts" / "slurm-local.sh"
# Slurm runs the array tasks of a job at the same time, on every core of this machine
pytestmark = pytest.mark.multicore

# What a Slurm of the machine's own has: the tests must leave all of it as it was.
MACHINE_FOLDERS = (Path("/etc/slurm"), Path("/etc/munge"))
DAEMONS = ("slurmctld", "slurmd", "munged")


def digest_of(folder):
    """One digest of every file's path, mode and bytes under `folder` ("absent" where it does not exist)."""
    if not folder.exists():
        return "absent"
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(f"{path}:{path.lstat().st_mode}:".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def daemons_running():
    """{(pid, start time)} of the live processes named like a Slurm or munge daemon now."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if name in DAEMONS and rest[0] != "Z":  # a zombie has ended already
            found.add((int(stat.parent.name), int(rest[19])))
    return found


def start_cluster(folder):
    proc = subprocess.run(["bash", SLURM_LOCAL, "start", folder], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return folder / "slurm.conf"


def stop_cluster(folder):
    proc = subprocess.run(["bash", SLURM_LOCAL, "stop", folder], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def skip_without_slurm():
    """Skips the test, saying why, where a private cluster cannot run here: not root, or Slurm's packages missing."""
    if os.geteuid() != 0:
        pytest.skip("a real Slurm cluster needs root here (slurmd starts each job as its user)")
    missing = [name for name in ("slurmctld", "slurmd", "munged", "sbatch") if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"Slurm's packages are not installed ({', '.join(missing)} missing): run "
            "'bash scripts/slurm-local.sh install' as root (scripts/test.sh does)"
        )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["restart"], "unknown command 'restart': use install, start or stop"),
        (["start", "/tmp/" + "x" * 64], "the folder's path is longer than 64 characters"),
        (["stop", "/tmp/no-such-cluster-folder"], "no cluster in /tmp/no-such-cluster-folder (no such folder)"),
        (["stop", "/"], "no cluster in / (no slurm.conf there)"),
    ],
)
def test_slurm_local_refuses_in_one_line(args, fragment):
    skip_without_slurm()
    proc = subprocess.run(["bash", SLURM_LOCAL, *args], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(f"slurm-local: {fragment}") and proc.stderr.count("\n") == 1, proc.stderr
    assert not Path("/tmp/" + "x" * 64).exists()


@pytest.fixture(scope="module")
def bystander(tmp_path_factory):
    """A process named slurmctld, as a Slurm of the machine's own would be, running before the cluster starts."""
    folder = tmp_path_factory.mktemp("bystander")
    (folder / "slurmctld").symlink_to(shutil.which("sleep"))
    proc = subprocess.Popen([folder / "slurmctld", "3600"])
    wait_until(lambda: Path(f"/proc/{proc.pid}/comm").read_text().strip() == "slurmctld", what="the stand-in")
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory, bystander):
    """A running private one-node cluster, SLURM_CONF naming it; skipped (with the reason) only where it cannot run:
    not root, or Slurm's packages missing. After the module, it is stopped, and the test fails where anything of the
    machine's own changed."""
    skip_without_slurm()
    before = {folder: digest_of(folder) for folder in MACHINE_FOLDERS}
    running = daemons_running()
    assert bystander.pid in {pid for pid, _ in running}
    folder = tmp_path_factory.mktemp("slurm")
    conf = start_cluster(folder)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(conf))
            yield folder
    finally:
        stop_cluster(folder)
    assert {folder: digest_of(folder) for folder in MACHINE_FOLDERS} == before
    assert running <= daemons_running(), "a daemon that ran before the tests was ended"
    assert bystander.poll() is None


def sbatch_sleeper(folder, env=None):
    """Submits a one-CPU job that writes its shell's pid into folder/pid and sleeps; returns its id and that pid."""
    command = ["sbatch", "--parsable", "--output", "/dev/null", "--wrap", f"echo $$ > {folder}/pid; exec sleep 300"]
    proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=30, check=True)
    pid = wait_until(lambda: (folder / "pid").is_file() and (folder / "pid").read_text().strip(), what="the job")
    return proc.stdout.strip().split(";")[0], int(pid)


def test_a_second_cluster_starts_and_stops_alone(slurm, tmp_path, tmp_path_factory):
    """Two private clusters at once, each in its folder with ports of its own: stopping the second one cancels its
    job and ends its daemons, and only those; the first one's job and daemons, and the stand-in slurmctld, go on."""
    first_job, first_pid = sbatch_sleeper(tmp_path)
    try:
        second = tmp_path_factory.mktemp("second")
        env = {**os.environ, "SLURM_CONF": str(start_cluster(second))}
        (second / "job").mkdir()
        _, second_pid = sbatch_sleeper(second / "job", env)
        running = daemons_running()
        theirs = {int((second / "run" / f"{daemon}.pid").read_text()) for daemon in DAEMONS}
        stop_cluster(second)
        assert not Path(f"/proc/{second_pid}").exists(), "the second cluster's job still runs"
        assert {pid for pid, _ in running - daemons_running()} == theirs
        assert Path(f"/proc/{first_pid}").exists() and state_of(first_job) == "RUNNING"
    finally:
        subprocess.run(["scancel", first_job], check=True)


def submit(*args, cwd):
    """Runs the benchmark with the template; returns the array job's id."""
    command = [sys.executable, "-m", "cleanrl_utils.benchmark", "--slurm-template-path", str(TEMPLATE), *args]
    temporary = Path(tempfile.mkdtemp(prefix="tmp-", dir=cwd.parent))  # pytest's, as are the test's folders
    env = torchrun_env(script_env(PYTHONPATH=str(ROOT)), temporary)
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return re.search(r"Submitted batch job (\d+)", proc.stdout).group(1)


def tasks(job_id):
    """{array task index: (state, exit code)} of every task of an array job, from scontrol."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if "ArrayTaskId" in fields and fields["ArrayTaskId"].isdigit():
            found[int(fields["ArrayTaskId"])] = (fields["JobState"], fields["ExitCode"])
    return found


def wait_for(job_id, count, timeout=300):
    """Waits until all `count` tasks of the array job have ended; returns tasks(job_id)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = tasks(job_id)
        ended = [state for state, _ in found.values() if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")]
        if len(found) == count and len(ended) == count:
            return found
        time.sleep(1)
    raise AssertionError(f"job {job_id} did not end in {timeout} s: {tasks(job_id)}")


def test_the_benchmarks_array_job_runs_every_run(slurm, tmp_path):
    command = f"python {ROOT / 'cleanrl' / 'ppo.py'} --no-cuda --total-timesteps 512 --num-envs 2 --num-steps 64"
    args = ["--env-ids", "CartPole-v1", "Acrobot-v1", "--num-seeds", "2", "--workers", "2", "--command", command]
    job_id = submit(*args, cwd=tmp_path)
    assert wait_for(job_id, 4) == {i: ("COMPLETED", "0:0") for i in range(4)}
    names = sorted(d.name.rsplit("__", 1)[0] for d in run_dirs(tmp_path))
    assert names == sorted(f"{env}__ppo__{seed}" for env in ("CartPole-v1", "Acrobot-v1") for seed in (1, 2))
    for run_dir in run_dirs(tmp_path):
        assert [step for step, _ in read_scalars(run_dir)["charts/SPS"]] == [128, 256, 384, 512]
    logs = sorted((tmp_path / "slurm" / "logs").glob("ppo_*.log"))
    assert len(logs) == 4 and all("[100%] step 512/512" in log.read_text() for log in logs)


# A training script's stand-in that prints what its process was given; importing it (the runner reads a script's
# Args) prints nothing.
SHOW_ENVIRONMENT = """import os
if __name__ == "__main__":
    names = "SLURM_NTASKS SLURM_CPUS_PER_TASK SLURM_JOB_NUM_NODES OMP_NUM_THREADS SLURM_PROCID WORLD_SIZE".split()
    print("seen", *(os.environ.get(name) for name in names))
"""


def free_port():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        return held.getsockname()[1]


def test_slurm_flags_reach_the_tasks(slurm, tmp_path):
    """Several tasks per run are for a torchrun per node (--nnodes 2): here both tasks' torchruns, on the one node,
    meet at one rendezvous and start one process each, a world of two."""
    (tmp_path / "show.py").write_text(SHOW_ENVIRONMENT)
    rendezvous = f"--rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:{free_port()} --rdzv-id=flags"
    command = f"torchrun --nnodes=2 --nproc-per-node=1 {rendezvous} {tmp_path / 'show.py'}"
    args = ["--env-ids", "A-v0", "--num-seeds", "2", "--workers", "1", "--command", command]
    job_id = submit(*args, "--slurm-ntasks", "2", "--slurm-total-cpus", "2", "--slurm-nodes", "1", cwd=tmp_path)
    assert wait_for(job_id, 2) == {0: ("COMPLETED", "0:0"), 1: ("COMPLETED", "0:0")}
    # --workers 1: one array task at a time
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    assert "ArrayTaskThrottle=1" in out
    for log in sorted((tmp_path / "slurm" / "logs").glob("*.log")):
        seen = sorted(line for line in log.read_text().splitlines() if line.startswith("seen"))
        # --slurm-ntasks 2: two launchers; --slurm-total-cpus 2 shared by them: one CPU and one thread each
        assert seen == ["seen 2 1 1 1 0 2", "seen 2 1 1 1 1 2"], log.read_text()


# 80 iterations of ppo.py, about half a minute here: long enough to be stopped twice in the middle.
PPO_RUN = ["--no-cuda", "--total-timesteps", "40960", "--num-envs", "4", "--num-steps", "128"]


def checkpointed_iteration(cwd):
    """The iteration of the newest checkpoint of the one run under cwd/runs (0 before its first)."""
    states = list((cwd / "runs").glob("*/checkpoint.json"))
    return json.loads(states[0].read_text())["iteration"] if states else 0


def wait_until(condition, timeout=240, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def state_of(task):
    out = subprocess.run(["scontrol", "-o", "show", "job", task], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S+)", out)).get("JobState")


def release(task):
    """A requeued task waits for a begin time Slurm sets a little ahead; start it soon after it is queued again (not
    within the second its previous start's credential was revoked in, which slurmd would refuse)."""
    wait_until(lambda: state_of(task) == "PENDING", what=f"{task} to be queued again")
    time.sleep(2)
    subprocess.run(["scontrol", "update", f"jobid={task}", "starttime=now"], check=True, capture_output=True)


def test_a_requeued_task_continues_its_run_bitwise(slurm, tmp_path):
    """A task requeued outright (scontrol requeue, as a preemption does), then one stopped by the signal the template
    asks for before the time limit (SIGUSR1), each continue the run from its checkpoint; the run logs what the run
    that never stopped logs, bitwise, and its saved model holds the same tensors."""
    plain, queued = tmp_path / "plain", tmp_path / "queued"
    plain.mkdir()
    queued.mkdir()
    flags = [*PPO_RUN, "--save-model", "--env-id", "CartPole-v1", "--seed", "1"]
    subprocess.run([sys.executable, ROOT / "cleanrl" / "ppo.py", *flags], cwd=plain, env=script_env(), check=True)
    command = f"python {ROOT / 'cleanrl' / 'ppo.py'} {' '.join(PPO_RUN)} --save-model"
    args = ["--env-ids", "CartPole-v1", "--num-seeds", "1", "--workers", "1", "--checkpoint-every", "1"]
    job_id = submit(*args, "--command", command, cwd=queued)
    task = f"{job_id}_0"

    first = wait_until(lambda: checkpointed_iteration(queued) >= 5, what="the 5th checkpoint")
    subprocess.run(["scontrol", "requeue", task], check=True)
    release(task)
    wait_until(lambda: checkpointed_iteration(queued) >= first + 10, what="10 more checkpoints after the requeue")
    subprocess.run(["scancel", "--signal=USR1", task], check=True)
    release(task)
    assert wait_for(job_id, 1) == {0: ("COMPLETED", "0:0")}

    [log] = (queued / "slurm" / "logs").glob("*.log")
    text = log.read_text()
    assert text.count("benchmark: continued") == 2, text
    assert "stopped by a signal after its checkpoint: queued again" in text
    [plain_run] = run_dirs(plain)
    [queued_run] = run_dirs(queued)
    assert_same_scalars(plain_run, queued_run)
    saved = [torch.load(run / "ppo.cleanrl_model") for run in (plain_run, queued_run)]
    assert saved[0].keys() == saved[1].keys()
    assert all(torch.equal(saved[0][name], saved[1][name]) for name in saved[0])


def test_a_torchrun_task_stopped_by_a_signal_is_requeued_and_continues_bitwise(
    slurm, uninterrupted_multigpu_run, tmp_path
):
    """ppo_atari_multigpu.py in two processes under torchrun, stopped by SIGUSR1 after its first checkpoint: both
    processes stop with 75, the runner (which runs torchrun and reads their statuses) exits with 75 where torchrun
    would exit with 1, the task is queued again and continues the run, which logs bitwise what the run that never
    stopped logs."""
    queued = tmp_path / "queued"
    queued.mkdir()
    script = ROOT / "cleanrl" / "ppo_atari_multigpu.py"
    command = f"torchrun --standalone --nnodes=1 --nproc_per_node=2 {script} {' '.join(MULTIGPU_RUN)}"
    args = ["--env-ids", "BreakoutNoFrameskip-v4", "--num-seeds", "1", "--workers", "1", "--checkpoint-every", "1"]
    job_id = submit(*args, "--command", command, cwd=queued)
    task = f"{job_id}_0"

    wait_until(lambda: checkpointed_iteration(queued) >= 1, what="the first checkpoint")
    subprocess.run(["scancel", "--signal=USR1", task], check=True)
    release(task)
    assert wait_for(job_id, 1) == {0: ("COMPLETED", "0:0")}

    [log] = (queued / "slurm" / "logs").glob("*.log")
    text = log.read_text()
    assert text.count("ppo_atari_multigpu.py: stopped by SIGUSR1 after the checkpoint of iteration") == 1, text
    assert "benchmark: torchrun's processes stopped after their checkpoint (exit status 75)" in text
    assert "stopped by a signal after its checkpoint: queued again" in text
    assert text.count("benchmark: continued") == 1
    [queued_run] = run_dirs(queued)
    assert_same_scalars(uninterrupted_multigpu_run, queued_run)
