"""cleanrl_utils/tuner.py: a hyperparameter study of a training script with Optuna, run here, resumed, shared by
workers, pruned, and refused with one line when its settings are wrong."""

import shlex
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import optuna
import pytest
from helpers import ROOT, assert_user_error, run_python, run_script, script_env

from cleanrl_utils import scripts, tuner
from cleanrl_utils.report import find_runs, load_run

# Stands in for a training script: logs an episode returning --quality x 100 per iteration, fast (no training).
STANDIN = ROOT / "tests" / "tuner_standin" / "train.py"
TUNER_ENV = script_env(PYTHONPATH=str(ROOT))
COMPLETE, PRUNED, FAIL = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL

TINY_PPO_SPACE = """
[search]
learning-rate = { log-uniform = [0.0003, 0.003] }
num_minibatches = { categorical = [2, 4] }

[fixed]
total-timesteps = 512
num-envs = 2
num-steps = 128

[[enqueue]]
learning-rate = 0.001
num-minibatches = 4
"""


def tuner_cli(*args, cwd, env=TUNER_ENV):
    return run_python("-m", "cleanrl_utils.tuner", *args, cwd=cwd, env=env, check=False, timeout=300)


def trials(storage, study_name, states=None):
    return optuna.load_study(study_name=study_name, storage=storage).get_trials(states=states)


@pytest.mark.multicore
def test_a_study_runs_two_workers_then_resumes_where_it_stopped(tmp_path):
    """ppo.py itself, on a tiny budget: two trials at a time on SQLite, then the same study asked for one more."""
    (tmp_path / "space.toml").write_text(TINY_PPO_SPACE)
    args = ["--search-space", "space.toml", "--study-name", "tiny", "--last-episodes", "10", "--fixed-args=--no-cuda"]
    args += ["--poll-seconds", "1", "--seed", "1"]
    proc = tuner_cli(*args, "--num-trials", "2", "--workers", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    storage = f"sqlite:///{tmp_path}/tuning/tiny.db"
    first = trials(storage, "tiny")
    assert [t.state for t in first] == [COMPLETE, COMPLETE]
    assert len({t.user_attrs["worker"] for t in first}) == 2, "the enqueued trial alone first, then a worker thread"
    assert first[0].params == {"learning-rate": 0.001, "num-minibatches": 4}, "the [[enqueue]] values come first"
    assert "0 of 2 trials finished; 2 to run, 2 at a time" in proc.stdout
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if " | best " in line) == [
        "trial 0",
        "trial 1",
    ]
    for trial in first:  # the score is the run's average of its last 10 episodic returns, as logged
        [(folder, env_id, exp_name, seed)] = find_runs(Path(trial.user_attrs["folder"]) / "runs", [], [])
        assert (env_id, exp_name, seed) == ("CartPole-v1", "ppo", 1)
        logged = load_run(folder, env_id, exp_name, seed, "charts/episodic_return")
        assert trial.value == pytest.approx(np.mean(logged.values[-10:]))
    best = max(first, key=lambda t: t.value)
    command = "python cleanrl/ppo.py --total-timesteps 512 --num-envs 2 --num-steps 128 --no-cuda "
    command += f"--learning-rate {best.params['learning-rate']!r} --num-minibatches {best.params['num-minibatches']} "
    command += "--env-id CartPole-v1"
    assert f"tuner: best trial {best.number}: score {best.value:.4f}" in proc.stdout
    assert f"  {command}\n" in proc.stdout
    for name in ("tiny_history.png", "tiny_importances.png"):
        assert (tmp_path / "tuning" / name).read_bytes()[:4] == b"\x89PNG"

    proc = tuner_cli(*args, "--num-trials", "3", "--no-plots", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 of 3 trials finished; 1 to run, 1 at a time" in proc.stdout
    assert [(t.number, t.state) for t in trials(storage, "tiny")] == [(0, COMPLETE), (1, COMPLETE), (2, COMPLETE)]
    assert "trial 2: score " in proc.stdout
    assert trials(storage, "tiny")[2].params != first[0].params, "a resumed study does not enqueue them again"


SHARED_SPACE = """
[search]
quality = { uniform = [0.0, 1.0] }
[fixed]
total-timesteps = 400
step-seconds = 0.15
"""


@pytest.mark.multicore
def test_workers_started_by_the_benchmark_share_a_journal_file(tmp_path):
    """cleanrl_utils.benchmark starts two tuner processes (appending --env-id and --seed, as it does to every
    command) against one journal file: both run trials of one study, each scored over two environments."""
    (tmp_path / "space.toml").write_text(SHARED_SPACE)
    command = [sys.executable, "-m", "cleanrl_utils.tuner", "--script", str(STANDIN), "--search-space", "space.toml"]
    command += ["--env-ids", "CartPole-v1", "Acrobot-v1", "--target-scores", "0,100", "-100,200"]
    command += ["--storage", "tuning/shared.log", "--study-name", "shared", "--num-trials", "4"]
    command += ["--poll-seconds", "0.1", "--no-plots"]
    args = ["--env-ids", "CartPole-v1", "--num-seeds", "2", "--workers", "2", "--log-dir", "logs"]
    proc = run_script(
        ROOT / "cleanrl_utils" / "benchmark.py", *args, "--command", shlex.join(command), cwd=tmp_path, env=TUNER_ENV
    )
    assert "summary: 2 of 2 runs succeeded" in proc.stdout, proc.stdout
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "tuning/shared.log"))
    )
    shared = trials(storage, "shared")
    assert all(t.state == COMPLETE for t in shared)
    assert 4 <= len(shared) <= 5, "a worker may finish the trial it had started when the other reached 4"
    assert len({t.user_attrs["worker"].split(":")[1] for t in shared}) == 2, "trials from both processes"
    for trial in shared:  # CartPole-v1 scores quality x 100 in 0..100, Acrobot-v1 the same in -100..200
        quality = trial.params["quality"]
        assert trial.value == pytest.approx(np.mean([quality, (quality * 100 + 100) / 300]))
        assert trial.user_attrs["scores"] == pytest.approx(
            {"CartPole-v1 seed 1": quality * 100, "Acrobot-v1 seed 1": quality * 100}
        )


def test_the_pruner_stops_a_bad_trial_while_it_trains(tmp_path, capsys):
    """From Python: a good trial first, then a bad and slow one, stopped at its first report (10% of its steps)
    instead of training 10 seconds."""
    space = {"search": {"quality": {"uniform": [0.0, 1.0]}, "step-seconds": {"categorical": [0.0, 1.0]}}}
    space["fixed"] = {"total-timesteps": 1000, "num-steps": 100}
    study = tuner.Tuner(
        script=str(STANDIN),
        search_space=space,
        storage=f"sqlite:///{tmp_path}/pruning.db",
        runs_dir=str(tmp_path / "runs"),
        num_trials=2,
        pruner_startup_trials=1,
        pruner_warmup_reports=0,
        poll_seconds=0.05,
        plots=False,
    )
    study.study.enqueue_trial({"quality": 0.9, "step-seconds": 0.0})
    study.study.enqueue_trial({"quality": 0.1, "step-seconds": 1.0})
    start = time.time()
    good, bad = study.run().get_trials()
    assert time.time() - start < 8, "the bad run was stopped, not waited for"
    assert good.state == COMPLETE and good.value == pytest.approx(90)
    assert sorted(good.intermediate_values) == list(range(10)), "one report per tenth of the run"
    assert bad.state == PRUNED
    assert bad.user_attrs["pruned"] == "CartPole-v1 seed 1 at 10% of its steps, score 10"
    assert bad.intermediate_values == {0: pytest.approx(10)}
    log = (Path(bad.user_attrs["folder"]) / "CartPole-v1__seed1.log").read_text()
    assert log.count("\nstep ") < 10, "the run was killed"
    assert "trial 1: pruned (CartPole-v1 seed 1 at 10% of its steps, score 10)" in capsys.readouterr().out


def test_failed_runs_fail_their_trials_and_three_in_a_row_stop(tmp_path):
    (tmp_path / "space.toml").write_text("[search]\nquality = { uniform = [0.0, 1.0] }\n[fixed]\nexit-code = 3\n")
    args = ["--script", STANDIN, "--search-space", "space.toml", "--num-trials", "5", "--poll-seconds", "0.1"]
    proc = tuner_cli(*args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = trials(f"sqlite:///{tmp_path}/tuning/train_CartPole-v1.db", "train_CartPole-v1")
    assert [t.state for t in failed] == [FAIL] * 3
    assert "trial 0: FAILED: CartPole-v1 seed 1 exited with status 3: train.py: error: asked to fail" in proc.stdout
    assert "tuner: 3 trials in a row failed: stopping" in proc.stderr
    assert "no trial is complete yet" in proc.stdout


def test_track_logs_each_trial_to_weights_and_biases_offline(tmp_path):
    (tmp_path / "space.toml").write_text("[search]\nquality = { uniform = [0.0, 1.0] }\n[fixed]\nverbose = true\n")
    args = ["--script", STANDIN, "--search-space", "space.toml", "--num-trials", "1", "--poll-seconds", "0.1"]
    proc = tuner_cli(*args, "--track", "--study-name", "tracked", "--no-plots", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = (tmp_path / "tuning" / "tracked" / "wandb").glob("offline-run-*")
    [record] = run.glob("*.wandb")
    logged = record.read_bytes()
    for name in (b"tracked_trial0", b"quality", b"tuner/running_score", b"tuner/score", b"tuner/return/CartPole-v1"):
        assert name in logged, name
    [trial] = trials(f"sqlite:///{tmp_path}/tuning/tracked.db", "tracked")
    assert "--verbose" in (Path(trial.user_attrs["folder"]) / "CartPole-v1__seed1.log").read_text().splitlines()[0]


def test_environments_are_normalised_into_one_score():
    targets = tuner.parse_target_scores(["0,500", "-500,0"], ["CartPole-v1", "Acrobot-v1"])
    assert targets == {"CartPole-v1": (0.0, 500.0), "Acrobot-v1": (-500.0, 0.0)}
    scores = [tuner.normalised(250.0, targets["CartPole-v1"]), tuner.normalised(-100.0, targets["Acrobot-v1"])]
    assert scores == pytest.approx([0.5, 0.8])
    assert tuner.trial_score(scores) == pytest.approx(0.65)
    assert tuner.parse_target_scores([], ["CartPole-v1"]) == {"CartPole-v1": None}
    assert tuner.normalised(250.0, None) == 250.0, "one environment without a range: its own score"


def test_checkpoints_and_running_scores():
    assert tuner.checkpoints(1000, 4) == [250, 500, 750, 1000]
    assert tuner.checkpoints(None, 3) == [-1, -1, -1], "an unknown length: reports at the end only"
    steps, values = np.array([100.0, 300.0, 600.0]), np.array([1.0, 2.0, 6.0])
    assert tuner.score_up_to(steps, values, 50, 100) is None
    assert tuner.score_up_to(steps, values, 300, 100) == 1.5
    assert tuner.score_up_to(steps, values, -1, 2) == 4.0, "the last 2 values of all"


def test_search_space_flags_become_the_scripts_command_line():
    flags = {"learning_rate": "float", "anneal_lr": "bool", "num_steps": "int", "target_kl": "float | None"}
    flags |= {"cuda": "bool", "num_envs": "int"}
    space = {
        "search": {
            "learning_rate": {"log-uniform": [1e-4, 1e-2]},
            "anneal-lr": {"categorical": [True, False]},
            "num-steps": {"int": [16, 128], "step": 16},
            "target-kl": {"categorical": [0.01, "None"]},
        }
    }
    space["fixed"] = {"num_envs": 8, "cuda": True}
    parsed = tuner.read_search_space(space, "--no-cuda", flags, "ppo.py")
    assert parsed.fixed_words == ["--num-envs", "8", "--no-cuda"], "--fixed-args has the last word"
    assert list(parsed.distributions) == ["learning-rate", "anneal-lr", "num-steps", "target-kl"]
    assert parsed.distributions["num-steps"] == optuna.distributions.IntDistribution(16, 128, step=16)
    assert tuner.flag_words("anneal-lr", False) == ["--no-anneal-lr"]
    assert tuner.flag_words("learning_rate", 0.1 + 0.2) == ["--learning-rate", "0.30000000000000004"]
    assert tuner.flag_words("device-ids", [0, 1]) == ["--device-ids", "0", "1"]


@pytest.mark.parametrize("path", sorted((ROOT / "benchmark" / "tune").glob("*.toml")), ids=lambda path: path.stem)
def test_each_search_space_in_benchmark_fits_its_script(path):
    """benchmark/tune/ppo_lunarlander.toml searches ppo.py: a file is named after its script, and its flags, values
    and [[enqueue]] tables read against that script's flags, as the tuner reads them."""
    matches = [name for name in scripts.script_names() if path.stem.startswith(f"{name}_")]
    assert matches, f"{path.name} does not start with a script's name"
    script = max(matches, key=len)
    flags = scripts.script_flags(scripts.SCRIPTS / f"{script}.py")
    space = tuner.read_search_space(path, "", flags, f"cleanrl/{script}.py")
    assert space.distributions, f"{path.name} searches nothing"


BAD_SPACES = {
    "unknown_flag": (
        "[search]\nlearning-rat = { uniform = [0.1, 0.2] }\n",
        "learning-rat is not a flag of cleanrl/ppo.py",
    ),
    "zero_log": ("[search]\nlearning-rate = { log-uniform = [0, 1] }\n", "log-uniform needs 0 < low"),
    "no_distribution": ("[search]\nlearning-rate = { beta = [1, 2] }\n", "name one distribution of log-uniform"),
    "float_int": ("[search]\nnum-steps = { int = [1.5, 3] }\n", "int takes two whole numbers"),
    "reversed": ("[search]\ngamma = { uniform = [0.99, 0.9] }\n", "uniform needs low < high"),
    "bad_step": ("[search]\nnum-steps = { int = [16, 130], step = 16 }\n", "not a whole number of steps of 16"),
    "bool_type": ("[search]\nanneal-lr = { categorical = [1, 0] }\n", "1 is no value for a flag of type bool"),
    "seed": ("[search]\nseed = { int = [1, 9] }\n", "--seed is set by the tuner"),
    "empty": ("[fixed]\nnum-envs = 2\n", "nothing to search"),
    "fixed_twice": ("[search]\ngamma = { uniform = [0.9, 0.99] }\n[fixed]\ngamma = 0.9\n", "gamma is both searched"),
    "syntax": ("[search]\ngamma = { uniform = [0.9, 0.99 }\n", "cannot read search space"),
    "enqueue_outside": (
        "[search]\ngamma = { uniform = [0.9, 0.99] }\n[[enqueue]]\ngamma = 0.5\n",
        "[[enqueue]] 1: gamma = 0.5 is outside its distribution",
    ),
    "enqueue_unsearched": (
        "[search]\ngamma = { uniform = [0.9, 0.99] }\n[[enqueue]]\ngae-lambda = 0.9\n",
        "[[enqueue]] 1: gae-lambda is not a flag of [search]",
    ),
}
SPACE = "[search]\ngamma = { uniform = [0.9, 0.99] }\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        *((["--search-space", f"{{inputs}}/{name}.toml"], fragment) for name, (_, fragment) in BAD_SPACES.items()),
        (["--search-space", "{inputs}/missing.toml"], "no search space file"),
        (["--fixed-args=--no-cuda --learnin-rate 1"], "--fixed-args: learnin-rate is not a flag of cleanrl/ppo.py"),
        (["--env-ids", "CartPole-v1", "Acrobot-v1", "--target-scores", "0,500"], "gives 1 range(s) for 2 environment"),
        (["--env-ids", "CartPole-v1", "Acrobot-v1"], "several environments need --target-scores"),
        (["--target-scores", "0;500"], "'0;500' is not LOW,HIGH"),
        (["--env-id", "Acrobot-v1"], "--env-id Acrobot-v1 is not one of --env-ids"),
        (["--num-trials", "0"], "--num-trials must be at least 1, got 0"),
        (["--storage", "tuning/study.db"], "is neither a database URL"),
        (["--storage", "sqlite:///{inputs}/blocker/study.db"], "cannot open --storage sqlite:///"),
        (["--storage", "sqlite:///{inputs}/new/{{study_name}}.db", "--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(tmp_path, monkeypatch, capfd, args, fragment):
    inputs, work = tmp_path / "inputs", tmp_path / "work"
    inputs.mkdir(), work.mkdir()
    for name, (text, _) in BAD_SPACES.items():
        (inputs / f"{name}.toml").write_text(text)
    (inputs / "space.toml").write_text(SPACE)
    (inputs / "blocker").write_text("a file where the storage wants a folder")
    before = sorted(inputs.iterdir())
    monkeypatch.chdir(work)
    code = tuner.main(["--search-space", str(inputs / "space.toml"), *(a.format(inputs=inputs) for a in args)])
    assert_user_error(SimpleNamespace(returncode=code, stderr=capfd.readouterr().err), "tuner: error:", fragment)
    assert list(work.iterdir()) == [] and sorted(inputs.iterdir()) == before, "nothing may be written"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--script", "nope"], "no script 'nope': give a name in cleanrl/ (ppo, ppo_atari,"),
        (["--storage", "postgresql://tuner@localhost:1/studies"], "cannot open --storage postgresql://"),
    ],
)
def test_bad_input_from_the_command_line(tmp_path, args, fragment):
    (tmp_path / "space.toml").write_text(SPACE)
    proc = tuner_cli("--search-space", "space.toml", *args, cwd=tmp_path)
    assert_user_error(proc, "tuner: error:", fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["space.toml"], "nothing may be written"


def test_a_study_made_with_another_search_space_is_refused(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "space.toml").write_text(SPACE)
    (tmp_path / "other.toml").write_text("[search]\ngamma = { uniform = [0.9, 0.999] }\n")
    tuner.Tuner(search_space="space.toml", study_name="mine")  # creates the study, runs nothing
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code = tuner.main(["--search-space", "other.toml", "--study-name", "mine"])
    message = "study 'mine' in sqlite:///tuning/mine.db was made with different search space: give another --study-name"
    assert_user_error(SimpleNamespace(returncode=code, stderr=capfd.readouterr().err), "tuner: error:", message)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == made, "no run, no plot"
    assert trials("sqlite:///tuning/mine.db", "mine") == []
