"""What the tests share: running a script as a user would, and reading back what it logged."""

import contextlib
import fcntl
import functools
import hashlib
import importlib.abc
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cleanrl_utils.scripts import SCRIPTS, load_script, vector_env  # noqa: F401  (the test files import them here)

ROOT = SCRIPTS.parent

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


def groups_unavailable_here(pythons=ROOT / "requirements" / "pythons.txt"):
    """{group: why} for the groups requirements/pythons.txt says this Python cannot install."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    unavailable = {}
    for line in Path(pythons).read_text().splitlines():
        words = line.split()
        if len(words) > 3 and words[0] == "unavailable" and words[1] == here:
            unavailable[words[2]] = " ".join(words[3:])
    return unavailable


def script_env(**extra):
    """The environment a script runs in under test: headless, offline, unbuffered, and one thread per run, since
    the tests share a small machine where two threads contending for a core run a CNN far slower."""
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        SDL_VIDEODRIVER="dummy",
        MPLBACKEND="Agg",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        HF_HUB_OFFLINE="1",
    )
    env.update(extra)
    return env


def run_python(*command, cwd, timeout=600, check=True, env=None):
    """Runs `python *command` in `cwd`, as a user would from the shell; with `check`, a failure fails the test."""
    proc = subprocess.run(
        [sys.executable, *map(str, command)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env=env or script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        shown = " ".join(Path(word).name if os.sep in word else word for word in map(str, command))
        raise AssertionError(f"python {shown} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def run_script(script, *args, cwd, timeout=600, check=True, env=None):
    """Runs `script` (a path, or a name in cleanrl/) with `args` in `cwd`, as a user would from the shell."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    return run_python(path, *args, cwd=cwd, timeout=timeout, check=check, env=env)


# the warning filters of a fresh `python` without -W or PYTHONWARNINGS, first to last (the warnings module's docs)
FRESH_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


def show_warning_on_stderr(message, category, filename, lineno, file=None, line=None):
    """How a fresh `python` shows a warning (pytest would collect it instead)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_as_main(script, *args, cwd, capfd):
    """Runs `script` (a path, or a name in cleanrl/) with `args` as `python script args` would, but in this
    process, whose imports are already made: for the checks that end a run before any work, a process started for
    each would spend two seconds importing torch. As a fresh interpreter: the script runs as __main__ from `cwd`,
    its folder first on sys.path, warnings shown as Python shows them by default, and every byte written to the
    standard streams, by Python or by a library's C code, is captured (capfd, pytest's file-descriptor capture).
    What the script changes of the process (the environment, the path, the folder) is put back. What importing a
    script writes is checked in a process started for the imports (test_scripts.py::test_importing_has_no_side_effects).
    Returns a CompletedProcess as run_script does."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    saved = dict(os.environ), sys.argv, list(sys.path), os.getcwd()
    sys.argv = [str(path), *map(str, args)]
    sys.path.insert(0, str(path.parent))
    os.chdir(cwd)
    capfd.readouterr()
    returncode = 0
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in FRESH_WARNING_FILTERS:
                warnings.filterwarnings(action, category=category, module=module, append=True)
            warnings.showwarning = show_warning_on_stderr
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            returncode = stop.code or 0
        else:  # sys.exit("message"): the message on stderr, status 1
            print(stop.code, file=sys.stderr)
            returncode = 1
    finally:
        environ, sys.argv, sys.path[:], folder = saved
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(folder)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["python", str(path), *map(str, args)], returncode, out, err)


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


def check_smoke_run(run_dir, run_prefix, sps_steps, stdout=None, metrics=COMMON_METRICS):
    """What every script's smoke run shows: its run folder named `run_prefix...`, `metrics` (CONVENTIONS §3),
    the hyperparameters as text, one charts/SPS per iteration at `sps_steps` and, given the output, plain
    progress lines up to 100%. Returns the run's scalars for the script's own checks."""
    assert run_dir.name.startswith(run_prefix), run_dir.name
    scalars = read_scalars(run_dir)
    assert set(metrics) <= set(scalars), set(metrics) - set(scalars)
    assert "hyperparameters/text_summary" in read_text_tags(run_dir)
    assert [step for step, _ in scalars["charts/SPS"]] == list(sps_steps)
    if stdout is not None:
        assert f"[100%] step {sps_steps[-1]}/{sps_steps[-1]}" in stdout and "\r" not in stdout
    return scalars


def assert_user_error(proc, *fragments):
    """A user error: exit 2, one line on stderr naming the problem, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, f"exit {proc.returncode}, stderr:\n{proc.stderr}"
    assert len(lines) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


def assert_same_scalars(run_a, run_b, ignore=("charts/SPS",)):
    """Two runs logged the same tags with identical values at identical steps (apart from the tags in `ignore`,
    which either may lack)."""
    first, second = read_scalars(run_a), read_scalars(run_b)
    assert set(first) - set(ignore) == set(second) - set(ignore)
    for tag in first:
        if tag not in ignore:
            assert first[tag] == second[tag], tag


def torchrun_env(env, folder):
    """`env` with `folder` as the temporary folder: torchrun leaves a torchelastic_* folder (its workers' logs) in the
    temporary folder at every start, ended well or killed, and the suite must leave the machine's /tmp as it was."""
    return {**env, "TMPDIR": str(folder)}


# ppo_atari_multigpu.py's tiny run, per process: two Breakout environments of 128 steps an iteration; 2 processes x
# 2 x 128 = 512 steps, 4 iterations. conftest.py's uninterrupted_multigpu_run is this run never stopped.
MULTIGPU_RUN = ("--total-timesteps", "2048", "--local-num-envs", "2", "--num-steps", "128")


def run_torchrun(script, nproc, *args, cwd, timeout=600, check=True, env=None):
    """Runs `script` (a path, or a name in cleanrl/) in `nproc` processes on this machine, as
    `torchrun --standalone --nnodes=1 --nproc_per_node=N` would."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc_per_node={nproc}"]
    with tempfile.TemporaryDirectory(prefix="torchrun-") as folder:
        env = torchrun_env(env or script_env(), folder)
        return run_python(*launcher, path, *args, cwd=cwd, timeout=timeout, check=check, env=env)


class FakeAtariGame(gym.Env):
    """Stands in for an ALE game whose score is known in advance, to test the Atari scripts' wrappers: every frame
    scores `points` (more than the clipped 1), a life lasts `life_frames` frames and a game has `lives` lives, so a game
    is lives x life_frames frames long and returns points x lives x life_frames, whatever the actions.
    Made through the scripts' make_env under the id FAKE_ATARI_GAME."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, points=3.0, life_frames=40, lives=3, frameskip=1, render_mode=None):
        self.points, self.life_frames, self.lives_per_game = points, life_frames, lives
        self.render_mode = render_mode
        self.ale = self  # the life wrapper reads env.unwrapped.ale.lives()
        self.frame = 0

    def get_action_meanings(self):
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def lives(self):
        return self.lives_per_game - self.frame // self.life_frames

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.frame = 0
        return np.zeros((210, 160, 3), np.uint8), {}

    def step(self, action):
        self.frame += 1
        return np.full((210, 160, 3), self.frame % 256, np.uint8), self.points, self.lives() == 0, False, {}

    def render(self):
        return np.zeros((210, 160, 3), np.uint8)


FAKE_ATARI_GAME = "FakeAtariGame-v0"
# lives longer than the frames the wrappers' resets may play (up to 30 no-ops, then FIRE): every life is the agent's
gym.register(FAKE_ATARI_GAME, entry_point=FakeAtariGame, kwargs={"points": 3.0, "life_frames": 40, "lives": 3})


FAKE_HUB_MODULE = """
# Stands in for huggingface_hub: records what would be uploaded, and serves downloads from a local folder,
# instead of reaching the network.
import json, os
from pathlib import Path

class HfApi:
    def whoami(self):
        return {"name": "someone"}

    def create_repo(self, repo_id, exist_ok=False, **kwargs):
        self._repo_id = repo_id

    def upload_folder(self, repo_id, folder_path, **kwargs):
        files = sorted(str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file())
        card = (Path(folder_path) / "README.md").read_text()
        record = {"created": self._repo_id, "uploaded": repo_id, "files": files, "card": card}
        Path(os.environ["FAKE_HUB_RECORD"]).write_text(json.dumps(record))

class RepositoryNotFoundError(Exception):
    pass

def hf_hub_download(repo_id, filename, **kwargs):
    path = Path(os.environ["FAKE_HUB_FILES"]) / repo_id / filename
    if not path.is_file():
        raise RepositoryNotFoundError(f"404 Client Error. Repository Not Found for url: {repo_id}/{filename}.")
    return str(path)
"""


def fake_hub_env(tmp_path, **extra):
    """A script environment (script_env(**extra)) in which cleanrl_utils can be imported, as after
    `pip install -e .`, and huggingface_hub is a stand-in that does not reach the network: an upload writes what
    it would upload to a JSON file, whose path comes back as the second value (the record holds "created" and
    "uploaded", repository ids, "files" and "card", the README), and `hf_hub_download(repo_id, filename)` serves
    the file `tmp_path/hub/{repo_id}/{filename}` (env["FAKE_HUB_FILES"] is that hub folder)."""
    fake = Path(tmp_path) / "fake_hub"
    (fake / "huggingface_hub").mkdir(parents=True)
    (fake / "huggingface_hub" / "__init__.py").write_text(FAKE_HUB_MODULE)
    record = Path(tmp_path) / "hub_record.json"
    pythonpath = os.pathsep.join(p for p in (str(fake), str(ROOT), extra.pop("PYTHONPATH", "")) if p)
    files = str(Path(tmp_path) / "hub")
    return script_env(PYTHONPATH=pythonpath, FAKE_HUB_RECORD=str(record), FAKE_HUB_FILES=files, **extra), record


def hiding_folder(folder, *packages):
    """`folder`, made, with a package of each name in `packages` that fails to import as a missing one: first on a
    process's path, it hides those packages from that process, even where they are installed."""
    for package in packages:
        (Path(folder) / package).mkdir(parents=True)
        missing = f"raise ModuleNotFoundError(\"No module named '{package}'\", name={package!r})\n"
        (Path(folder) / package / "__init__.py").write_text(missing)
    return Path(folder)


def without_cleanrl_utils_env(tmp_path, **extra):
    """A script environment (script_env(**extra)) in which cleanrl_utils cannot be imported, even where this
    project is installed (hiding_folder)."""
    hidden = hiding_folder(Path(tmp_path) / "no_cleanrl_utils", "cleanrl_utils")
    pythonpath = os.pathsep.join(p for p in (str(hidden), extra.pop("PYTHONPATH", "")) if p)
    return script_env(PYTHONPATH=pythonpath, **extra)


# a folder where the plain runs that tests in several files read are made once per test session, shared by its
# pytest-xdist workers (conftest.py)
PLAIN_RUNS = "CLEANRL_TESTS_PLAIN_RUNS"


def plain_run(script, *args, **variables):
    """The run folder of `python cleanrl/script args`, run as a user runs it but with cleanrl_utils nowhere to be
    imported (without_cleanrl_utils_env) and the script's own environment `variables`. Several test files read the
    same plain run (a script's tiny run: its same-seed repeat, a compiled sibling's first iteration, the default of
    a flag), so it is made once per test session in the PLAIN_RUNS folder, by the first test that asks; a test that
    asks while another worker makes it waits for it (a lock on the run's own folder). Only read it: it is shared.
    Without that folder (outside a test session), made anew in a temporary folder."""
    shared = os.environ.get(PLAIN_RUNS) or tempfile.mkdtemp(prefix="plain-run-")
    what = json.dumps([str(script), [str(arg) for arg in args], sorted(variables.items())])
    folder = Path(shared) / hashlib.sha256(what.encode()).hexdigest()[:16]
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "made").exists():
            for part in ("work", "hidden"):
                shutil.rmtree(folder / part, ignore_errors=True)  # what a failed attempt left
            (folder / "work").mkdir()
            environment = without_cleanrl_utils_env(folder / "hidden", **variables)
            run_script(script, *args, cwd=folder / "work", env=environment)
            (folder / "made").write_text(what)
    return only_run_dir(folder / "work")


class MissingPackages(importlib.abc.MetaPathFinder):
    """First among this process's finders, it answers an import of `packages` (or of a module in one) as Python
    answers for a package that is not installed."""

    def __init__(self, packages):
        self.packages = set(packages)

    def find_spec(self, name, path=None, target=None):
        package = name.partition(".")[0]
        if package in self.packages:
            raise ModuleNotFoundError(f"No module named '{package}'", name=package)
        return None  # the other finders look for it


@contextlib.contextmanager
def packages_hidden(*packages):
    """In this process while it lasts, `packages` cannot be imported, as if they were not installed (what
    hiding_folder does for a process started with it); the modules of theirs imported before come back after."""

    def hidden(name):
        return name.partition(".")[0] in packages

    saved = {name: module for name, module in sys.modules.items() if hidden(name)}
    for name in saved:
        del sys.modules[name]
    finder = MissingPackages(packages)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if hidden(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


# ---- conformance records (tests/conformance/README.md) -------------------------------------------------------------

CONFORMANCE = Path(__file__).parent / "conformance"
# the kernel settings that round like another CPU (CONVENTIONS §6), together: "pinned" in the machine files
PINNED = {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default"}


def record_env(record, **extra):
    """The environment a record's configuration runs in: script_env with the record's own variables and `extra`."""
    variables = dict(record.get("env", {}))
    if "PYTHONPATH" in variables:  # a folder of this repository, named from its root
        variables["PYTHONPATH"] = str(ROOT / variables["PYTHONPATH"])
    return script_env(**variables, **extra)


def run_record(record, cwd, **extra):
    """Runs a record's configuration in `cwd` as the conformance test does; returns every scalar it logged."""
    env = record_env(record, **extra)
    if record.get("nproc", 1) > 1:
        run_torchrun(record["script"], record["nproc"], *record["args"], cwd=cwd, env=env)
    else:
        run_script(record["script"], *record["args"], cwd=cwd, env=env)
    return {tag: [[step, value] for step, value in points] for tag, points in read_scalars(only_run_dir(cwd)).items()}


KIND_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "NPY_DISABLE_CPU_FEATURES",
    "XLA_FLAGS",
)


# a folder where the kinds found in this test session are kept, shared by its pytest-xdist workers (conftest.py)
KIND_CACHE = "CLEANRL_TESTS_KIND_CACHE"


def fingerprint_kind(settings):
    """The kind tests/conformance/fingerprint.py finds, run in a process of its own under `settings` alone (a tuple
    of (variable, value) among KIND_VARIABLES) and no other kernel variable."""
    env = script_env(**dict(settings))
    for name in KIND_VARIABLES:
        if name not in dict(settings):
            env.pop(name, None)
    proc = run_python(CONFORMANCE / "fingerprint.py", cwd=ROOT, env=env, timeout=300)
    return json.loads(proc.stdout)["kind"]


@functools.cache
def _machine_kind(settings):
    """fingerprint_kind, found once per test session: by this process, or by another worker of the session that
    found it first and left it in the KIND_CACHE folder (a fingerprint takes seconds: it imports torch, NumPy,
    MuJoCo and JAX)."""
    folder = os.environ.get(KIND_CACHE)
    if not folder:
        return fingerprint_kind(settings)
    file = Path(folder) / (hashlib.sha256(repr(settings).encode()).hexdigest() + ".kind")
    if file.exists():
        return file.read_text()
    kind = fingerprint_kind(settings)
    partial = file.with_name(f"{file.name}.{os.getpid()}")
    partial.write_text(kind)
    os.replace(partial, file)
    return kind


def machine_kind(**extra):
    """This machine's kind (tests/conformance/fingerprint.py) under script_env with `extra`: the same kind rounds the
    same way, so a record holding numbers for it is compared bitwise."""
    env = script_env(**extra)
    return _machine_kind(tuple(sorted((name, env[name]) for name in KIND_VARIABLES if name in env)))


def bitwise_problems(expected, ours):
    """What differs between a machine's recorded numbers and ours: every tag, every point, exactly."""
    problems = []
    for tag, points in expected.items():
        got = ours.get(tag, [])
        if [step for step, _ in got] != [step for step, _ in points]:
            problems.append(
                f"{tag}: logged at steps {[s for s, _ in got][:8]}..., recorded {[s for s, _ in points][:8]}..."
            )
            continue
        for i, ((step, value), (_, mine)) in enumerate(zip(points, got)):
            if mine != value and not (np.isnan(mine) and np.isnan(value)):
                problems.append(f"{tag}: point {i} (step {step}) is {mine!r}, recorded {value!r}")
                break
    return problems


def portable_problems(record, expected, ours):
    """What differs by more than the record's measured rounding, over the record's portable horizon: the first
    `iterations` points of each update tag, and every episode that ended by then."""
    portable = record["portable"]
    horizon = None
    problems = []
    for tag, points in expected.items():
        if tag.startswith("losses/") or tag == "charts/learning_rate":
            last = points[: portable["iterations"]][-1][0]
            horizon = last if horizon is None else max(horizon, last)
    for tag, points in expected.items():
        if tag not in portable["tolerance"]:
            continue
        points = [[step, value] for step, value in points if step <= horizon]
        got = [[step, value] for step, value in ours.get(tag, []) if step <= horizon]
        if [step for step, _ in got] != [step for step, _ in points]:
            problems.append(f"{tag}: logged at steps {[s for s, _ in got]}, the reference at {[s for s, _ in points]}")
            continue
        rtol = portable["tolerance"][tag]["rtol"]
        atol = portable["tolerance"][tag]["atol"]
        expected_values = np.array([value for _, value in points])
        values = np.array([value for _, value in got])
        off = np.abs(values - expected_values) - (atol + rtol * np.abs(expected_values))
        if len(off) and np.nanmax(off) > 0 or np.isnan(values).tolist() != np.isnan(expected_values).tolist():
            worst = int(np.nanargmax(off))
            problems.append(
                f"{tag}: point {worst} (step {points[worst][0]}) is {values[worst]!r}, "
                f"expected {expected_values[worst]!r} (rtol {rtol}, atol {atol})"
            )
    return problems
