"""--checkpoint-every and --resume where a run is more than one process and one vector environment (CONVENTIONS §7,
cleanrl_utils/checkpoint/): ppo_atari_multigpu.py under torchrun, killed with SIGKILL after its second complete
checkpoint and resumed, logs bitwise what the run that never stopped logs, and every process goes on bitwise from
its own part; ppo_pettingzoo_ma_atari.py, ppo_continuous_action_isaacgym.py (Cartpole on Newton) and the two Gym-μRTS
scripts resume the learner exactly and restart their environments, as tests/test_resume.py's learner-exact cases."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import test_resume
import torch
from helpers import MULTIGPU_RUN, ROOT, SCRIPTS, only_run_dir, read_scalars, run_script, script_env, torchrun_env
from test_resume import assert_same_run, env, tensors, tree

from cleanrl_utils import checkpoint


def equal(first, second):
    """Two saved states (nested dicts, lists, tuples, tensors, arrays, numbers) are equal, bit for bit."""
    first_tensors, second_tensors = tensors(first), tensors(second)
    assert first_tensors.keys() == second_tensors.keys()
    return all(torch.equal(first_tensors[name], second_tensors[name]) for name in first_tensors)


def same_random(first, second):
    """Two captures of the random generators (checkpoint.capture_random) are the same."""
    numpy_first, numpy_second = first["numpy"], second["numpy"]
    same_numpy = all(np.array_equal(a, b) for a, b in zip(numpy_first, numpy_second, strict=True))
    if first["cuda"] is None or second["cuda"] is None:  # None where CUDA was not used; else one state per device
        same_cuda = first["cuda"] is None and second["cuda"] is None
    else:
        same_cuda = all(torch.equal(a, b) for a, b in zip(first["cuda"], second["cuda"], strict=True))
    return (
        first["python"] == second["python"]
        and same_numpy
        and torch.equal(first["torch"], second["torch"])
        and same_cuda
    )


def launch(command, cwd, environment):
    """Starts `command` in its own process group (torchrun and its workers), its output discarded."""
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def children(pid):
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def kill_all(proc):
    """SIGKILL to `proc`'s process group and to those of its children: torchrun starts each worker in a session of
    its own, which a kill of torchrun's group would leave running (a cluster's kill takes them all)."""
    for child in children(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def killed_after_second_checkpoint(command, cwd, environment, timeout=300):
    """Runs `command` (with --checkpoint-every 1) and kills it and its workers with SIGKILL once its
    checkpoint.pt names iteration 2 or later; returns the run folder and that iteration."""
    proc = launch(command, cwd, environment)
    return test_resume.kill_after_second_checkpoint(proc, cwd, kill_all, command[1:3], timeout)


def run(command, cwd, environment, timeout=300):
    proc = subprocess.run(
        command, cwd=cwd, env=environment, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


# ---- ppo_atari_multigpu.py: two processes under torchrun, on the CPU with gloo ------------------------------------

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2")


@pytest.mark.multicore
def test_two_processes_resume_bitwise(uninterrupted_multigpu_run, tmp_path):
    """Each process's ALE games, frame stacks, lives, random generators, next_obs and next_done come back from its own
    part; the learner, the same in every process, from checkpoint.pt. A kill of the whole torchrun group leaves
    checkpoint.pt naming an iteration whose parts are all on disk; the resumed run's scalars, its learner and rank 1's
    state at the end are the uninterrupted run's, bit for bit."""
    (tmp_path / "tmp").mkdir()
    environment = torchrun_env(env(), tmp_path / "tmp")
    command = [sys.executable, *TORCHRUN, str(SCRIPTS / "ppo_atari_multigpu.py"), *MULTIGPU_RUN]
    (tmp_path / "stopped").mkdir()
    run_dir, iteration = killed_after_second_checkpoint(
        [*command, "--checkpoint-every", "1"], tmp_path / "stopped", environment
    )
    # rank 1's part missing: rank 0 says so in one line, and nothing is written
    part = run_dir / f"checkpoint-rank1-iteration{iteration}.pt"
    part.rename(tmp_path / part.name)
    before = tree(tmp_path / "stopped")
    resume = [*command, "--checkpoint-every", "1", "--resume", str(run_dir)]
    proc = subprocess.run(
        resume, cwd=tmp_path / "stopped", env=environment, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode != 0
    assert (
        proc.stderr.count(
            f"ppo_atari_multigpu.py: error: --resume: cannot read {part.relative_to(tmp_path / 'stopped')}"
        )
        == 1
    )
    assert tree(tmp_path / "stopped") == before
    (tmp_path / part.name).rename(part)
    proc = run(resume, tmp_path / "stopped", environment)
    assert proc.stdout.count(f"resumed runs/{run_dir.name} at iteration {iteration},") == 1  # rank 0 alone says it
    assert only_run_dir(tmp_path / "stopped") == run_dir
    uninterrupted = uninterrupted_multigpu_run
    assert_same_run(uninterrupted, run_dir)
    first, second = (checkpoint.read(folder / checkpoint.FILE) for folder in (uninterrupted, run_dir))
    assert first["iteration"] == second["iteration"] == 4
    for part in ("agent", "optimizer", "next_obs", "next_done"):
        assert equal(first[part], second[part]), part
    assert same_random(first["random"], second["random"])
    first, second = (checkpoint.read(folder / "checkpoint-rank1-iteration4.pt") for folder in (uninterrupted, run_dir))
    for part in ("next_obs", "next_done"):
        assert torch.equal(first[part], second[part]), part
    assert same_random(first["random"], second["random"])
    assert second["envs"]["base"]["envs"][0]["base"]["engine"] == "ale"
    # only the parts of the iteration checkpoint.pt names are kept
    names = {p.name for p in run_dir.glob("checkpoint*")}
    assert names == {checkpoint.STATE_FILE, checkpoint.FILE, "checkpoint-rank1-iteration4.pt"}


def assert_learner_exact(script, run_dir, proc, how, iterations, batch, updates):
    """The resumed run said in one line that the environments restart (`how`); it logged every step once
    and in order, each iteration's losses and learning rate once, annealed on from the checkpoint; its optimizer went
    on from the saved one (`updates` Adam steps an iteration, counted over the whole run)."""
    state = checkpoint.read(run_dir / checkpoint.FILE)
    notice = [line for line in proc.stdout.splitlines() if "the environments restart" in line]
    assert notice == [f"{script}: {state['envs_lost']}: the environments restart ({how}); the learner goes on exactly"]
    scalars = read_scalars(run_dir)
    for tag, points in scalars.items():
        assert [step for step, _ in points] == sorted(step for step, _ in points), tag
    for tag in ("charts/learning_rate", "losses/value_loss", "charts/SPS"):  # once per iteration
        assert [step for step, _ in scalars[tag]] == [batch * (i + 1) for i in range(iterations)], tag
    rates = [rate for _, rate in scalars["charts/learning_rate"]]
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == iterations
    assert state["iteration"] == iterations and state["envs"] is None
    assert all(int(s["step"]) == iterations * updates for s in state["optimizer"]["state"].values())


# ---- ppo_pettingzoo_ma_atari.py: SuperSuit's wrappers over PettingZoo's multi-agent ALE ----------------------------

# One game of Pong, two players; every game ends after 50 agent steps (tests/pettingzoo_short_games), 6 iterations.
PONG = ("--env-id", "pong_v3", "--num-envs", "2", "--num-steps", "32", "--total-timesteps", str(2 * 32 * 6))


def test_pettingzoo_resumes_the_learner_and_restarts_the_games(tmp_path):
    """SuperSuit keeps its state (frame stacks, max-pooled frames, the AEC/parallel conversions' buffers) in objects
    of classes local to its wrapper functions, down a chain of some 15 conversions per game, beyond the wrappers'
    capture: the learner goes on exactly and the games restart."""
    short_games = script_env(PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'pettingzoo_short_games'}")
    script = "ppo_pettingzoo_ma_atari.py"
    run_dir, iteration = test_resume.killed_after_second_checkpoint(script, PONG, tmp_path, short_games)
    proc = run_script(script, *PONG, "--resume", run_dir, cwd=tmp_path, env=short_games)
    assert (
        checkpoint.read(run_dir / checkpoint.FILE)["envs_lost"]
        == "pong_v3's state cannot be saved (ConcatVecEnv.vec_envs)"
    )
    how = f"seeded with --seed and the iteration, {1 + 2 * iteration}"
    assert_learner_exact(script, run_dir, proc, how, 6, 64, 4 * 4)
    episodes = read_scalars(run_dir)["charts/episodic_length-player0"]
    assert episodes and all(length == 50 for _, length in episodes)


# ---- ppo_continuous_action_isaacgym.py: IsaacGymEnvs' Cartpole on Newton -----------------------------------------

# 4 iterations of 64 copies x 16 steps
ISAACGYM = ("--env-id", "Cartpole", "--num-envs", "64", "--num-steps", "16", "--total-timesteps", str(64 * 16 * 4))


def test_isaacgym_resumes_the_learner_and_restarts_the_simulation(tmp_path):
    """Newton keeps the simulation in Warp's arrays (on a GPU, in its memory), beyond the wrappers' capture: stopped
    by SIGUSR1 after an iteration's checkpoint, the run goes on with the learner as it was and a simulation made
    anew, which it says in one line."""
    script = "ppo_continuous_action_isaacgym.py"
    newton = script_env(PYTHONPATH=str(ROOT))
    args = (*ISAACGYM, "--no-cuda", "--anneal-lr", "--checkpoint-every", "1000")  # annealed: it shows the iteration
    command = [sys.executable, SCRIPTS / script, *args]
    proc = subprocess.Popen(command, cwd=tmp_path, env=newton, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the first progress line: the loop has started
        if line.startswith("["):
            break
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == checkpoint.STOPPED, out
    run_dir = only_run_dir(tmp_path)
    saved = checkpoint.read(run_dir / checkpoint.FILE)
    iteration = saved["iteration"]
    assert 1 <= iteration < 4 and saved["envs"] is None
    assert saved["envs_lost"] == "Cartpole's state cannot be saved (RecordEpisodeStatisticsTorch's environments)"
    resumed = run_script(script, *args, "--resume", run_dir, cwd=tmp_path, env=newton)
    assert f"resumed runs/{run_dir.name} at iteration {iteration}," in resumed.stdout
    assert_learner_exact(script, run_dir, resumed, "as made, with --seed", 4, 64 * 16, 2 * 4)


# ---- ppo_multidiscrete.py and ppo_multidiscrete_mask.py: microRTS's games run in Java --------------------------------

# Two games of MicrortsMining-v1, 64 steps an iteration, 6 iterations
MICRORTS = ("--env-id", "MicrortsMining-v1", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "768")


@pytest.mark.parametrize("script", ["ppo_multidiscrete.py", "ppo_multidiscrete_mask.py"])
def test_microrts_resumes_the_learner_and_restarts_the_games(tmp_path, script):
    """microRTS keeps its games in its Java engine, beyond the wrappers' capture: the learner goes on exactly and the
    games restart (the masked script reads its masks from the restarted games)."""
    run_dir, iteration = test_resume.killed_after_second_checkpoint(script, MICRORTS, tmp_path)
    proc = run_script(script, *MICRORTS, "--resume", run_dir, cwd=tmp_path, env=env())
    assert (
        checkpoint.read(run_dir / checkpoint.FILE)["envs_lost"]
        == "MicrortsMining-v1's state cannot be saved (MicrortsEnv.client)"
    )
    how = f"seeded with --seed and the iteration, {1 + 2 * iteration}"
    assert_learner_exact(script, run_dir, proc, how, 6, 128, 4 * 4)
