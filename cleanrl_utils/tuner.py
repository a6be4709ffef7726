"""Searches a training script's hyperparameters with Optuna: each trial trains the script unchanged, as a
subprocess, on every environment and seed, and scores the run by its TensorBoard logs.

    python -m cleanrl_utils.tuner --script ppo --env-ids CartPole-v1 Acrobot-v1 --target-scores 0,500 -500,0 \\
        --search-space benchmark/tune/ppo_classic.toml --num-seeds 2 --num-trials 50
    python -m cleanrl_utils.tuner ... --workers 2                        # two trials at a time here
    python -m cleanrl_utils.tuner ... --storage tuning/study.log         # a journal file other processes share
    python -m cleanrl_utils.tuner ... --storage postgresql://user@host/db   # workers on several machines

A run's score is the average of its last --last-episodes values of --metric, normalised by its environment's
score range, (score - low) / (high - low); a trial's score is the mean over its runs (environments and seeds).
The study lives in --storage: the same command again goes on where it stopped. The search space is a TOML file:

    [search]
    learning-rate = { log-uniform = [0.0003, 0.003] }
    num-minibatches = { categorical = [1, 2, 4] }
    update-epochs = { int = [1, 8] }              # also: step = 2, or log = true
    vf-coef = { uniform = [0.0, 1.0] }
    [fixed]                                       # passed to every run
    total-timesteps = 100000

In Python: `study = tune(script="ppo", env_ids=[...], search_space="space.toml", num_trials=20)`, or `Tuner(...)`.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import tomllib
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import tyro

from cleanrl_utils.benchmark import child_environment, duration, expand_runs, new_folder, usable_cores
from cleanrl_utils.report import event_reader, find_runs, load_run, run_score
from cleanrl_utils.scripts import SCRIPTS, error_line, script_flags, script_names

try:
    import optuna
except ModuleNotFoundError:  # reported by Tuner as one line
    optuna = None

DISTRIBUTIONS = ("log-uniform", "uniform", "int", "categorical")
SETTINGS_ATTR = "cleanrl_tuner_settings"
RESERVED = {"env_id": "--env-ids", "seed": "--num-seeds and --start-seed"}
FAILURES_IN_A_ROW = 3


@dataclass
class Args:
    search_space: str
    """the search space: a TOML file with a [search] table (flags and distributions) and a [fixed] one"""
    script: str = "ppo"
    """the training script: a name in cleanrl/ (ppo, ppo_atari, ...) or the path of a .py file"""
    env_ids: list[str] = field(default_factory=lambda: ["CartPole-v1"])
    """the environments each trial trains on; their normalised scores are averaged into one"""
    target_scores: list[str] = field(default_factory=list)
    """per environment LOW,HIGH (0,500 -500,0): a score x counts as (x-LOW)/(HIGH-LOW); none: raw scores"""
    num_seeds: int = 1
    """how many seeds each trial trains on, per environment"""
    start_seed: int = 1
    """the first seed; the others follow it"""
    fixed_args: str = ""
    """flags for every run, after [fixed]; written with =: --fixed-args="--total-timesteps 100000 --no-cuda\""""
    num_trials: int = 20
    """the trials the study should hold: finished ones (complete or pruned) already in it count, failed not"""
    metric: str = "charts/episodic_return"
    """the scalar a run is scored by (higher is better)"""
    last_episodes: int = 100
    """a run's score is the average of its last this many values of --metric (as in cleanrl_utils.report)"""
    study_name: str | None = None
    """the study's name in the storage (None: the script and environments, e.g. ppo_CartPole-v1)"""
    storage: str = "sqlite:///tuning/{study_name}.db"
    """a database URL (sqlite:///x.db, postgresql://user:password@host/db) or a journal file ending in .log"""
    runs_dir: str = "tuning/{study_name}"
    """where each trial's runs (TensorBoard logs, output) go, one folder per trial"""
    workers: int = 1
    """how many trials run at a time in this process (threads, each training one run at a time)"""
    threads_per_run: int | None = None
    """threads per run, as OMP_NUM_THREADS and the like where unset (None: the cores / --workers, at least 1)"""
    pruner: Literal["median", "none"] = "median"
    """median: stop a trial whose running score falls below the median of earlier trials' at the same point"""
    pruner_startup_trials: int = 5
    """the pruner stops no trial until the study has this many complete trials"""
    pruner_warmup_reports: int = 5
    """the pruner stops no trial before it has reported this many intermediate scores"""
    reports_per_run: int = 10
    """intermediate scores reported per run, at evenly spaced points of its steps"""
    poll_seconds: float = 10.0
    """how often a running run's TensorBoard logs are read for intermediate scores"""
    sampler: Literal["tpe", "random"] = "tpe"
    """how trials choose their values: Optuna's TPE (random for its first 10 trials) or random search"""
    seed: int | None = None
    """the sampler's seed (None: random); workers want their own, as cleanrl_utils.benchmark's --seed S gives"""
    env_id: str | None = None
    """ignored, for cleanrl_utils.benchmark, which appends --env-id ENV: ENV must be one of --env-ids"""
    plots: bool = True
    """draw the optimisation history and the parameter importances as PNG files (needs matplotlib)"""
    plot_dir: str | None = None
    """where the plots go (None: beside the storage file; tuning/ for a database server)"""
    track: bool = False
    """log each finished trial (its values, running and final scores) as a Weights & Biases run"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""


class UserError(ValueError):
    """A mistake in the settings: reported as one line on stderr with exit status 2."""


class RunFailed(Exception):
    """A training run that did not end well: its trial fails and the study goes on."""


# ---- the search space -----------------------------------------------------------------------------------------


def flag_words(name: str, value) -> list[str]:
    """The command-line words giving `value` to the flag `name` (hyphens or underscores): a bool as --name or
    --no-name, a list as --name v1 v2, a float written so that it reads back the same."""
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return [f"--{flag}" if value else f"--no-{flag}"]
    values = value if isinstance(value, list) else [value]
    return [f"--{flag}", *(repr(v) if isinstance(v, float) else str(v) for v in values)]


def accepts(annotation: str, value) -> bool:
    """Whether a field annotated `annotation` (as written) takes `value`; annotations other than a plain int,
    float, bool or str (each maybe `| None`) take anything."""
    optional = annotation.replace(" ", "").endswith("|None")
    base = annotation.replace(" ", "").removesuffix("|None")
    if optional and value == "None":
        return True
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    return True


def parse_range(kind: str, value, where: str) -> tuple:
    if not (isinstance(value, list) and len(value) == 2):
        raise UserError(f"{where}: {kind} takes [low, high], got {value!r}")
    number = int if kind == "int" else (int, float)
    if not all(isinstance(v, number) and not isinstance(v, bool) for v in value):
        raise UserError(f"{where}: {kind} takes two {'whole numbers' if kind == 'int' else 'numbers'}, got {value!r}")
    low, high = value
    if not low < high:
        raise UserError(f"{where}: {kind} needs low < high, got {value!r}")
    return low, high


def parse_distribution(spec, where: str):
    """An Optuna distribution from one line of [search], e.g. { log-uniform = [1e-4, 1e-2] }."""
    if not isinstance(spec, dict):
        raise UserError(f"{where}: give a table such as {{ uniform = [0.0, 1.0] }}, got {spec!r}")
    kinds = [key for key in spec if key in DISTRIBUTIONS]
    if len(kinds) != 1:
        raise UserError(f"{where}: name one distribution of {', '.join(DISTRIBUTIONS)}, got {sorted(spec)}")
    kind = kinds[0]
    unknown = sorted(set(spec) - {kind} - ({"log", "step"} if kind == "int" else set()))
    if unknown:
        raise UserError(f"{where}: {kind} takes no {', '.join(unknown)}")
    value = spec[kind]
    if kind == "categorical":
        if not (isinstance(value, list) and value):
            raise UserError(f"{where}: categorical takes a list of choices, got {value!r}")
        if not all(isinstance(v, (str, int, float, bool)) for v in value):
            raise UserError(f"{where}: categorical choices must be strings, numbers or booleans, got {value!r}")
        if len({json.dumps(v) for v in value}) < len(value):
            raise UserError(f"{where}: categorical names a choice twice: {value!r}")
        return optuna.distributions.CategoricalDistribution(value)
    low, high = parse_range(kind, value, where)
    if kind == "log-uniform" and low <= 0:
        raise UserError(f"{where}: log-uniform needs 0 < low, got {value!r}")
    if kind != "int":
        return optuna.distributions.FloatDistribution(low, high, log=kind == "log-uniform")
    log, step = spec.get("log", False), spec.get("step", 1)
    if not isinstance(log, bool):
        raise UserError(f"{where}: log takes true or false, got {log!r}")
    if not (isinstance(step, int) and not isinstance(step, bool) and step >= 1):
        raise UserError(f"{where}: step takes a whole number of at least 1, got {step!r}")
    if log and (step != 1 or low < 1):
        raise UserError(f"{where}: int with log = true needs low >= 1 and no step")
    if (high - low) % step:
        raise UserError(f"{where}: [{low}, {high}] is not a whole number of steps of {step}")
    return optuna.distributions.IntDistribution(low, high, log=log, step=step)


def distribution_values(distribution) -> list:
    """Example values a distribution gives, to check them against a field's type."""
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return list(distribution.choices)
    return [distribution.low, distribution.high]


@dataclass
class SearchSpace:
    distributions: dict
    """flag (with hyphens) -> Optuna distribution, in the file's order"""
    fixed_words: list[str]
    """the flags every run gets: the [fixed] table's, then --fixed-args'"""
    enqueued: list[dict] = field(default_factory=list)
    """values to try first, before the sampler chooses ([[enqueue]] tables): flag (with hyphens) -> value"""


def check_flag(name: str, flags: dict[str, str], script: str, where: str) -> str:
    """`name` with hyphens, once it is known to be a flag of the script the tuner may set."""
    field_name = name.replace("-", "_")
    if field_name in RESERVED:
        raise UserError(f"{where}: --{name.replace('_', '-')} is set by the tuner: use {RESERVED[field_name]}")
    if field_name not in flags:
        raise UserError(f"{where}: {name} is not a flag of {script}")
    return field_name.replace("_", "-")


def read_search_space(source, fixed_args: str, flags: dict[str, str], script: str) -> SearchSpace:
    """The search space from a TOML file (or, in Python, the same tables as a dict), checked against the flags
    of the script (`flags`: field name -> annotation, as script_flags gives them)."""
    if isinstance(source, dict):
        where, tables = "search space", source
    else:
        where = f"search space {source}"
        try:
            tables = tomllib.loads(Path(source).read_text())
        except FileNotFoundError:
            raise UserError(f"no search space file {source}: see benchmark/tune/ppo_classic.toml") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise UserError(f"cannot read {where}: {error_line(e)}") from None
    unknown = sorted(set(tables) - {"search", "fixed", "enqueue"})
    if unknown:
        raise UserError(f"{where}: unknown table(s) {', '.join(unknown)}; it has [search], [fixed] and [[enqueue]]")
    search, fixed = tables.get("search", {}), tables.get("fixed", {})
    if not isinstance(search, dict) or not search:
        raise UserError(f"{where}: nothing to search: give flags in a [search] table")
    if not isinstance(fixed, dict):
        raise UserError(f"{where}: [fixed] must be a table of flags and values")
    distributions = {}
    for name, spec in search.items():
        flag = check_flag(name, flags, script, f"{where}: [search]")
        if flag in distributions:
            raise UserError(f"{where}: [search] names {flag} twice")
        distribution = parse_distribution(spec, f"{where}: [search] {name}")
        annotation = flags[flag.replace("-", "_")]
        wrong = [v for v in distribution_values(distribution) if not accepts(annotation, v)]
        if wrong:
            raise UserError(f"{where}: [search] {name}: {wrong[0]!r} is no value for a flag of type {annotation}")
        distributions[flag] = distribution
    try:
        extra = shlex.split(fixed_args)
    except ValueError as e:
        raise UserError(f"--fixed-args cannot be split into words ({e}): check its quotes") from None
    overridden = set()
    for word in extra:
        if word.startswith("--"):
            name = word[2:].split("=", 1)[0]
            is_negated_bool = name[:3] in ("no-", "no_") and flags.get(name[3:].replace("-", "_")) == "bool"
            flag = check_flag(name[3:] if is_negated_bool else name, flags, script, "--fixed-args")
            if flag in distributions:
                raise UserError(f"--fixed-args: {flag} is also in the search space")
            overridden.add(flag)
    words = []
    for name, value in fixed.items():
        flag = check_flag(name, flags, script, f"{where}: [fixed]")
        if flag in distributions:
            raise UserError(f"{where}: {flag} is both searched and fixed")
        annotation = flags[flag.replace("-", "_")]
        if not all(accepts(annotation, v) for v in (value if isinstance(value, list) else [value])):
            raise UserError(f"{where}: [fixed] {name}: {value!r} is no value for a flag of type {annotation}")
        if flag not in overridden:  # --fixed-args has the last word
            words += flag_words(flag, value)
    return SearchSpace(distributions, words + extra, read_enqueued(tables.get("enqueue", []), distributions, where))


def read_enqueued(tables, distributions: dict, where: str) -> list[dict]:
    """The [[enqueue]] tables: each names searched flags and values inside their distributions, to try first."""
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise UserError(f"{where}: enqueue must be tables, [[enqueue]], of searched flags and values")
    enqueued = []
    for number, table in enumerate(tables, 1):
        params = {}
        for name, value in table.items():
            flag = name.replace("_", "-")
            if flag not in distributions:
                raise UserError(f"{where}: [[enqueue]] {number}: {name} is not a flag of [search]")
            distribution = distributions[flag]
            try:
                inside = distribution._contains(distribution.to_internal_repr(value))
            except (ValueError, TypeError):
                inside = False
            if not inside:
                raise UserError(f"{where}: [[enqueue]] {number}: {name} = {value!r} is outside its distribution")
            params[flag] = value
        enqueued.append(params)
    return enqueued


def suggest(trial, name: str, distribution):
    """The trial's value for `name`, drawn from `distribution` by the study's sampler."""
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return trial.suggest_categorical(name, distribution.choices)
    if isinstance(distribution, optuna.distributions.IntDistribution):
        return trial.suggest_int(
            name, distribution.low, distribution.high, step=distribution.step, log=distribution.log
        )
    return trial.suggest_float(name, distribution.low, distribution.high, log=distribution.log)


# ---- scores -----------------------------------------------------------------------------------------------------


def parse_target_scores(ranges: list[str], env_ids: list[str]) -> dict[str, tuple[float, float] | None]:
    """Each environment's (low, high) from "LOW,HIGH" strings; None for all when none are given."""
    if not ranges:
        if len(env_ids) > 1:
            raise UserError("several environments need --target-scores, one LOW,HIGH range each, to be averaged")
        return {env_ids[0]: None}
    if len(ranges) != len(env_ids):
        raise UserError(f"--target-scores gives {len(ranges)} range(s) for {len(env_ids)} environment(s)")
    targets = {}
    for env_id, text in zip(env_ids, ranges):
        try:
            low, high = (float(part) for part in text.split(","))
        except ValueError:
            raise UserError(f"--target-scores: {text!r} is not LOW,HIGH (e.g. 0,500 or -500,0)") from None
        if low == high:
            raise UserError(f"--target-scores: {env_id}'s range {text} is empty")
        targets[env_id] = (low, high)
    return targets


def normalised(score: float, target: tuple[float, float] | None) -> float:
    """(score - low) / (high - low): 0 at `low`, 1 at `high`; the score itself without a range."""
    return score if target is None else (score - target[0]) / (target[1] - target[0])


def trial_score(normalised_scores: list[float]) -> float:
    """A trial's score: the mean of its runs' normalised scores. Every environment has as many seeds, so this is
    also the mean over seeds of each seed's mean over environments."""
    return float(np.mean(normalised_scores))


def checkpoints(planned_steps: int | None, reports: int) -> list[int]:
    """The steps at which a run reports its running score: `reports` evenly spaced, the last at its end. A run
    whose planned length is unknown reports only at its end (step -1 stands for "the end")."""
    if not planned_steps:
        return [-1] * reports
    return [planned_steps * (i + 1) // reports for i in range(reports)]


def score_up_to(steps: np.ndarray, values: np.ndarray, step: int, last_episodes: int) -> float | None:
    """The run's score from the values logged up to `step` (all of them for -1); None before the first."""
    if step >= 0:
        values = values[steps <= step]
    return run_score(values, last_episodes) if len(values) else None


# ---- storage ----------------------------------------------------------------------------------------------------


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def storage_file(storage: str) -> Path | None:
    """The file a storage lives in, when it is a file (SQLite or journal)."""
    if storage.startswith("sqlite:///") and ":memory:" not in storage:
        return Path(storage.removeprefix("sqlite:///"))
    return None if "://" in storage else Path(storage)


def open_storage(storage: str):
    """The Optuna storage for --storage; removes what it created when it cannot be opened."""
    path = storage_file(storage)
    if "://" not in storage and not storage.endswith(".log"):
        raise UserError(
            f"--storage {storage} is neither a database URL (sqlite:///tuning/study.db, "
            "postgresql://user:password@host/db) nor a journal file ending in .log"
        )
    created = []
    if path is not None:
        missing = [folder for folder in [path.parent, *path.parent.parents] if not folder.exists()]
        created = [path, *missing] if not path.exists() else []
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        if "://" not in storage:
            return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
        # several threads write to one SQLite file: wait for its lock rather than fail at once (Optuna's FAQ)
        options = {"connect_args": {"timeout": 60}} if storage.startswith("sqlite") else None
        return optuna.storages.RDBStorage(storage, engine_kwargs=options)
    except Exception as e:  # a driver that is not installed, a server that does not answer, a folder we cannot write
        for item in created:
            if item.is_file():
                item.unlink()
            elif item.is_dir() and not any(item.iterdir()):
                item.rmdir()
        raise UserError(f"cannot open --storage {storage}: {error_line(e)}") from None


SETTING_NAMES = {
    "script": "script",
    "env_ids": "environments",
    "target_scores": "score ranges",
    "num_seeds": "seeds",
    "start_seed": "seeds",
    "metric": "metric",
    "last_episodes": "metric window",
    "search_space": "search space",
    "fixed": "fixed flags",
    "reports_per_run": "reports per run",
}


# ---- the tuner --------------------------------------------------------------------------------------------------


class Tuner:
    """A study of a script's hyperparameters, checked and opened (created or resumed) in its storage. Takes the
    fields of `Args` as keywords, or an `Args`; `run()` runs the trials and returns the Optuna study. It sets
    Optuna's logging to errors only, as it prints a line per trial itself.

        tuner = Tuner(script="ppo", env_ids=["CartPole-v1"], search_space="space.toml", num_trials=10)
        study = tuner.run()
    """

    def __init__(self, args: Args | None = None, **settings):
        args = replace(args, **settings) if args is not None else Args(**settings)
        self.args = args
        if optuna is None:
            raise UserError("the tuner needs optuna: pip install -r requirements/requirements-tune.txt")
        self.script_path, self.script_shown = self.find_script(args.script)
        self.check_numbers()
        if not args.env_ids:
            raise UserError("no environment: give at least one with --env-ids")
        repeated = sorted({env_id for env_id in args.env_ids if args.env_ids.count(env_id) > 1})
        if repeated:
            raise UserError(f"--env-ids names {', '.join(repeated)} more than once")
        if args.env_id is not None and args.env_id not in args.env_ids:
            raise UserError(f"--env-id {args.env_id} is not one of --env-ids (it is there for cleanrl_utils.benchmark)")
        self.targets = parse_target_scores(args.target_scores, args.env_ids)
        flags = script_flags(self.script_path)
        self.space = read_search_space(args.search_space, args.fixed_args, flags, self.script_shown)
        if args.plots:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise UserError(
                    "the plots need matplotlib: pip install -r requirements/requirements-tune.txt"
                ) from None
        self.study_name = args.study_name or "_".join([Path(self.script_path).stem, *args.env_ids])
        self.storage_spec = args.storage.replace("{study_name}", safe_name(self.study_name))
        self.runs_dir = Path(args.runs_dir.replace("{study_name}", safe_name(self.study_name)))
        threads = args.threads_per_run or max(1, usable_cores() // args.workers)
        self.child_env = child_environment(dict(os.environ), threads)
        self.wandb_lock = threading.Lock()
        self.failures_in_a_row = 0
        self.study = self.open_study(open_storage(self.storage_spec))

    @staticmethod
    def find_script(script: str) -> tuple[Path, str]:
        """(the script's path, how a command line names it)."""
        if script in script_names():
            return SCRIPTS / f"{script}.py", f"cleanrl/{script}.py"
        path = Path(script)
        if path.suffix == ".py" and path.is_file():
            return path.resolve(), script
        raise UserError(f"no script {script!r}: give a name in cleanrl/ ({', '.join(script_names())}) or a .py file")

    def check_numbers(self) -> None:
        args = self.args
        for name in ("num_seeds", "num_trials", "last_episodes", "workers", "reports_per_run"):
            if getattr(args, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
        for name in ("pruner_startup_trials", "pruner_warmup_reports"):
            if getattr(args, name) < 0:
                raise UserError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
        if args.threads_per_run is not None and args.threads_per_run < 1:
            raise UserError(f"--threads-per-run must be at least 1, got {args.threads_per_run}")
        if not args.poll_seconds > 0:
            raise UserError(f"--poll-seconds must be positive, got {args.poll_seconds}")

    def settings(self) -> dict:
        """What defines the objective: a study resumed or shared must have been made with the same."""
        args = self.args
        return {
            "script": self.script_shown,
            "env_ids": list(args.env_ids),
            "target_scores": [None if t is None else list(t) for t in self.targets.values()],
            "num_seeds": args.num_seeds,
            "start_seed": args.start_seed,
            "metric": args.metric,
            "last_episodes": args.last_episodes,
            "search_space": {
                name: json.loads(optuna.distributions.distribution_to_json(d))
                for name, d in self.space.distributions.items()
            },
            "fixed": self.space.fixed_words,
            "reports_per_run": args.reports_per_run,
        }

    def open_study(self, storage):
        """Creates the study, or loads it if it exists and was made with the same settings."""
        settings = json.loads(json.dumps(self.settings()))
        try:
            study_id = storage.get_study_id_from_name(self.study_name)
        except KeyError:
            study_id = None
        if study_id is not None:
            stored = storage.get_study_user_attrs(study_id).get(SETTINGS_ATTR)
            if stored is None and storage.get_all_trials(study_id, deepcopy=False):
                raise UserError(
                    f"study {self.study_name!r} in {self.storage_spec} was not made by this tuner: "
                    "give another --study-name"
                )
            if stored is not None and stored != settings:
                keys = set(stored) | set(settings)
                differ = sorted({SETTING_NAMES.get(key, key) for key in keys if stored.get(key) != settings.get(key)})
                raise UserError(
                    f"study {self.study_name!r} in {self.storage_spec} was made with different "
                    f"{', '.join(differ)}: give another --study-name, or the settings it was made with"
                )
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # the tuner prints its own line per trial
        sampler = (
            optuna.samplers.TPESampler(seed=self.args.seed)
            if self.args.sampler == "tpe"
            else optuna.samplers.RandomSampler(seed=self.args.seed)
        )
        pruner = (
            optuna.pruners.MedianPruner(
                n_startup_trials=self.args.pruner_startup_trials, n_warmup_steps=self.args.pruner_warmup_reports
            )
            if self.args.pruner == "median"
            else optuna.pruners.NopPruner()
        )
        study = optuna.create_study(
            storage=storage,
            study_name=self.study_name,
            direction="maximize",
            sampler=sampler,
            pruner=pruner,
            load_if_exists=True,
        )
        if SETTINGS_ATTR not in study.user_attrs:
            study.set_user_attr(SETTINGS_ATTR, settings)
        for params in self.space.enqueued:  # once: a resumed study already holds them
            study.enqueue_trial(params, skip_if_exists=True)
        return study

    # ---- one trial ----

    def command_words(self, params: dict, python: str, script: str) -> list[str]:
        """The training command of a trial without --env-id and --seed: fixed flags, then the trial's values."""
        words = [python, script, *self.space.fixed_words]
        for name in self.space.distributions:
            words += flag_words(name, params[name])
        return words

    def objective(self, trial) -> float:
        """Trains every environment and seed in turn with the trial's values and returns its score; reports the
        running score as the runs go, so that the pruner can stop the trial."""
        trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}")
        params = {name: suggest(trial, name, d) for name, d in self.space.distributions.items()}
        command = shlex.join(self.command_words(params, sys.executable, str(self.script_path)))
        folder = new_folder(self.runs_dir, f"trial{trial.number:04d}")
        trial.set_user_attr("folder", str(folder.resolve()))
        scores, raw = [], {}
        runs = expand_runs(command, self.args.env_ids, self.args.num_seeds, self.args.start_seed)
        for index, run in enumerate(runs):
            try:
                raw_score = self.train(trial, index, run, folder, scores)
            except RunFailed as e:
                trial.set_user_attr("failure", str(e))
                raise
            raw[f"{run.env_id} seed {run.seed}"] = raw_score
            trial.set_user_attr("scores", raw)
            scores.append(normalised(raw_score, self.targets[run.env_id]))
        return trial_score(scores)

    def train(self, trial, index: int, run, folder: Path, earlier: list[float]) -> float:
        """Runs one training command in `folder`, reporting the trial's running score at the run's checkpoints;
        returns the run's score. Raises TrialPruned (the run stopped) or RunFailed."""
        log_path = folder / run.log_name
        with open(log_path, "w") as log:
            log.write(f"$ {run.command}\n")
            log.flush()
            proc = subprocess.Popen(
                shlex.split(run.command),
                cwd=folder,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.child_env,
            )
            try:
                found = self.watch(trial, index, run, folder, proc, earlier)
            finally:
                if proc.poll() is None:  # pruned, or interrupted
                    proc.terminate()
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
        where = f"{run.env_id} seed {run.seed}"
        if proc.returncode != 0:
            lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
            raise RunFailed(f"{where} exited with status {proc.returncode}: {lines[-1][:300]} (log: {log_path})")
        if found is None:
            raise RunFailed(f"{where} logged no {self.args.metric!r}: did an episode end? (log: {log_path})")
        return run_score(found.values, self.args.last_episodes)

    def watch(self, trial, index: int, run, folder: Path, proc, earlier: list[float]):
        """Reads the run's TensorBoard logs every --poll-seconds while it trains, and once it has ended; reports
        the trial's running score (its finished runs' and this run's so far) at each checkpoint the run has passed.
        Returns the run's log (report.RunLog), None if it never logged the metric."""
        reports, target = self.args.reports_per_run, self.targets[run.env_id]
        run_folder, reader, found, reported = None, None, None, 0
        while True:
            try:
                proc.wait(timeout=self.args.poll_seconds)
            except subprocess.TimeoutExpired:
                pass
            ended = proc.poll() is not None
            if ended and proc.returncode != 0:
                return found
            if run_folder is None:
                matches = [f for f, _, _, seed in find_runs(folder / "runs", [], [run.env_id]) if seed == run.seed]
                run_folder, reader = (matches[0], event_reader(matches[0])) if matches else (None, None)
            if run_folder is not None:
                found = load_run(run_folder, run.env_id, "", run.seed, self.args.metric, reader) or found
            if found is not None:
                steps = checkpoints(found.planned_steps, reports)
                if steps[0] < 0 and ended:  # no checkpoints known: only the end's report
                    reported = reports - 1
                # a checkpoint is passed once the run logs beyond it (its iteration is complete), or at the end
                while reported < reports and (ended or 0 <= steps[reported] < found.last_step):
                    score = score_up_to(found.steps, found.values, steps[reported], self.args.last_episodes)
                    reported += 1
                    if score is None:
                        continue
                    trial.report(trial_score([*earlier, normalised(score, target)]), index * reports + reported - 1)
                    if trial.should_prune():
                        share = f"{100 * reported // reports}% of its steps" if steps[0] >= 0 else "its end"
                        reason = f"{run.env_id} seed {run.seed} at {share}, score {score:.4g}"
                        trial.set_user_attr("pruned", reason)
                        raise optuna.TrialPruned(reason)
            if ended:
                return found

    # ---- the study ----

    def finished_trials(self) -> int:
        states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        return len(self.study.get_trials(deepcopy=False, states=states))

    def progress(self, study, trial) -> None:
        """One line per trial this process ends: what it gave, the best so far, its values."""
        state = trial.state
        if state == optuna.trial.TrialState.COMPLETE:
            outcome = f"score {trial.value:.4f}"
        elif state == optuna.trial.TrialState.PRUNED:
            outcome = f"pruned ({trial.user_attrs.get('pruned', 'by the pruner')})"
        else:
            outcome = f"FAILED: {trial.user_attrs.get('failure', 'interrupted')}"
        try:
            best = f"best {study.best_value:.4f} (trial {study.best_trial.number})"
        except ValueError:
            best = "no complete trial yet"
        values = " ".join(
            f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
            for name, value in trial.params.items()
        )
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
        print(f"trial {trial.number}: {outcome} | {best} | {values} | {duration(seconds)}", flush=True)
        if self.args.track:
            self.log_to_wandb(study, trial)
        self.failures_in_a_row = self.failures_in_a_row + 1 if state == optuna.trial.TrialState.FAIL else 0
        if self.failures_in_a_row >= FAILURES_IN_A_ROW:
            print(f"tuner: {FAILURES_IN_A_ROW} trials in a row failed: stopping; see their logs", file=sys.stderr)
            study.stop()

    def log_to_wandb(self, study, trial) -> None:
        """A Weights & Biases run per trial: its values as config, its running scores, its final score."""
        import wandb

        with self.wandb_lock:  # one run at a time per process, whatever thread ends the trial
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            run = wandb.init(
                project=self.args.wandb_project_name,
                entity=self.args.wandb_entity,
                group=self.study_name,
                name=f"{self.study_name}_trial{trial.number}",
                job_type="tuner-trial",
                config={**trial.params, "trial": trial.number, "study": self.study_name},
                dir=str(self.runs_dir),
                reinit="create_new",
            )
            for step, value in sorted(trial.intermediate_values.items()):
                run.log({"tuner/running_score": value}, step=step)
            run.summary["tuner/state"] = trial.state.name.lower()
            if trial.value is not None:
                run.summary["tuner/score"] = trial.value
            for where, score in trial.user_attrs.get("scores", {}).items():
                run.summary[f"tuner/return/{where}"] = score
            run.finish()

    def run(self):
        """Runs trials until the study has --num-trials finished ones (or this process has tried as many), prints
        the best values as a command line and draws the plots. Returns the Optuna study."""
        done = self.finished_trials()
        remaining = max(0, self.args.num_trials - done)
        print(
            f"tuner: study {self.study_name!r} in {self.storage_spec}: {done} of {self.args.num_trials} trials "
            f"finished; {remaining} to run, {min(remaining, self.args.workers)} at a time; runs in {self.runs_dir}",
            flush=True,
        )
        if remaining:
            finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
            # other processes may share the study: stop once it holds enough, whoever ran them
            callbacks = [self.progress, optuna.study.MaxTrialsCallback(self.args.num_trials, states=finished)]
            # enqueued trials one at a time: two threads popping the same waiting trial at once may both run it
            waiting = len(self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))
            first = min(waiting, remaining) if self.args.workers > 1 else 0
            if first:
                self.study.optimize(self.objective, n_trials=first, catch=(RunFailed,), callbacks=callbacks)
            self.study.optimize(
                self.objective,
                n_trials=remaining - first,
                n_jobs=self.args.workers,
                catch=(RunFailed,),
                callbacks=callbacks,
            )
        for line in self.summary():
            print(line, flush=True)
        if self.args.plots:
            written = self.write_plots()
            print("tuner: plots: " + ", ".join(str(path) for path in written), flush=True)
        return self.study

    def best_commands(self) -> list[str]:
        """The command lines that train with the best trial's values, one per environment."""
        words = self.command_words(self.study.best_trial.params, "python", self.script_shown)
        return [shlex.join([*words, "--env-id", env_id]) for env_id in self.args.env_ids]

    def summary(self) -> list[str]:
        trials = self.study.get_trials(deepcopy=False)
        counts = {state: sum(t.state == state for t in trials) for state in optuna.trial.TrialState}
        states = ", ".join(f"{n} {state.name.lower()}" for state, n in counts.items() if n)
        lines = [f"tuner: study {self.study_name!r}: {len(trials)} trials ({states or 'none'})"]
        if not counts[optuna.trial.TrialState.COMPLETE]:
            return lines + ["tuner: no trial is complete yet: no best values"]
        best = self.study.best_trial
        what = "mean normalised score" if any(self.targets.values()) else f"mean of the last {self.args.metric}"
        lines.append(f"tuner: best trial {best.number}: score {best.value:.4f} ({what}); train with:")
        return lines + [f"  {command}" for command in self.best_commands()]

    def plot_folder(self) -> Path:
        if self.args.plot_dir is not None:
            return Path(self.args.plot_dir)
        path = storage_file(self.storage_spec)
        return path.parent if path is not None else Path("tuning")

    def write_plots(self) -> list[Path]:
        """The optimisation history and, with two complete trials and two searched flags or more, the
        importance of each flag, as PNG files named after the study."""
        import matplotlib.pyplot as plt
        from optuna.visualization import matplotlib as optuna_plots

        folder = self.plot_folder()
        folder.mkdir(parents=True, exist_ok=True)
        plots = {"history": optuna_plots.plot_optimization_history}
        complete = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if len(complete) >= 2 and len(self.space.distributions) >= 2:
            plots["importances"] = optuna_plots.plot_param_importances
        else:
            print("tuner: no importance plot: it needs 2 complete trials and 2 searched flags", flush=True)
        written = []
        for name, plot in plots.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna's matplotlib plots are marked experimental
                axes = plot(self.study)
            path = folder / f"{safe_name(self.study_name)}_{name}.png"
            axes.figure.savefig(path, dpi=100, bbox_inches="tight")  # the history's legend is outside its axes
            plt.close(axes.figure)
            written.append(path)
        return written


def tune(**settings):
    """Runs a study (the fields of `Args` as keywords) and returns it: `tune(search_space="s.toml", num_trials=5)`."""
    return Tuner(**settings).run()


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="python -m cleanrl_utils.tuner")
    try:
        tuner = Tuner(args)
    except UserError as e:
        print(f"tuner: error: {e}", file=sys.stderr)
        return 2
    if args.plots:
        import matplotlib

        matplotlib.use("Agg")
    start = time.time()
    try:
        tuner.run()
    except KeyboardInterrupt:
        print("tuner: interrupted; the same command goes on where the study stopped", file=sys.stderr)
        return 130
    print(f"tuner: done in {duration(time.time() - start)}", flush=True)
    complete = tuner.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return 0 if complete and tuner.failures_in_a_row < FAILURES_IN_A_ROW else 1


if __name__ == "__main__":
    sys.exit(main())
