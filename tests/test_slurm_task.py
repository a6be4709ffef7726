"""What the benchmark runner does as a Slurm array task (`--run-one`), shown without Slurm: a stop signal that comes
while the script still imports and sets up waits for the script's checkpoint machinery, and a torchrun command's
processes that stop after their checkpoint make the task exit with 75, which the template requeues.
tests/test_slurm.py shows both on a real cluster."""

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import ROOT, SCRIPTS, script_env, torchrun_env

# 4 iterations of 512 steps
PPO_RUN = "--no-cuda --total-timesteps 2048 --num-envs 4 --num-steps 128 --env-id CartPole-v1 --seed 1"


def run_one(command, cwd, *runner_flags):
    """Starts the runner as a Slurm task does; returns the process, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "cleanrl_utils.benchmark", *runner_flags, "--run-one", command],
        cwd=cwd,
        env=torchrun_env(script_env(PYTHONPATH=str(ROOT)), tempfile.mkdtemp(prefix="tmp-", dir=Path(cwd).parent)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def signal_set(pid, field):
    """The set of signals in field `field` of /proc/PID/status (SigBlk: blocked, ShdPnd: pending for the process)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            mask = int(line.split()[1], 16)
            return {signum for signum in signal.Signals if mask & (1 << (signum - 1))}
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def wait_until(condition, timeout=60, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_a_stop_asked_while_the_script_starts_waits_and_stops_it_after_its_first_iteration(tmp_path, signum):
    """The runner holds SIGUSR1 and SIGTERM (blocks them) before it becomes the script; the signal, sent while the
    script still imports torch, waits (pending), and reaches the script's handler once checkpoint.begin installs
    it: the run stops after the checkpoint of its first iteration, with status 75. Without the hold, the signal
    ended the process at once, with no checkpoint and no requeue."""
    proc = run_one(f"python {SCRIPTS / 'ppo.py'} {PPO_RUN}", tmp_path, "--checkpoint-every", "1000")
    wait_until(lambda: signum in signal_set(proc.pid, "SigBlk"), what="the runner to hold the stop signals")
    proc.send_signal(signum)
    assert signum in signal_set(proc.pid, "ShdPnd"), "the signal waits while the script starts"
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err
    assert f"ppo.py: stopped by {signum.name} after the checkpoint of iteration 1;" in out
    assert "[ 25%] step 512/2048" in out and "[ 50%]" not in out


def test_a_run_without_checkpoints_is_not_held(tmp_path):
    """A command that keeps no checkpoints has no handler to take a held signal: it starts with the signals as they
    were, and SIGTERM ends it at once."""
    proc = run_one("python -c 'import time; time.sleep(60)' --env-id A-v0 --seed 1", tmp_path)
    started = lambda: "cleanrl_utils.benchmark" not in Path(f"/proc/{proc.pid}/cmdline").read_text()  # noqa: E731
    wait_until(started, what="the command to replace the runner")
    assert not {signal.SIGUSR1, signal.SIGTERM} & signal_set(proc.pid, "SigBlk")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM


@pytest.mark.multicore
@pytest.mark.parametrize(
    ("statuses", "returncode", "said"),
    [
        ((75, 75), 75, "benchmark: torchrun's processes stopped after their checkpoint (exit status 75)\n"),
        ((0, 0), 0, ""),
        ((3, 3), 1, "benchmark: torchrun's processes failed (exit status 3)\n"),
        # rank 1 is still running when rank 0 stops: torchrun ends it with SIGTERM (seen in a real-Slurm test)
        ((75, None), 75, "benchmark: torchrun's processes stopped after their checkpoint (exit status 75)\n"),
        ((3, None), 1, "benchmark: torchrun's processes failed (exit status -15, 3)\n"),
    ],
    ids=["stopped", "finished", "failed", "stopped-and-ended-by-torchrun", "failed-and-ended-by-torchrun"],
)
def test_a_torchrun_command_exits_with_what_its_processes_mean(tmp_path, statuses, returncode, said):
    """torchrun exits with 1 whatever status its processes failed with; the runner runs torchrun itself and reads
    their statuses: 75 where those that ended stopped after their checkpoint (the template requeues the task then),
    1 where any failed otherwise. Here each process exits with the status of its rank at once."""
    ends = f"import os, sys, time\nstatus = {list(statuses)}[int(os.environ['RANK'])]\n"
    (tmp_path / "ends.py").write_text(ends + "if status is None:\n    time.sleep(120)\nsys.exit(status)\n")
    command = f"torchrun --standalone --nnodes=1 --nproc_per_node=2 {tmp_path / 'ends.py'} --env-id A-v0 --seed 1"
    proc = run_one(command, tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == returncode, out + err
    assert said in (out if returncode == 75 else err)
