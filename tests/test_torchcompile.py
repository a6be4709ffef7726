"""The compiled siblings: ppo_torchcompile.py, ppo_continuous_action_torchcompile.py and
ppo_atari_envpool_torchcompile.py. Compiled kernels round otherwise than the eager ones, so a sibling cannot log its
parent's numbers bit for bit; what it promises, and what is tested here:
- on the first iteration (the parent's initial weights, the parent's rollout) every figure the update logs is the
  parent's within a relative 1e-3 (plus 1e-6): the same losses, computed by other kernels;
- the same seed on the same machine logs the same numbers (tests/test_scripts.py, which also runs each sibling's
  smoke run, copy alone, bad input and replay as for every script);
- a run killed and resumed logs bitwise what the run that never stopped logs, as its parent's does;
- --no-compile runs the same program eagerly; --cudagraphs and a missing C++ compiler are one line and exit 2 here.
How they learn over many seeds is a benchmark's question, not a test's (docs/ppo.md)."""

import ast
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import (
    ROOT,
    SCRIPTS,
    assert_user_error,
    only_run_dir,
    plain_run,
    read_scalars,
    run_as_main,
    run_script,
    script_env,
)
from test_resume import env, resume_bitwise
from test_scripts import TABLE

# the siblings' tiny runs of tests/test_scripts.py, so that the compiled kernels come from the compile cache they filled
SIBLINGS = {script.name.removesuffix("_torchcompile"): script.args for script in TABLE if "torchcompile" in script.name}
RELATIVE = 1e-3
ABSOLUTE = 1e-6


def first_iteration(run_dir):
    """{tag: value} at the first iteration's step, for every tag the iteration logs once (not the episodes)."""
    scalars = read_scalars(run_dir)
    first_step = min(step for step, _ in scalars["losses/value_loss"])
    return {tag: dict(points)[first_step] for tag, points in scalars.items() if tag.startswith(("losses/", "charts/l"))}


@pytest.mark.parametrize("parent", SIBLINGS)
def test_the_first_iteration_logs_the_parents_figures(parent):
    args = SIBLINGS[parent]
    # the sibling's run is its same-seed repeat in test_scripts.py, made once for both (helpers.plain_run)
    runs = {name: plain_run(f"{name}.py", *args) for name in (parent, f"{parent}_torchcompile")}
    theirs = first_iteration(runs[parent])
    ours = first_iteration(runs[f"{parent}_torchcompile"])
    assert ours.keys() == theirs.keys()
    assert {"losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl"} <= ours.keys()
    for tag, value in theirs.items():
        assert abs(ours[tag] - value) <= RELATIVE * abs(value) + ABSOLUTE, (tag, ours[tag], value)
    # the same rollout: the episodes that ended in the first iteration, with the same returns, so the compiled acting
    # step drew the parent's actions (EnvPool's games outlast that iteration: there the figures above show it alone)
    first_step = min(step for step, _ in read_scalars(runs[parent])["losses/value_loss"])
    parent_episodes = [p for p in read_scalars(runs[parent]).get("charts/episodic_return", []) if p[0] <= first_step]
    assert parent_episodes or parent == "ppo_atari_envpool", "no episode ended in the first iteration: nothing compared"
    sibling_scalars = read_scalars(runs[f"{parent}_torchcompile"])
    assert parent_episodes == [p for p in sibling_scalars.get("charts/episodic_return", []) if p[0] <= first_step]


# the tiny runs' shapes, over more iterations (the EnvPool sibling resumes learner-exact, as its parent: test_resume.py)
RESUMED = {
    "ppo": (*SIBLINGS["ppo"], "--total-timesteps", "1024"),
    "ppo_continuous_action": (*SIBLINGS["ppo_continuous_action"], "--total-timesteps", "1024"),
}


@pytest.mark.parametrize("parent", RESUMED)
def test_a_compiled_run_resumes_bitwise(parent, tmp_path):
    script = f"{parent}_torchcompile"
    run_dir = resume_bitwise(f"{script}.py", RESUMED[parent], tmp_path, model_file=f"{script}.cleanrl_model")
    assert read_scalars(run_dir)["charts/compile_seconds"][-1][1] > 0, "the resumed run compiled again"


def test_no_compile_runs_eagerly(tmp_path):
    proc = run_script("ppo_torchcompile.py", *SIBLINGS["ppo"], "--no-compile", cwd=tmp_path, env=env())
    assert "compiled in 0s" in proc.stdout
    assert {value for _, value in read_scalars(only_run_dir(tmp_path))["charts/compile_seconds"]} == {0.0}


@pytest.mark.parametrize("parent", SIBLINGS)
@pytest.mark.parametrize(
    ("args", "variables", "fragments"),
    [
        (["--cudagraphs", "--no-compile"], {}, ["--cudagraphs replays what torch.compile compiled"]),
        (["--cudagraphs"], {}, ["--cudagraphs needs a CUDA GPU"]),
        ([], {"CXX": "no-such-compiler"}, ["no-such-compiler is not found", "--no-compile"]),
    ],
    ids=["cudagraphs-without-compile", "cudagraphs-without-cuda", "no-compiler"],
)
def test_what_compiling_needs_is_one_line_and_exit_2(parent, args, variables, fragments, tmp_path, capfd, monkeypatch):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    script = f"{parent}_torchcompile.py"
    proc = run_as_main(script, *SIBLINGS[parent], *args, "--no-cuda", cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, f"{script}: error:", *fragments)
    assert list(tmp_path.iterdir()) == [], "no work may start before the arguments are checked"


# A program that compiles, in the shape of a sibling's first call: what its compile starts (here a Python process stands
# for the C++ compiler) runs while Slurm's stop signal reaches every process of the run. The stand-in says it has
# started, then waits for the test's go, so that the signal surely comes while it runs. (Not a shell: dash clears the
# signals it inherits held.) The handler is the one
# cleanrl_utils.checkpoint.begin installs: it only notes the signal.
FIRST_CALL = """
import signal, subprocess, sys
from cleanrl_utils.scripts import load_script
sibling = load_script("ppo_torchcompile")
asked = []
signal.signal(signal.SIGUSR1, lambda signum, frame: asked.append(signum))
def compiling():
    return subprocess.Popen([sys.executable, "-c", *sys.argv[1:]]).wait()
print(sibling.Compiled(compiling, False)(), asked)
"""
STAND_IN = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).touch()
while not pathlib.Path(sys.argv[2]).exists():
    time.sleep(0.05)
"""


def test_a_stop_signal_to_every_process_waits_for_the_compiler(tmp_path):
    started, go = tmp_path / "started", tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-c", FIRST_CALL, STAND_IN, started, go],
        env=script_env(PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, which the signal below reaches whole
    )
    deadline = time.time() + 120
    while not started.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert started.exists(), proc.communicate()[1][-3000:]
    os.killpg(proc.pid, signal.SIGUSR1)
    go.touch()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    # the stand-in compiler finished (exit status 0, not killed by the signal), and the run was told to stop after it
    assert stdout.split() == ["0", f"[{int(signal.SIGUSR1)}]"], stdout


def compiled_class(script):
    """The source text of `script`'s Compiled class, read without importing the script."""
    source = (SCRIPTS / script).read_text()
    tree = ast.parse(source)
    return next(ast.get_source_segment(source, node) for node in tree.body if getattr(node, "name", "") == "Compiled")


def test_the_siblings_compile_alike():
    """The test above runs ppo_torchcompile.py's Compiled; the other two siblings carry the same class."""
    assert len({compiled_class(f"{parent}_torchcompile.py") for parent in SIBLINGS}) == 1
