"""What the tests share: running a script as a user would, and reading back what it logged."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "cleanrl"

# Metric names every PyTorch script logs (CONVENTIONS §3).
COMMON_METRICS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/learning_rate",
    "charts/SPS",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
}


def script_env(**extra):
    """The environment a script runs in under test: headless, offline, unbuffered."""
    env = dict(os.environ)
    env.update(
        PYTHONUNBUFFERED="1",
        SDL_VIDEODRIVER="dummy",
        MPLBACKEND="Agg",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        HF_HUB_OFFLINE="1",
    )
    env.update(extra)
    return env


def run_script(script, *args, cwd, timeout=600, check=True, env=None):
    """Runs `script` (a path, or a name in cleanrl/) with `args` in `cwd`, as a user would from the shell."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    proc = subprocess.run(
        [sys.executable, str(path), *map(str, args)],
        cwd=cwd,
        env=env or script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{path.name} {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def run_dirs(cwd):
    """The run folders under cwd/runs: those holding TensorBoard events (an env id with '/' nests them)."""
    return sorted({p.parent for p in (Path(cwd) / "runs").rglob("events.out.tfevents*")})


def only_run_dir(cwd):
    dirs = run_dirs(cwd)
    assert len(dirs) == 1, f"expected one run folder, found {dirs}"
    return dirs[0]


def read_scalars(run_dir):
    """Every scalar in the run's TensorBoard events: {tag: [(step, value), ...]}."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def read_text_tags(run_dir):
    acc = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    acc.Reload()
    return set(acc.Tags()["tensors"])


def load_script(name):
    """Imports a script from cleanrl/ as a module (importing it must have no side effects)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_user_error(proc, *fragments):
    """A user error: exit 2, one line on stderr naming the problem, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}, stderr:\n{proc.stderr}"
    assert len(lines) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


def run_copied_alone(script, *args, tmp_path, env=None):
    """Copies `script` alone into an empty folder and runs it there: it must need nothing from this repository."""
    alone = Path(tmp_path) / "alone"
    alone.mkdir()
    shutil.copy(SCRIPTS / script, alone / script)
    run_script(alone / script, *args, cwd=alone, env=env)
    return only_run_dir(alone)


def assert_same_scalars(run_a, run_b, ignore=("charts/SPS",)):
    """Two runs logged the same tags with identical values at identical steps (apart from `ignore`)."""
    first, second = read_scalars(run_a), read_scalars(run_b)
    assert set(first) == set(second)
    for tag in first:
        if tag not in ignore:
            assert first[tag] == second[tag], tag
