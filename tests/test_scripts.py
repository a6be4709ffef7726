"""What every script in cleanrl/ does the same way (CONVENTIONS.md), tested over a table of all of them: importing has
no side effects; bad input ends in one line and exit 2 before any work; a tiny run of the script copied alone into an
empty folder, its flags spelled with underscores, logs every metric, saves, evaluates, records video and uploads
(through a stand-in Hub); the same training run again logs the same scalars; --upload-model without cleanrl_utils
stops before training.
What is particular to one script is tested in its own file."""

import ast
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tyro
from helpers import (
    COMMON_METRICS,
    ROOT,
    SCRIPTS,
    assert_same_scalars,
    assert_user_error,
    check_smoke_run,
    fake_hub_env,
    load_script,
    only_run_dir,
    packages_hidden,
    plain_run,
    read_scalars,
    run_as_main,
    run_python,
    run_script,
    script_env,
)

TESTS = Path(__file__).parent
# one thread for XLA and PyTorch: the machine running the tests is usually busy, and threads then wait on each other
ONE_XLA_THREAD = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
JAX_METRICS = COMMON_METRICS | {"charts/avg_episodic_return", "charts/avg_episodic_length"}
PLAYER_METRICS = COMMON_METRICS | {f"charts/episodic_{what}-player{i}" for what in ("return", "length") for i in (0, 1)}


@dataclass(frozen=True)
class Script:
    name: str
    env_id: str
    """the environment of the tiny run"""
    tiny: tuple
    """the rest of the tiny run's arguments: a few iterations that finish some episodes"""
    sps_steps: tuple
    """the global steps of the tiny run's iterations"""
    unknown_env_id: str
    """an id of the kind the script takes, naming nothing"""
    metrics: frozenset = frozenset(COMMON_METRICS)
    env: dict = field(default_factory=dict)
    """environment variables the script runs with here"""
    video: bool = True
    """whether the script offers --capture-video"""

    def __str__(self):
        return self.name

    @property
    def file(self):
        return f"{self.name}.py"

    @property
    def args(self):
        return ["--env-id", self.env_id, *self.tiny]


TINY = ("--num-envs", "2", "--num-steps", "128", "--total-timesteps", "512")
# the unrolled JAX rollout is compiled whole, so its length sets the compilation's time: a short one (a tiny run of
# ppo_atari_envpool_xla_jax with an empty compilation cache took 12 s with 8 steps, 21 s with 16)
JAX_TINY = ("--num-envs", "2", "--num-steps", "8", "--total-timesteps", "512")
# the compiled siblings log their compile time too
COMPILED_METRICS = frozenset(COMMON_METRICS | {"charts/compile_seconds"})
# torch.compile unrolls GAE's loop over the steps, so the rollout's length sets most of the compile time (on a cold
# cache, 26 s for 32 steps against 43 s for 128, ppo_torchcompile alone on this 2-core machine): shorter rollouts
# than the parents', still ending episodes. Every test of a sibling runs these shapes (test_torchcompile.py,
# test_resume.py), so that after the first compile the kernels come from the compile cache.
COMPILED_TINY = ("--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128")
ENVPOOL_COMPILED_TINY = ("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "512")  # whole games end
CONTINUOUS_TINY = ("--num-steps", "256", "--total-timesteps", "512", "--update-epochs", "2")
TABLE = [
    Script("ppo", "CartPole-v1", TINY, (256, 512), "NoSuchGame-v0"),
    Script("ppo_torchcompile", "CartPole-v1", COMPILED_TINY, (64, 128), "NoSuchGame-v0", metrics=COMPILED_METRICS),
    Script("ppo_atari", "BreakoutNoFrameskip-v4", TINY, (256, 512), "NoSuchGameNoFrameskip-v4"),
    Script(
        "ppo_atari_lstm",
        "BreakoutNoFrameskip-v4",
        (*TINY, "--num-minibatches", "2"),
        (256, 512),
        "NoSuchGameNoFrameskip-v4",
    ),
    # run with plain python, the script is a world of one process (tests/test_ppo_atari_multigpu.py runs torchrun)
    Script(
        "ppo_atari_multigpu",
        "BreakoutNoFrameskip-v4",
        ("--local-num-envs", "2", "--num-steps", "128", "--total-timesteps", "512"),
        (256, 512),
        "NoSuchGameNoFrameskip-v4",
    ),
    Script("ppo_atari_envpool", "Breakout-v5", TINY, (256, 512), "NoSuchGame-v5"),
    Script(
        "ppo_atari_envpool_torchcompile",
        "Breakout-v5",
        ENVPOOL_COMPILED_TINY,
        (128, 256, 384, 512),
        "NoSuchGame-v5",
        metrics=COMPILED_METRICS,
    ),
    *[
        Script(
            name,
            "Breakout-v5",
            (*JAX_TINY, "--num-minibatches", "2", "--update-epochs", "1"),
            tuple(range(16, 513, 16)),
            "NoSuchGame-v5",
            metrics=frozenset(JAX_METRICS),
            env=ONE_XLA_THREAD,
            video=False,
        )
        for name in ("ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan")
    ],
    Script("ppo_continuous_action", "InvertedPendulum-v4", CONTINUOUS_TINY, (256, 512), "NoSuchRobot-v4"),
    Script(
        "ppo_continuous_action_torchcompile",
        "InvertedPendulum-v4",
        CONTINUOUS_TINY,
        (256, 512),
        "NoSuchRobot-v4",
        metrics=COMPILED_METRICS,
    ),
    # IsaacGymEnvs' tasks on Newton, on the CPU: Cartpole, whose episodes end within the run and the evaluation soon
    Script(
        "ppo_continuous_action_isaacgym",
        "Cartpole",
        ("--num-envs", "64", "--num-steps", "16", "--total-timesteps", "2048", "--no-cuda"),
        (1024, 2048),
        "NoSuchTask",
    ),
    # bossfight: random play ends its episodes in about 30 steps
    Script(
        "ppo_procgen",
        "bossfight",
        ("--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--num-minibatches", "2"),
        (128, 256),
        "nosuchgame",
    ),
    # Gym-μRTS: one environment, whose first 200-step game ends in the second iteration
    *[
        Script(
            name,
            "MicrortsMining-v1",
            ("--num-envs", "1", "--num-steps", "128", "--total-timesteps", "256"),
            (128, 256),
            "MicrortsNoSuchTask-v1",
        )
        for name in ("ppo_multidiscrete", "ppo_multidiscrete_mask")
    ],
    # one game of two players, which PettingZoo ends after 50 steps here (a whole game of Pong takes some 1,000)
    Script(
        "ppo_pettingzoo_ma_atari",
        "pong_v3",
        ("--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128"),
        (64, 128),
        "no_such_game_v1",
        metrics=frozenset(PLAYER_METRICS),
        env={"PYTHONPATH": str(TESTS / "pettingzoo_short_games")},
    ),
]


def test_the_table_lists_every_script():
    assert sorted(script.name for script in TABLE) == sorted(path.stem for path in SCRIPTS.glob("*.py"))


def script_run_env(script, *paths):
    """The environment `script` runs in here: script_env with the script's own variables, `paths` first on its
    PYTHONPATH."""
    env = dict(script.env)
    search_path = [str(path) for path in paths]
    if "PYTHONPATH" in env:
        search_path.append(env["PYTHONPATH"])
    if search_path:
        env["PYTHONPATH"] = os.pathsep.join(search_path)
    return script_env(**env)


def underscored(args):
    """The same arguments with every flag spelled with underscores (`--env_id`), as published commands often do."""
    return ["--" + arg[2:].replace("-", "_") if arg.startswith("--") else arg for arg in args]


def video_files(cwd, folder):
    return [video for video in (Path(cwd) / "videos" / folder).glob("*.mp4") if video.stat().st_size > 1000]


# ---- importing ----------------------------------------------------------------------------------------------

# Imports every script, one after another, in one process that refuses to make environments, from an empty folder:
# nothing may be made, printed or written. What each import printed (at the level of the file descriptors, so that
# a library's C code is caught too), wrote or raised goes to the JSON file named by the first argument. One process
# for all of them, since each would spend most of its time importing the same libraries: a library that prints or
# writes when first imported still fails the test of the script that imported it first, and only that one.
IMPORT_ONLY = """
import json
import os
import sys
import tempfile
import traceback

import gymnasium

def refuse(*args, **kwargs):
    raise AssertionError("importing the script made an environment")

gymnasium.make = gymnasium.make_vec = gymnasium.vector.SyncVectorEnv.__init__ = refuse
report, folder, names = sys.argv[1], sys.argv[2], sys.argv[3:]
if any("envpool" in open(os.path.join(folder, name + ".py")).read() for name in names):
    import envpool

    envpool.make = refuse
from cleanrl_utils.scripts import load_script

found = {}
for name in names:
    captured = {}
    kept = {}
    for fd in (1, 2):
        captured[fd] = tempfile.TemporaryFile()
        kept[fd] = os.dup(fd)
        os.dup2(captured[fd].fileno(), fd)
    error = None
    before = set(os.listdir("."))
    try:
        load_script(name, folder)
    except BaseException:
        error = traceback.format_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (1, 2):
        os.dup2(kept[fd], fd)
        os.close(kept[fd])
        captured[fd].seek(0)
        captured[fd] = captured[fd].read().decode(errors="replace")
    written = sorted(set(os.listdir(".")) - before)
    found[name] = {"stdout": captured[1], "stderr": captured[2], "error": error, "written": written}
with open(report, "w") as file:
    json.dump(found, file)
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """{script name: what importing it printed, raised and left in the folder} (IMPORT_ONLY), with the environment
    variables of every script that sets one (XLA's threads; PettingZoo's short games change no import)."""
    cwd = tmp_path_factory.mktemp("import_only")
    report = cwd.parent / f"{cwd.name}.json"
    variables = {}
    for script in TABLE:
        variables.update({name: value for name, value in script.env.items() if name != "PYTHONPATH"})
    env = script_env(PYTHONPATH=str(ROOT), **variables)
    names = [script.name for script in TABLE]
    proc = run_python("-c", IMPORT_ONLY, report, SCRIPTS, *names, cwd=cwd, env=env, timeout=600)
    # what the process wrote outside every script's import: gymnasium's and EnvPool's imports, its exit
    assert proc.stdout == proc.stderr == "", f"printed outside the scripts' imports:\n{proc.stdout}{proc.stderr}"
    assert list(cwd.iterdir()) == [], "written outside the scripts' imports"
    return json.loads(report.read_text())


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_importing_has_no_side_effects(script, imported):
    found = imported[script.name]
    assert found["error"] is None, found["error"]
    assert found["stdout"] == found["stderr"] == ""
    assert found["written"] == []


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_the_first_line_says_where_the_docs_are(script):
    """The first line a reader sees: a comment that says what the variant is for and names the section of this
    project's docs that explains it, `docs/PAGE.md#ANCHOR`, a section of the script's name."""
    first = (SCRIPTS / script.file).read_text().splitlines()[0]
    assert first.startswith("# ")
    found = re.search(r"(docs/\w+\.md)#(\S+)$", first)
    assert found, f"no docs section named at the end of {first!r}"
    page, anchor = found.groups()
    assert f"## `{script.file}`" in (ROOT / page).read_text().splitlines(), f"{page} has no section {script.file}"
    assert anchor == script.file.replace(".", ""), "the anchor mkdocs makes of the section's heading"


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_derived_sizes_are_not_flags(script, capsys):
    module = load_script(script.name)
    with pytest.raises(SystemExit):
        tyro.cli(module.Args, args=["--help"])
    help_text = capsys.readouterr().out
    assert "--total-timesteps" in help_text and "--env-id" in help_text
    for derived in ("--batch-size", "--minibatch-size", "--num-iterations"):
        assert derived not in help_text


# ---- bad input ----------------------------------------------------------------------------------------------

BAD_INPUTS = {
    "non-positive size": (["--num-steps", "0"], ["--num-steps must be positive"]),
    "batch does not divide": (["--num-minibatches", "3"], ["--num-minibatches 3 must divide"]),
    "negative clip coefficient": (["--clip-coef", "-0.1"], ["--clip-coef must be at least 0", "-0.1"]),
    "non-positive target KL": (["--target-kl", "0"], ["--target-kl must be positive"]),
    "upload without saving": (["--upload-model"], ["--save-model"]),
}
# the JAX pair offers no --target-kl: its update is one jitted program, which cannot stop after an epoch
NOT_OFFERED = {"non-positive target KL": {"ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan"}}
OFFERED = [
    pytest.param(script, bad, id=f"{script}-{bad}")
    for bad in BAD_INPUTS
    for script in TABLE
    if script.name not in NOT_OFFERED.get(bad, ())
]


def run_stopped_early(script, args, cwd, capfd, path=None, hidden=()):
    """Runs a script (from cleanrl/, or from `path`) that should stop before any work, the packages `hidden` missing
    as if not installed: in this process (helpers.run_as_main, helpers.packages_hidden), where its imports are made
    already. A script's own variables (PettingZoo's short games) shape only the games it plays, and it stops before
    making any."""
    path = path or SCRIPTS / script.file
    with packages_hidden(*hidden):
        return run_as_main(path, *args, cwd=cwd, capfd=capfd)


@pytest.mark.parametrize(("script", "bad"), OFFERED)
def test_bad_input_is_one_line_and_exit_2(script, bad, tmp_path, capfd):
    args, fragments = BAD_INPUTS[bad]
    proc = run_stopped_early(script, args, tmp_path, capfd)
    assert_user_error(proc, f"{script.file}: error:", *fragments)
    assert list(tmp_path.iterdir()) == [], "no work may start before the arguments are checked"


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_unknown_environment_is_one_line_and_exit_2(script, tmp_path, capfd):
    args = [*script.args, "--env-id", script.unknown_env_id]
    proc = run_stopped_early(script, args, tmp_path, capfd)
    assert_user_error(proc, f"{script.file}: error:", script.unknown_env_id)
    assert not (tmp_path / "runs").exists(), "no work may start before the environment is known"


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_upload_without_cleanrl_utils_stops_before_training(script, tmp_path, capfd):
    """The script copied alone, cleanrl_utils nowhere to be imported, run from another folder: --upload-model needs
    the package, and one line says how to install it before any training starts."""
    alone, elsewhere = tmp_path / "alone", tmp_path / "elsewhere"
    alone.mkdir(), elsewhere.mkdir()
    (alone / script.file).write_text((SCRIPTS / script.file).read_text())
    args = [*script.args, "--save-model", "--upload-model"]
    proc = run_stopped_early(script, args, elsewhere, capfd, path=alone / script.file, hidden=["cleanrl_utils"])
    assert_user_error(proc, f"{script.file}: error:", "cleanrl_utils", "pip install -e .")
    assert list(elsewhere.iterdir()) == [], "no training may start"


# the flags under which a script may import cleanrl_utils: the upload, and checkpoints
IMPORTS_CLEANRL_UTILS_ONLY_IF = {"args.upload_model", "args.checkpoint_every or args.resume"}


def imports_cleanrl_utils(node):
    """Whether `node` is an import statement that brings in cleanrl_utils or a module of it."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "cleanrl_utils"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "cleanrl_utils" for alias in node.names)
    return False


@pytest.mark.parametrize("script", TABLE, ids=str)
def test_cleanrl_utils_is_imported_only_for_the_upload_and_checkpoints(script):
    """A script copied alone trains, saves, evaluates and records video without this repository: every import of
    cleanrl_utils in it sits under an `if` on the upload's or the checkpoints' flags. The tiny runs cannot show it
    for saving and evaluating, since the upload, which needs the package, is in the same run."""
    tree = ast.parse((SCRIPTS / script.file).read_text())
    guards = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            guards[child] = ast.unparse(node.test) if isinstance(node, ast.If) else guards.get(node)
    imports = [node for node in ast.walk(tree) if imports_cleanrl_utils(node)]
    assert imports, "the upload imports cleanrl_utils"
    for node in imports:
        assert guards.get(node) in IMPORTS_CLEANRL_UTILS_ONLY_IF, f"line {node.lineno}: {ast.unparse(node)}"


# a package each script imports in its guarded block at the top, and the install hint its error line gives: the one
# form that works from a fresh clone for every extra (procgen's and microrts's need setup.sh's no-deps step)
SETUP = "run `bash scripts/setup.sh {}` in a clone of this project"
MISSING_EXTRAS = {
    "ppo_atari": ("cv2", SETUP.format("atari")),
    "ppo_atari_lstm": ("cv2", SETUP.format("atari")),
    "ppo_atari_multigpu": ("cv2", SETUP.format("atari")),
    "ppo_atari_envpool": ("envpool", SETUP.format("envpool")),
    "ppo_atari_envpool_torchcompile": ("envpool", SETUP.format("envpool")),
    "ppo_atari_envpool_xla_jax": ("flax", SETUP.format("jax")),
    "ppo_atari_envpool_xla_jax_scan": ("envpool", SETUP.format("envpool")),
    "ppo_procgen": ("procgen", SETUP.format("procgen")),
    "ppo_pettingzoo_ma_atari": ("supersuit", SETUP.format("pettingzoo")),
    "ppo_multidiscrete": ("gym_microrts_gymnasium", SETUP.format("microrts")),
    "ppo_multidiscrete_mask": ("gym_microrts_gymnasium", SETUP.format("microrts")),
    "ppo_continuous_action_isaacgym": ("isaacgym_tasks_newton", SETUP.format("newton")),
}


@pytest.mark.parametrize("script", [s for s in TABLE if s.name in MISSING_EXTRAS], ids=str)
def test_a_missing_optional_dependency_is_one_line_and_exit_2(script, tmp_path, capfd):
    """The import guard speaks as every other error does: `{script}: error:`, the missing package, the extra."""
    package, hint = MISSING_EXTRAS[script.name]
    work = tmp_path / "work"
    work.mkdir()
    args = ["--total-timesteps", "0"]  # were the package found, the argument check would stop it with another error
    proc = run_stopped_early(script, args, work, capfd, hidden=[package])
    assert_user_error(proc, f"{script.file}: error: {package} is missing", hint)
    assert list(work.iterdir()) == []


# ---- tiny runs ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=TABLE, ids=str)
def script(request):
    return request.param


@pytest.fixture(scope="module")
def copied_run(script, tmp_path_factory):
    """The tiny run as a user runs a script copied alone into an empty folder, every flag spelled with underscores
    (as published commands often are), with --save-model, --upload-model --hf-entity my-org (to the stand-in Hub:
    cleanrl_utils, which only the upload and checkpoints import, comes from this repository) and, where offered,
    --capture-video. Returns (its folder, the finished process, the upload's record)."""
    tmp_path = tmp_path_factory.mktemp(f"{script}_copied")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SCRIPTS / script.file, alone / script.file)
    env, record = fake_hub_env(tmp_path, **script.env)
    args = [
        *script.args,
        "--save-model",
        "--upload-model",
        "--hf-entity",
        "my-org",
        *["--capture-video"] * script.video,
    ]
    proc = run_script(alone / script.file, *underscored(args), cwd=alone, env=env)
    return alone, proc, record


@pytest.fixture(scope="module")
def repeated_run(script):
    """The same training from this repository's cleanrl/, without saving, evaluating or recording, and with
    cleanrl_utils nowhere to be imported (helpers.plain_run, which other test files read too): a second run of the
    same seed, for test_same_seed_logs_identical_scalars. Returns its run folder."""
    return plain_run(script.file, *script.args, **script.env)


def test_copied_alone_trains_logs_every_metric_saves_and_evaluates(script, copied_run):
    cwd, proc, _ = copied_run
    run_dir = only_run_dir(cwd)
    prefix = f"{script.env_id}__{script.name}__1__"  # the underscore flags took effect
    scalars = check_smoke_run(run_dir, prefix, script.sps_steps, proc.stdout, script.metrics)
    assert (run_dir / f"{script.name}.cleanrl_model").is_file()
    assert [step for step, _ in scalars["eval/episodic_return"]] == list(range(10))
    assert len([line for line in proc.stdout.splitlines() if line.startswith("eval_episode=")]) == 10
    if script.video:
        assert video_files(cwd, run_dir.name) and video_files(cwd, f"{run_dir.name}-eval")


def test_upload_holds_the_run_and_its_model_card(script, copied_run):
    _, _, record = copied_run
    uploaded = json.loads(record.read_text())
    assert uploaded["created"] == uploaded["uploaded"] == f"my-org/{script.env_id}-{script.name}-seed1"
    files = set(uploaded["files"])
    assert {f"{script.name}.cleanrl_model", script.file, "README.md"} <= files
    assert any(name.startswith("events.out.tfevents") for name in files)
    assert ("replay.mp4" in files) == script.video
    card = uploaded["card"]
    assert script.env_id in card and script.file in card and "mean_reward" in card
    assert f"--exp-name {script.name} --env-id {script.env_id} --hf-entity my-org" in card


def test_same_seed_logs_identical_scalars(copied_run, repeated_run):
    """Same seed, same arguments (on the CPU, with --torch-deterministic where the script has it): every scalar of
    training is the same, whether the run saves, evaluates and records video or not, apart from the speed (and the
    JAX scripts' speed of each iteration, as the reference logs it, and the compiled siblings' compile time). For
    the siblings this is the promise they keep: same seed, same machine, the same numbers, though not their
    parents'."""
    run_dir = only_run_dir(copied_run[0])
    evaluation = [tag for tag in read_scalars(run_dir) if tag.startswith("eval/")]
    speed = ["charts/SPS", "charts/SPS_update", "charts/compile_seconds"]
    assert_same_scalars(run_dir, repeated_run, ignore=(*speed, *evaluation))


def test_enjoy_replays_the_saved_model(script, copied_run, tmp_path):
    """python -m cleanrl_utils.enjoy plays the saved model with the script's own evaluate."""
    model = only_run_dir(copied_run[0]) / f"{script.name}.cleanrl_model"
    args = ["--exp-name", script.name, "--env-id", script.env_id, "--model-path", model, "--eval-episodes", "2"]
    proc = run_python("-m", "cleanrl_utils.enjoy", *args, cwd=tmp_path, env=script_run_env(script, ROOT), timeout=300)
    lines = proc.stdout.splitlines()
    episodes = [line.split(",")[0] for line in lines if line.startswith("eval_episode=")]
    assert episodes == ["eval_episode=0", "eval_episode=1"]
    assert lines[-1].startswith("episodic return over 2 episodes: ")
