"""--checkpoint-every and --resume (CONVENTIONS §7, cleanrl_utils/checkpoint/): a run killed with SIGKILL after its
second checkpoint, then resumed, logs bitwise the scalars of the run that never stopped (every tag but charts/SPS,
every step once) and saves the same model; a kill in the middle of a checkpoint's write leaves the previous one; every
bad --resume ends in one line and exit 2, writing nothing."""

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import (
    ROOT,
    SCRIPTS,
    assert_user_error,
    only_run_dir,
    read_scalars,
    run_as_main,
    run_script,
    script_env,
    without_cleanrl_utils_env,
)

from cleanrl_utils import checkpoint
from cleanrl_utils.scripts import checkpoint_header

CARTPOLE = ("--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "128", "--total-timesteps", "4096")


def env(**extra):
    """The scripts' environment, with this checkout's cleanrl_utils importable (as after `pip install -e .`)."""
    return script_env(PYTHONPATH=str(ROOT), **extra)


def killed_after_second_checkpoint(script, args, cwd, environment=None, timeout=300):
    """Runs `script args --checkpoint-every 1` in `cwd` and kills it (SIGKILL) once its checkpoint holds iteration 2
    or later; returns the run folder and the iteration of the checkpoint left there."""
    command = [sys.executable, SCRIPTS / script, *args, "--checkpoint-every", "1"]
    proc = subprocess.Popen(
        command, cwd=cwd, env=environment or env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    return kill_after_second_checkpoint(proc, cwd, kill, script, timeout)


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def kill_after_second_checkpoint(proc, cwd, kill, name, timeout=300):
    """Watches the run `proc` makes in `cwd` and calls `kill(proc)` once its checkpoint holds iteration 2 or later;
    returns the run folder and the iteration of the checkpoint left there."""
    seen = None
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            found = list((Path(cwd) / "runs").rglob(checkpoint.FILE)) if (Path(cwd) / "runs").exists() else []
            if found and os.stat(found[0]).st_ino != seen:  # a new checkpoint was renamed into place
                seen = os.stat(found[0]).st_ino
                if checkpoint.read(found[0])["iteration"] >= 2:
                    kill(proc)
                    state = checkpoint.read(found[0])
                    assert state["iteration"] < state["args"]["num_iterations"], "the run finished before the kill"
                    return found[0].parent, state["iteration"]
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            kill(proc)
    raise AssertionError(f"{name} ended (exit {proc.returncode}) or timed out before its second checkpoint")


def assert_same_run(uninterrupted, resumed):
    """Every scalar but the timings (charts/SPS, the compiled siblings' charts/compile_seconds) bitwise, at the same
    steps, each once; the timings at the same steps."""
    first, second = read_scalars(uninterrupted), read_scalars(resumed)
    assert set(first) == set(second)
    for tag in first:
        if tag in ("charts/SPS", "charts/compile_seconds"):
            assert [s for s, _ in first[tag]] == [s for s, _ in second[tag]], tag
        else:
            assert first[tag] == second[tag], tag


def tensors(tree, prefix=""):
    """The tensors of a saved model or state dict (nested dicts and lists of them), by dotted name."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {}
    return {name: t for key, value in items for name, t in tensors(value, f"{prefix}.{key}").items()}


def assert_same_model(uninterrupted, resumed, file):
    first = tensors(torch.load(uninterrupted / file, weights_only=False))
    second = tensors(torch.load(resumed / file, weights_only=False))
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name


def resume_bitwise(script, args, tmp_path, model_file=None):
    """The whole check for one script: uninterrupted run, killed run, resumed run; returns the killed run's folder.
    With `model_file`, the runs save their model (and evaluate it); without, the uninterrupted run writes only the
    checkpoint of its last iteration, and the learner's tensors (the agent's and the optimizer's) are compared there."""
    (tmp_path / "uninterrupted").mkdir()
    (tmp_path / "stopped").mkdir()
    baseline = (*args, "--save-model") if model_file else (*args, "--checkpoint-every", "1000000")
    run_script(script, *baseline, cwd=tmp_path / "uninterrupted", env=env())
    args = (*args, "--save-model") if model_file else args
    run_dir, iteration = killed_after_second_checkpoint(script, args, tmp_path / "stopped")
    resumed = (*args, "--checkpoint-every", "1", "--resume", run_dir)
    proc = run_script(script, *resumed, cwd=tmp_path / "stopped", env=env())
    assert f"at iteration {iteration}," in proc.stdout
    assert only_run_dir(tmp_path / "stopped") == run_dir
    uninterrupted = only_run_dir(tmp_path / "uninterrupted")
    assert_same_run(uninterrupted, run_dir)
    if model_file:
        assert_same_model(uninterrupted, run_dir, model_file)
    else:
        first, second = (checkpoint.read(folder / checkpoint.FILE) for folder in (uninterrupted, run_dir))
        assert first["iteration"] == second["iteration"] == first["args"]["num_iterations"]
        for part in ("agent", "optimizer"):
            ours, theirs = tensors(first[part]), tensors(second[part])
            assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours), part
    assert sorted(p.name for p in run_dir.glob("checkpoint*")) == [checkpoint.STATE_FILE, checkpoint.FILE]
    return run_dir


# ---- ppo.py, classic control --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """An uninterrupted CartPole run, and the same run killed after its second checkpoint (not resumed)."""
    cwd = tmp_path_factory.mktemp("cartpole")
    (cwd / "uninterrupted").mkdir()
    (cwd / "stopped").mkdir()
    run_script("ppo.py", *CARTPOLE, "--save-model", cwd=cwd / "uninterrupted", env=env())
    run_dir, _ = killed_after_second_checkpoint("ppo.py", (*CARTPOLE, "--save-model"), cwd / "stopped")
    return only_run_dir(cwd / "uninterrupted"), run_dir


def copy_stopped(cartpole, tmp_path):
    """A copy of the stopped run in tmp_path/runs/...: its folder there."""
    run_dir = cartpole[1]
    copy = tmp_path / "runs" / run_dir.name
    shutil.copytree(run_dir, copy)
    return copy


def resume(run_dir, cwd, *extra, check=True, environment=None):
    args = (*CARTPOLE, "--save-model", "--resume", run_dir, *extra)
    return run_script("ppo.py", *args, cwd=cwd, check=check, env=environment or env(), timeout=300)


def test_cartpole_resumes_bitwise(cartpole, tmp_path):
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    iteration = checkpoint.read(run_dir / checkpoint.FILE)["iteration"]
    proc = resume(run_dir, tmp_path)
    assert f"resumed runs/{run_dir.name} at iteration {iteration}," in proc.stdout
    assert_same_run(uninterrupted, run_dir)
    assert_same_model(uninterrupted, run_dir, "ppo.cleanrl_model")
    # the run ended with a checkpoint of its last iteration, which marks it finished
    assert checkpoint.read(run_dir / checkpoint.FILE)["iteration"] == 4096 // 256


def test_a_flag_the_script_gained_since_the_checkpoint_counts_as_its_default(cartpole, tmp_path):
    """A checkpoint written before the script had a flag (here: one without --clip-vloss among its arguments) goes
    on, and bitwise, when the flag is left at its default: the checkpoint's run used what the default does."""
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    state = checkpoint.read(run_dir / checkpoint.FILE)
    del state["args"]["clip_vloss"]
    checkpoint.write(state, run_dir / checkpoint.FILE)
    resume(run_dir, tmp_path)
    assert_same_run(uninterrupted, run_dir)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_a_signal_stops_the_run_after_a_checkpoint_and_it_goes_on(cartpole, tmp_path, signum):
    """What Slurm sends before a time limit or a preemption: the run finishes its iteration, writes a checkpoint
    (though none was due), says so, exits with status 75, and --resume goes on bitwise; checkpoint.json tells the
    benchmark runner the run's flags and how far it got."""
    uninterrupted, _ = cartpole
    args = (*CARTPOLE, "--save-model", "--checkpoint-every", "1000")
    command = [sys.executable, SCRIPTS / "ppo.py", *args]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env(), stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the first progress line: the loop has started
        if line.startswith("["):
            break
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == checkpoint.STOPPED, out
    run_dir = only_run_dir(tmp_path)
    state = json.loads((run_dir / checkpoint.STATE_FILE).read_text())
    assert 1 <= state["iteration"] < state["num_iterations"] == 4096 // 256
    assert state["argv"] == [str(a) for a in args] and state["run_name"] == run_dir.name
    assert f"stopped by {signum.name} after the checkpoint of iteration {state['iteration']}" in out
    run_script("ppo.py", *args, "--resume", run_dir, cwd=tmp_path, env=env(), timeout=300)
    assert_same_run(uninterrupted, run_dir)
    assert_same_model(uninterrupted, run_dir, "ppo.cleanrl_model")


def test_a_kill_during_a_checkpoint_write_resumes_from_the_previous_one(cartpole, tmp_path):
    """A kill while a checkpoint is being written leaves its temporary file, whole or not; the last renamed one
    is used, and the half-written one, given itself, is refused."""
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    data = (run_dir / checkpoint.FILE).read_bytes()
    half_written = run_dir / f"{checkpoint.FILE}.tmp"
    half_written.write_bytes(data[: len(data) // 2])
    proc = resume(half_written, tmp_path, check=False)
    assert_user_error(proc, "ppo.py: error: --resume:", "is truncated or damaged")
    resume(run_dir, tmp_path)
    assert_same_run(uninterrupted, run_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem to fill takes root")
def test_a_full_disk_keeps_the_last_checkpoint_and_training_goes_on(tmp_path):
    """On a real filesystem with room for one checkpoint (a 256 KiB tmpfs; ppo.py's CartPole checkpoint is about
    146 KB): the first checkpoint is written, every later one finds the disk full. Each says so in one line, leaves
    no temporary file, keeps the checkpoint before it whole, and the run trains to its end."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:  # root in a container without the capability to mount
        pytest.skip(f"root here cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        args = (*CARTPOLE, "--checkpoint-every", "1")
        proc = run_script("ppo.py", *args, cwd=disk, env=env(), timeout=300)
        assert "[100%] step 4096/4096" in proc.stdout
        refused = [line for line in proc.stderr.splitlines() if "was not written" in line]
        assert len(refused) == 4096 // 256, proc.stderr  # iterations 2 to 16, then marking the run finished
        assert refused[0] == (
            "ppo.py: the checkpoint of iteration 2 was not written (No space left on device); the previous one is kept"
        )
        run_dir = only_run_dir(disk)
        assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".")) == [], "no temporary file"
        assert checkpoint.read(run_dir / checkpoint.FILE)["iteration"] == 1
        assert json.loads((run_dir / checkpoint.STATE_FILE).read_text())["iteration"] == 1
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def tree(folder):
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in Path(folder).rglob("*")}


def damage(data):
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


@pytest.mark.parametrize(
    ("case", "fragments"),
    [
        ("missing", ["runs/nothing does not exist"]),
        ("no checkpoint", ["no checkpoint in", "--checkpoint-every N"]),
        ("truncated", ["is truncated or damaged"]),
        ("damaged", ["is truncated or damaged"]),
        ("not a checkpoint", ["is not a checkpoint of these scripts"]),
        ("other flags", ["was run with --learning-rate 0.00025, --num-envs 2", "give the run's own flags"]),
        ("other script", ["is a run of ppo.py, not of ppo_copy.py"]),
        ("other folder", ["which is not its folder", "run it from where runs/ is"]),
        ("negative", ["--checkpoint-every must be at least 0"]),
    ],
)
def test_bad_resume_is_one_line_and_exit_2_writing_nothing(cartpole, tmp_path, case, fragments, capfd):
    run_dir = copy_stopped(cartpole, tmp_path)
    file = run_dir / checkpoint.FILE
    cwd = tmp_path
    target = run_dir
    args = []
    script = "ppo.py"
    if case == "missing":
        target = Path("runs/nothing")
    elif case == "no checkpoint":
        file.unlink()
    elif case == "truncated":
        file.write_bytes(file.read_bytes()[:-100])
    elif case == "damaged":
        file.write_bytes(damage(file.read_bytes()))
    elif case == "not a checkpoint":
        file.write_bytes(b"PK\x03\x04 something else")
    elif case == "other flags":
        args = ["--learning-rate", "1e-3", "--num-envs", "4"]
    elif case == "other script":
        shutil.copy(SCRIPTS / "ppo.py", tmp_path / "ppo_copy.py")
        script = tmp_path / "ppo_copy.py"
    elif case == "other folder":
        cwd = tmp_path / "elsewhere"
        cwd.mkdir()
        target = run_dir.resolve()
    elif case == "negative":
        args = ["--checkpoint-every", "-1"]
    before = tree(tmp_path)
    proc = run_as_main(script, *CARTPOLE, "--resume", target, *args, cwd=cwd, capfd=capfd)
    assert_user_error(proc, f"{Path(script).name}: error:", *fragments)
    assert tree(tmp_path) == before, "nothing may be written"


def test_a_finished_run_is_not_resumed(tmp_path, capfd):
    args = ("--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "128", "--total-timesteps", "768")
    run_script("ppo.py", *args, "--checkpoint-every", "2", cwd=tmp_path, env=env())
    run_dir = only_run_dir(tmp_path)
    # every second iteration, and the last one, the third
    assert checkpoint.read(run_dir / checkpoint.FILE)["iteration"] == 3
    before = tree(tmp_path)
    proc = run_as_main("ppo.py", *args, "--resume", run_dir, cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, "ppo.py: error: --resume:", "has finished (iteration 3 of 3)")
    assert tree(tmp_path) == before


def test_checkpoints_without_cleanrl_utils_say_what_to_install(tmp_path):
    """A script copied alone trains without cleanrl_utils (test_scripts.py), but checkpoints need it."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SCRIPTS / "ppo.py", alone / "ppo.py")
    proc = run_script(
        alone / "ppo.py",
        *CARTPOLE,
        "--checkpoint-every",
        "1",
        cwd=alone,
        check=False,
        env=without_cleanrl_utils_env(tmp_path),
    )
    assert_user_error(proc, "cleanrl_utils is missing", "pip install -e .")
    assert not (alone / "runs").exists()


def test_track_resumes_the_same_wandb_run(tmp_path):
    tracked = (*CARTPOLE, "--track", "--wandb-project-name", "cleanrl-test")
    # wandb stages media and artifacts in temporary folders that a killed run leaves behind: here, not in /tmp
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    run_dir, _ = killed_after_second_checkpoint("ppo.py", tracked, tmp_path, env(TMPDIR=str(temporary)))
    run_id = checkpoint.read(run_dir / checkpoint.FILE)["wandb_id"]
    assert run_id
    run_script("ppo.py", *tracked, "--resume", run_dir, cwd=tmp_path, env=env(TMPDIR=str(temporary)))
    offline_runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2 and all(run.name.endswith(f"-{run_id}") for run in offline_runs)


# ---- a checkpoint is data; it knows the code that made it; one process writes a run --------------------------------


class CreatesAFile:
    """What a crafted checkpoint could hold: unpickled, it would create the file `path` (any code could run there)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_crafted_checkpoint_is_refused_and_runs_nothing(cartpole, tmp_path, capfd):
    """A checkpoint whose digest is right (anyone can compute it) but which holds an object that unpickling would
    build by calling a function: loading refuses it in one line, and the function never runs."""
    run_dir = copy_stopped(cartpole, tmp_path)
    created = tmp_path / "created-by-unpickling"
    state = checkpoint.read(run_dir / checkpoint.FILE)
    state["wandb_id"] = CreatesAFile(created)
    checkpoint.write(state, run_dir / checkpoint.FILE)
    with pytest.raises(checkpoint.BadCheckpoint, match="holds more than plain data"):
        checkpoint.read(run_dir / checkpoint.FILE)
    proc = run_as_main("ppo.py", "--resume", run_dir, cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, "ppo.py: error: --resume:", "holds more than plain data (loading it would run code)")
    assert not created.exists()
    parts = sorted((ROOT / "cleanrl_utils" / "checkpoint").glob("*.py"))
    assert len(parts) > 1
    for part in parts:
        source = part.read_text()
        assert "pickle.load" not in source and "weights_only=False" not in source, part.name


def edited_copy(tmp_path, old=None, new=None):
    """ppo.py with one more comment line (another text, the same program), or with `old` replaced by `new`."""
    folder = tmp_path / "edited"
    folder.mkdir(exist_ok=True)
    text = (SCRIPTS / "ppo.py").read_text()
    text = text.replace(old, new) if old else text + "# edited since the checkpoint\n"
    (folder / "ppo.py").write_text(text)
    return folder / "ppo.py"


def test_a_checkpoint_of_another_script_text_is_refused_and_goes_on_with_resume_changed_code(cartpole, tmp_path, capfd):
    """The checkpoint records its script's sha256: an edited script refuses it in one line that says how to go on;
    --resume-changed-code then goes on with the learner as saved (its optimizer's step counts, the learning rate's
    annealing) and fresh environments, seeded from the seed and the iteration."""
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    iteration = checkpoint.read(run_dir / checkpoint.FILE)["iteration"]
    edited = edited_copy(tmp_path)
    proc = run_as_main(edited, "--resume", run_dir, cwd=tmp_path, capfd=capfd)
    assert_user_error(
        proc, "was made by other code (ppo.py is another text (sha256 ", "add --resume-changed-code", "not bitwise"
    )
    proc = run_script(edited, "--resume", run_dir, "--resume-changed-code", cwd=tmp_path, env=env(), timeout=300)
    assert (
        "ppo.py: the code changed since the checkpoint (ppo.py is another text (sha256 " in proc.stdout
        and f"the environments restart (seeded with --seed and the iteration, {1 + 2 * iteration}); " in proc.stdout
    )
    first, second = read_scalars(uninterrupted), read_scalars(run_dir)
    assert first["charts/learning_rate"] == second["charts/learning_rate"]
    assert [step for step, _ in first["losses/value_loss"]] == [step for step, _ in second["losses/value_loss"]]
    state = checkpoint.read(run_dir / checkpoint.FILE)
    steps = {int(moments["step"]) for moments in state["optimizer"]["state"].values()}
    assert steps == {16 * 4 * 4} and state["finished"], "every update of the run counted once"
    assert state["code"]["script_sha256"] == hashlib.sha256(edited.read_bytes()).hexdigest()
    assert (run_dir / "ppo.cleanrl_model").is_file()


def test_a_checkpoint_of_other_library_versions_is_refused(cartpole, tmp_path, capfd):
    run_dir = copy_stopped(cartpole, tmp_path)
    state = checkpoint.read(run_dir / checkpoint.FILE)
    assert {"python", "torch", "numpy", "gymnasium"} <= set(state["code"]["versions"])
    state["code"]["versions"]["numpy"] = "1.0.0"
    checkpoint.write(state, run_dir / checkpoint.FILE)
    before = tree(tmp_path)
    proc = run_as_main("ppo.py", "--resume", run_dir, cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, f"was made by other code (numpy 1.0.0, now {np.__version__})", "--resume-changed-code")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("part", ["network", "wrappers"])
def test_what_does_not_fit_the_checkpoint_is_one_line_before_training(cartpole, tmp_path, capfd, part):
    """A network of other shapes (even under --resume-changed-code), a wrapper stack other than the checkpoint's:
    one line and exit 2, before any training."""
    run_dir = copy_stopped(cartpole, tmp_path)
    if part == "network":
        script = edited_copy(tmp_path, "hidden = 64", "hidden = 32")
        proc = run_as_main(script, "--resume", run_dir, "--resume-changed-code", cwd=tmp_path, capfd=capfd)
        assert_user_error(proc, "the checkpoint's learner does not fit this script's (size mismatch for critic.0")
    else:
        state = checkpoint.read(run_dir / checkpoint.FILE)
        state["envs"]["base"]["envs"][0]["layers"][0]["class"] = "ClipReward"
        checkpoint.write(state, run_dir / checkpoint.FILE)
        proc = run_as_main("ppo.py", "--resume", run_dir, cwd=tmp_path, capfd=capfd)
        assert_user_error(proc, "the environments are built otherwise than in the checkpoint: ")
    assert "[" not in proc.stdout, "no iteration ran"


def test_a_second_process_on_the_same_run_is_refused(cartpole, tmp_path, capfd):
    """One writer per run: while a resumed run goes on (held still here, SIGSTOP), a second --resume of it ends in
    one line naming the first one's pid; the first then finishes, bitwise, and its lock goes with it."""
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    command = [sys.executable, SCRIPTS / "ppo.py", "--resume", run_dir]
    first = subprocess.Popen(command, cwd=tmp_path, env=env(), stdout=subprocess.PIPE, text=True)
    try:
        for line in first.stdout:
            if line.startswith("resumed "):
                break
        first.send_signal(signal.SIGSTOP)
        second = run_as_main("ppo.py", "--resume", run_dir, cwd=tmp_path, capfd=capfd)
        assert_user_error(second, f"runs/{run_dir.name} is in use by process {first.pid}", "wait for it to end")
        first.send_signal(signal.SIGCONT)
        first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            kill(first)
    assert first.returncode == 0
    assert_same_run(uninterrupted, run_dir)
    assert checkpoint.read(run_dir / checkpoint.FILE)["finished"]


def test_resume_alone_goes_on_bitwise_and_a_run_finishes_only_with_its_model(cartpole, tmp_path):
    """`--resume PATH` with no other flag takes the run's own flags (--save-model among them) and goes on bitwise.
    The run's last checkpoint counts as finished only once the model is saved and evaluated: a kill before that
    (the last checkpoint left unfinished, the model not there) resumes into saving and evaluating it."""
    uninterrupted, _ = cartpole
    run_dir = copy_stopped(cartpole, tmp_path)
    run_script("ppo.py", "--resume", run_dir, cwd=tmp_path, env=env(), timeout=300)
    assert_same_run(uninterrupted, run_dir)
    assert_same_model(uninterrupted, run_dir, "ppo.cleanrl_model")
    file = run_dir / checkpoint.FILE
    state = checkpoint.read(file)
    assert state["finished"] and checkpoint_header(file)["finished"]
    state["finished"] = False  # as the last iteration's checkpoint was, before the model was saved
    checkpoint.write(state, file)
    (run_dir / "ppo.cleanrl_model").unlink()
    proc = run_script("ppo.py", "--resume", run_dir, cwd=tmp_path, env=env(), timeout=300)
    assert f"resumed runs/{run_dir.name} at iteration 16," in proc.stdout
    assert "model saved to" in proc.stdout and "eval_episode=9" in proc.stdout and "[" not in proc.stdout
    assert_same_model(uninterrupted, run_dir, "ppo.cleanrl_model")
    assert checkpoint_header(file)["finished"]
    # a run that ended by itself: checkpoint.json repeats the last header
    assert checkpoint_header(file) == json.loads((run_dir / checkpoint.STATE_FILE).read_text())


def test_the_header_and_checkpoint_json_say_what_the_checkpoint_holds(cartpole, tmp_path):
    """The benchmark runner reads the header of checkpoint.pt, written with it in one rename, so that the two
    cannot disagree; checkpoint.json repeats it for people, written after it: a kill can fall between the two, and
    leave checkpoint.json one checkpoint behind (test_resume_alone_... checks it equal at a run's end)."""
    run_dir = copy_stopped(cartpole, tmp_path)
    state = checkpoint.read(run_dir / checkpoint.FILE)
    header = checkpoint_header(run_dir / checkpoint.FILE)
    assert header == {name: state[name] for name in checkpoint.HEADER}
    written = json.loads((run_dir / checkpoint.STATE_FILE).read_text())
    assert written.keys() == header.keys()
    assert written["iteration"] in (header["iteration"], header["iteration"] - 1)
    if written["iteration"] == header["iteration"]:
        assert written == header
    assert header["code"]["script_sha256"] == hashlib.sha256((SCRIPTS / "ppo.py").read_bytes()).hexdigest()
    assert header["argv"] == [str(word) for word in (*CARTPOLE, "--save-model", "--checkpoint-every", "1")]


def test_environment_state_is_stored_as_plain_data_and_put_back(tmp_path):
    """to_data and from_data on what the environments hold: arrays, NumPy scalars, random generators, deques,
    enums, plain objects (put back into the fresh one); a mismatch is BadCheckpoint, an unstorable value Unstorable."""
    import collections

    import gymnasium as gym

    generator = np.random.default_rng(3)
    generator.random(5)
    legacy = np.random.RandomState(4)
    legacy.random_sample()
    value = {
        "array": np.arange(12, dtype=np.float32).reshape(3, 4),
        "scalar": np.float64(2.5),
        "deque": collections.deque([1, 2], maxlen=3),
        "generator": generator,
        "legacy": legacy,
        "mode": gym.vector.AutoresetMode.SAME_STEP,
        "nested": [(1, "a", None, b"\x00\xff"), {2, 3}],
        "statistics": gym.wrappers.utils.RunningMeanStd(shape=(2,)),
    }
    value["statistics"].update(np.ones((3, 2)))
    buffer = io.BytesIO()
    torch.save(checkpoint.to_data(value), buffer)
    buffer.seek(0)
    data = torch.load(buffer, weights_only=True)
    fresh = {"mode": gym.vector.AutoresetMode.NEXT_STEP, "statistics": gym.wrappers.utils.RunningMeanStd(shape=(2,))}
    back = checkpoint.from_data(data, fresh)
    assert back["array"].dtype == np.float32 and np.array_equal(back["array"], value["array"])
    assert type(back["scalar"]) is np.float64 and back["scalar"] == 2.5
    assert back["deque"] == value["deque"] and back["deque"].maxlen == 3
    assert back["generator"].random() == generator.random() and back["legacy"].random_sample() == legacy.random_sample()
    assert back["mode"] is gym.vector.AutoresetMode.SAME_STEP and back["nested"] == value["nested"]
    assert back["statistics"] is fresh["statistics"] and np.array_equal(
        back["statistics"].mean, value["statistics"].mean
    )
    with pytest.raises(checkpoint.BadCheckpoint, match="holds a RunningMeanStd where this build has nothing"):
        checkpoint.from_data(data, {"mode": fresh["mode"]})
    with pytest.raises(checkpoint.Unstorable):
        checkpoint.to_data(lambda: None)


# ---- ppo_continuous_action.py, MuJoCo -----------------------------------------------------------------------------

HOPPER = ("--env-id", "Hopper-v4", "--num-steps", "128", "--num-minibatches", "4", "--total-timesteps", "1024")


def test_hopper_resumes_bitwise(tmp_path):
    """MuJoCo's whole MjData, the normalisers' statistics and discounted returns, the time limit's count."""
    run_dir = resume_bitwise("ppo_continuous_action.py", HOPPER, tmp_path, "ppo_continuous_action.cleanrl_model")
    state = checkpoint.read(run_dir / checkpoint.FILE)
    assert state["envs"]["base"]["envs"][0]["base"]["engine"] == "mujoco"


DM_CARTPOLE = ("--env-id", "dm_control/cartpole-balance-v0", "--num-envs", "1", "--num-steps", "64")
DM_CARTPOLE += ("--num-minibatches", "2", "--total-timesteps", "1920")


def test_dm_control_resumes_bitwise(tmp_path):
    """dm_control through shimmy: its environment, physics included, pickles whole with the wrappers' state."""
    # no --save-model: an evaluation plays 10 episodes of 1,000 steps, twice; the learners are compared instead
    run_dir = resume_bitwise("ppo_continuous_action.py", DM_CARTPOLE, tmp_path)
    assert checkpoint.read(run_dir / checkpoint.FILE)["envs_lost"] is None


# ---- ppo_atari.py, ALE ---------------------------------------------------------------------------------------------

BREAKOUT = ("--env-id", "BreakoutNoFrameskip-v4", "--num-envs", "2", "--num-steps", "128", "--total-timesteps", "1280")


def test_breakout_resumes_bitwise(tmp_path):
    """ALE's system state with its random generator, the frame stack, the max-and-skip buffer, the lives."""
    # no --save-model: the learners are compared instead of two evaluations of 10 whole games (the saved model of a
    # resumed run is compared in the CartPole, Hopper and compiled cases)
    run_dir = resume_bitwise("ppo_atari.py", BREAKOUT, tmp_path)
    state = checkpoint.read(run_dir / checkpoint.FILE)
    assert state["envs"]["base"]["envs"][0]["base"]["engine"] == "ale"


def test_breakout_with_an_lstm_resumes_bitwise(tmp_path):
    """The LSTM's hidden and cell states are carried from one iteration to the next: the checkpoint holds them."""
    run_dir = resume_bitwise("ppo_atari_lstm.py", (*BREAKOUT, "--num-minibatches", "2"), tmp_path)
    assert [tuple(t.shape) for t in checkpoint.read(run_dir / checkpoint.FILE)["carried"]] == [(1, 2, 128)] * 2


# ---- where the environments' state cannot be saved: the learner goes on exactly, the environments restart ----------

LEARNER_EXACT = [
    # pybox2d pickles neither a world nor its bodies, and cannot set a world's whole state (contacts, broad phase)
    ("ppo.py", ("--env-id", "LunarLander-v3", "--num-envs", "2"), "LunarLander-v3", "LunarLander.world"),
    # EnvPool's games live in C++, out of reach
    (
        "ppo_atari_envpool.py",
        ("--env-id", "Breakout-v5", "--num-envs", "2"),
        "Breakout-v5",
        "AtariGymnasiumEnvPool's environments",
    ),
    # its compiled sibling resumes as its parent does (in the rollout length of its other tests: test_scripts.py)
    (
        "ppo_atari_envpool_torchcompile.py",
        ("--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "64"),
        "Breakout-v5",
        "AtariGymnasiumEnvPool's environments",
    ),
]


@pytest.mark.parametrize(
    ("script", "args", "env_id", "lost"), LEARNER_EXACT, ids=["box2d", "envpool", "envpool-compiled"]
)
def test_the_learner_resumes_and_the_environments_restart_where_they_cannot_be_saved(
    tmp_path, script, args, env_id, lost
):
    """The checkpoint holds no environment state; the resumed run says so in one line, restarts the environments
    seeded from the seed and the iteration, goes on with the learner as it was, and logs nothing twice."""
    num_steps = int(args[args.index("--num-steps") + 1]) if "--num-steps" in args else 128
    args = (*args, "--num-steps", str(num_steps), "--total-timesteps", str(2 * num_steps * 6))
    run_dir, iteration = killed_after_second_checkpoint(script, args, tmp_path)
    state = checkpoint.read(run_dir / checkpoint.FILE)
    assert state["envs"] is None and state["envs_lost"] == f"{env_id}'s state cannot be saved ({lost})"
    proc = run_script(script, *args, "--resume", run_dir, cwd=tmp_path, env=env())
    notice = [line for line in proc.stdout.splitlines() if "the environments restart" in line]
    # EnvPool accepts a seed in reset and ignores it: its games are seeded only when made, with --seed
    how = "EnvPool seeds them only when made: with --seed" if script.startswith("ppo_atari_envpool") else None
    how = how or f"seeded with --seed and the iteration, {1 + 2 * iteration}"
    assert notice == [
        f"{script}: {env_id}'s state cannot be saved ({lost}): the environments restart ({how}); "
        "the learner goes on exactly"
    ]
    scalars = read_scalars(run_dir)
    for tag, points in scalars.items():
        assert [step for step, _ in points] == sorted(step for step, _ in points), tag
    for tag in ("charts/learning_rate", "losses/value_loss", "charts/SPS"):  # once per iteration
        assert [step for step, _ in scalars[tag]] == [2 * num_steps * (i + 1) for i in range(6)], tag
    rates = [rate for _, rate in scalars["charts/learning_rate"]]
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == 6  # the annealing went on from the checkpoint


# ---- ppo_procgen.py: procgen's own get_state and set_state ---------------------------------------------------------

STARPILOT = ("--env-id", "starpilot", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "640")


def test_procgen_resumes_bitwise(tmp_path):
    """Each game's whole state (procgen's get_state, its level generator included), the vector wrappers' statistics
    and the reward scaler's running return."""
    run_dir = resume_bitwise("ppo_procgen.py", STARPILOT, tmp_path)
    assert checkpoint.read(run_dir / checkpoint.FILE)["envs"]["base"]["engine"] == "procgen"
