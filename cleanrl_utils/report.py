"""Tables and learning curves from the TensorBoard logs of benchmark runs, offline.

    python -m cleanrl_utils.report                                   # every run under runs/
    python -m cleanrl_utils.report --exp-names ppo --env-ids CartPole-v1 Acrobot-v1 --compare-reference
    python -m cleanrl_utils.report --metric charts/avg_episodic_return --output-dir benchmark/results/jax
    python -m cleanrl_utils.report --compare ppo ppo_torchcompile    # do the two learn the same? (below)

Run folders are named `{env_id}__{exp_name}__{seed}__{unix_time}`, relative to --runs-dir (an env id with a '/',
such as dm_control/cartpole-balance-v0, puts the folder one level deeper). A run's score is the average of its
last 100 values of --metric (its last 100 episodes); a table cell is the mean ± standard deviation of the scores
across seeds, the standard deviation being numpy's default, the population one (ddof=0).

--compare BASELINE CANDIDATE asks whether two variants learn the same, as rliable's authors recommend reporting
it (Agarwal et al., 2021): for each environment the interquartile mean (IQM, the mean of the middle half) of each
side's run scores with a 95% bootstrap confidence interval (runs resampled with replacement, percentile interval),
the difference of the mean scores (candidate - baseline) with its 95% bootstrap interval, and a verdict: equivalent
when that interval contains 0 and lies within ±--margin (10%) of the baseline's mean. It writes equivalence.md and
the two curves, mean ± one std across seeds, in equivalence_steps.png.
"""

import json
import logging
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tyro

REFERENCE_SCORES = Path(__file__).with_name("reference_scores.json")


@dataclass
class Args:
    runs_dir: str = "runs"
    """the folder of the run folders (TensorBoard logs)"""
    exp_names: list[str] = field(default_factory=list)
    """the variants (exp_name of the runs) to report, in this order (none given: all)"""
    env_ids: list[str] = field(default_factory=list)
    """the environments to report, in this order (none given: all)"""
    metric: str = "charts/episodic_return"
    """the scalar to score and plot, e.g. charts/avg_episodic_return (JAX) or charts/episodic_length-player0"""
    last_episodes: int = 100
    """a run's score is the average of its last this many values of --metric"""
    output_dir: str = "benchmark/results"
    """where table.md, curves_steps.png and curves_walltime.png are written"""
    compare_reference: bool = False
    """add the published scores of the reference implementation (cleanrl_utils/reference_scores.json)"""
    plots: bool = True
    """draw the learning curves (needs matplotlib: requirements/requirements-plot.txt)"""
    include_unfinished: bool = False
    """also count runs that stopped (or are still running) before their --total-timesteps"""
    compare: list[str] = field(default_factory=list)
    """two variants, BASELINE CANDIDATE: test whether they learn the same instead of the table (see above)"""
    margin: float = 0.1
    """with --compare: the largest difference of means, as a fraction of the baseline's, that counts as the same"""
    bootstrap_samples: int = 10000
    """with --compare: resamples for the confidence intervals (drawn from a fixed seed: the same files, the same
    intervals)"""


@dataclass
class RunLog:
    """One run's --metric: values against environment steps and against minutes since the run's first scalar."""

    path: Path
    env_id: str
    exp_name: str
    seed: int
    steps: np.ndarray
    values: np.ndarray
    minutes: np.ndarray
    runtime_minutes: float
    last_step: int = 0
    """the largest step of any scalar the run logged"""
    planned_steps: int | None = None
    """the step the run would log last when finished (from its hyperparameters text), None when unknown"""

    @property
    def finished(self) -> bool:
        return self.planned_steps is None or self.last_step >= self.planned_steps


@dataclass
class Summary:
    mean: float
    std: float
    seeds: int
    runtime_minutes: float


class UserError(Exception):
    """Reported as one line on stderr with exit status 2."""


def warn(message: str) -> None:
    print(f"report: warning: {message}", file=sys.stderr)


def parse_run_name(name: str) -> tuple[str, str, int] | None:
    """(env_id, exp_name, seed) from `{env_id}__{exp_name}__{seed}__{unix_time}`, or None for another name."""
    parts = name.rsplit("__", 3)
    if len(parts) != 4 or not all(parts[:2]) or not (parts[2].isdigit() and parts[3].isdigit()):
        return None
    return parts[0], parts[1], int(parts[2])


def find_runs(runs_dir: Path, exp_names: list[str], env_ids: list[str]) -> list[tuple[Path, str, str, int]]:
    """The run folders under `runs_dir` holding event files, as (folder, env_id, exp_name, seed), filtered."""
    folders = sorted({path.parent for path in runs_dir.rglob("events.out.tfevents.*")})
    runs = []
    for folder in folders:
        parsed = parse_run_name(folder.relative_to(runs_dir).as_posix())
        if parsed is None:
            warn(f"{folder} is not named env_id__exp_name__seed__time; left out")
        elif (not env_ids or parsed[0] in env_ids) and (not exp_names or parsed[1] in exp_names):
            runs.append((folder, *parsed))
    return runs


def planned_last_step(hyperparameters: str) -> int | None:
    """The global step of a run's last iteration, from the hyperparameters table the scripts log as text:
    total_timesteps rounded down to whole batches (num_iterations = total_timesteps // batch_size)."""
    cells = dict(re.findall(r"^\|(\w+)\|([^|]*)\|$", hyperparameters, flags=re.MULTILINE))
    try:
        total, batch = int(cells["total_timesteps"]), int(cells["batch_size"])
    except (KeyError, ValueError):
        return None
    return total // batch * batch if batch > 0 else None


def event_reader(folder: Path):
    """A reader of the run's TensorBoard events (every scalar, the first text), for `load_run`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # A resumed run marks where it went on (checkpoint.py's purge_step), and the reader drops what the stopped
    # attempt had logged past that point. That is what should happen, so TensorBoard's warning of each drop, which
    # blames "a TensorFlow restart", is not shown.
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    return EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 1, "images": 1})


def load_run(folder: Path, env_id: str, exp_name: str, seed: int, metric: str, reader=None) -> RunLog | None:
    """Reads the run's TensorBoard events; None when it never logged `metric`. Given the `reader` (`event_reader`)
    of an earlier call, it reads only what the run has logged since, as when watching a run that is going on."""
    accumulator = reader or event_reader(folder)
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    if metric not in tags:
        return None
    events = {tag: accumulator.Scalars(tag) for tag in tags}
    start = min(e[0].wall_time for e in events.values() if e)
    end = max(e[-1].wall_time for e in events.values() if e)
    scalars = events[metric]
    order = np.argsort([e.step for e in scalars], kind="stable")
    planned = None
    if "hyperparameters/text_summary" in accumulator.Tags()["tensors"]:
        text = accumulator.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
        planned = planned_last_step(text)
    return RunLog(
        path=folder,
        env_id=env_id,
        exp_name=exp_name,
        seed=seed,
        steps=np.array([scalars[i].step for i in order], dtype=np.float64),
        values=np.array([scalars[i].value for i in order], dtype=np.float64),
        minutes=np.array([(scalars[i].wall_time - start) / 60 for i in order], dtype=np.float64),
        runtime_minutes=(end - start) / 60,
        last_step=max(e[-1].step for e in events.values() if e),
        planned_steps=planned,
    )


def run_score(values: np.ndarray, last_episodes: int) -> float:
    """The average of the last `last_episodes` values (all of them when there are fewer)."""
    return float(np.mean(values[-last_episodes:]))


def summarise(runs: list[RunLog], last_episodes: int) -> Summary:
    scores = [run_score(run.values, last_episodes) for run in runs]
    return Summary(
        mean=float(np.mean(scores)),
        std=float(np.std(scores)),
        seeds=len(runs),
        runtime_minutes=float(np.mean([run.runtime_minutes for run in runs])),
    )


def load_reference(path: Path = REFERENCE_SCORES) -> dict[tuple[str, str], dict]:
    """The published scores, by (variant, env_id)."""
    return {(e["variant"], e["env_id"]): e for e in json.loads(path.read_text())["scores"]}


def statistic_of(metric: str) -> str:
    """What a scalar measures, in the reference's terms: charts/avg_episodic_return -> episodic_return."""
    name = metric.rsplit("/", 1)[-1]
    return re.sub(r"-player\d+$", "", name.removeprefix("avg_"))


def mean_std(mean: float, std: float | None) -> str:
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def reference_cells(entry: dict | None, metric: str) -> tuple[str, str]:
    """The (reference, baseline) cells for one variant and environment."""
    if entry is None:
        return "", ""
    reference = mean_std(entry["mean"], entry["std"])
    if entry["statistic"] != statistic_of(metric):
        reference += f" ({entry['statistic'].replace('_', ' ')})"
    baseline = entry.get("baseline")
    if baseline is None:
        return reference, ""
    source = "" if baseline["source"] == "openai/baselines PPO" else f" ({baseline['source']})"
    return reference, mean_std(baseline["mean"], baseline["std"]) + source


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join("| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |" for line in lines)


def results_table(
    summaries: dict[tuple[str, str], Summary],
    env_ids: list[str],
    variants: list[str],
    metric: str,
    last_episodes: int,
    reference: dict[tuple[str, str], dict] | None = None,
) -> str:
    """Environments as rows; for each variant its score, the published ones (with `reference`), seeds and
    runtime. Ends with what the numbers mean."""
    columns: list[tuple[str, dict[str, str]]] = []  # (header, cell by env_id)
    for variant in variants:
        found = {env_id: summaries[env_id, variant] for env_id in env_ids if (env_id, variant) in summaries}
        columns.append((variant, {env_id: mean_std(s.mean, s.std) for env_id, s in found.items()}))
        if reference is not None:
            published = {env_id: reference_cells(reference.get((variant, env_id)), metric) for env_id in env_ids}
            columns.append((f"{variant} reference", {env_id: cells[0] for env_id, cells in published.items()}))
            baselines = {env_id: cells[1] for env_id, cells in published.items() if cells[1]}
            if baselines:
                columns.append((f"{variant} baseline", baselines))
        columns.append((f"{variant} seeds", {env_id: str(s.seeds) for env_id, s in found.items()}))
        columns.append(
            (f"{variant} runtime (min)", {env_id: f"{s.runtime_minutes:.2f}" for env_id, s in found.items()})
        )
    header = ["environment"] + [name for name, _ in columns]
    rows = [[env_id] + [cells.get(env_id, "") for _, cells in columns] for env_id in env_ids]
    notes = [
        f"Score: mean ± standard deviation across seeds (numpy's population std, ddof=0) of each run's average "
        f"`{metric}` over its last {last_episodes} values. Runtime: minutes from a run's first to its last logged "
        "scalar, averaged over seeds."
    ]
    if reference is not None:
        notes.append(
            "Reference: the reference implementation's published score (cleanrl_utils/reference_scores.json); "
            "baseline: openai/baselines PPO unless the cell names another source."
        )
    return markdown_table(header, rows) + "\n\n" + "\n".join(notes) + "\n"


def iqm(scores: np.ndarray) -> np.ndarray:
    """The interquartile mean along the last axis: the mean of the middle half, a quarter cut from each end (as
    scipy.stats.trim_mean(scores, 0.25) cuts it)."""
    ordered_scores = np.sort(scores, axis=-1)
    cut = int(0.25 * scores.shape[-1])
    return ordered_scores[..., cut : scores.shape[-1] - cut].mean(axis=-1)


def resampled(scores: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """`samples` bootstrap resamples of the runs' scores, shape (samples, runs)."""
    return scores[rng.integers(0, len(scores), size=(samples, len(scores)))]


@dataclass
class Equivalence:
    baseline_iqm: tuple[float, float, float]
    """the IQM and its 95% interval"""
    candidate_iqm: tuple[float, float, float]
    difference: tuple[float, float, float]
    """mean(candidate) - mean(baseline) and its 95% interval"""
    baseline_mean: float
    seeds: tuple[int, int]
    verdict: str


def equivalence(baseline: np.ndarray, candidate: np.ndarray, margin: float, samples: int, seed: int = 0):
    """Whether two groups of run scores are the same within `margin` x |mean(baseline)|, by bootstrap."""
    rng = np.random.default_rng(seed)
    base_samples = resampled(baseline, samples, rng)
    cand_samples = resampled(candidate, samples, rng)

    def with_interval(point, draws):
        low, high = np.percentile(draws, [2.5, 97.5])
        return float(point), float(low), float(high)

    difference = with_interval(
        candidate.mean() - baseline.mean(), cand_samples.mean(axis=1) - base_samples.mean(axis=1)
    )
    allowed = margin * abs(baseline.mean())
    _, low, high = difference
    if low > 0 or high < 0:
        verdict = "different: the interval of the difference leaves out 0"
    elif low >= -allowed and high <= allowed:
        verdict = f"equivalent: the interval of the difference lies within ±{margin:.0%} of the baseline's mean"
    else:
        verdict = f"undecided: the interval of the difference contains 0 but reaches past ±{margin:.0%}; add seeds"
    return Equivalence(
        baseline_iqm=with_interval(iqm(baseline), iqm(base_samples)),
        candidate_iqm=with_interval(iqm(candidate), iqm(cand_samples)),
        difference=difference,
        baseline_mean=float(baseline.mean()),
        seeds=(len(baseline), len(candidate)),
        verdict=verdict,
    )


def equivalence_table(results: dict[str, Equivalence], variants: list[str], margin: float, metric: str) -> str:
    def cell(value):
        return f"{value[0]:.2f} [{value[1]:.2f}, {value[2]:.2f}]"

    baseline, candidate = variants
    header = ["environment", f"{baseline} IQM", f"{candidate} IQM", "difference of means", "seeds", "verdict"]
    rows = [
        [
            env_id,
            cell(e.baseline_iqm),
            cell(e.candidate_iqm),
            cell(e.difference),
            f"{e.seeds[0]} / {e.seeds[1]}",
            e.verdict.split(":")[0],
        ]
        for env_id, e in results.items()
    ]
    notes = (
        f"A run's score: its average `{metric}` over its last values (--last-episodes). IQM: the mean of the middle "
        f"half of the scores, with its 95% bootstrap interval in brackets. Difference: mean({candidate}) - "
        f"mean({baseline}), with its 95% bootstrap interval. Equivalent: that interval contains 0 and lies within "
        f"±{margin:.0%} of {baseline}'s mean; different: it leaves out 0; undecided: neither (more seeds may decide)."
    )
    return markdown_table(header, rows) + "\n\n" + notes + "\n"


def merge_repeats(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique x, with the mean of the y values logged at the same x (several episodes in one step)."""
    order = np.argsort(x, kind="stable")
    unique, inverse = np.unique(x[order], return_inverse=True)
    return unique, np.bincount(inverse, weights=y[order]) / np.bincount(inverse)


def align(curves: list[tuple[np.ndarray, np.ndarray]], points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Puts several runs' (x, y) on one grid of `points` x values spanning the range all of them cover, by linear
    interpolation; returns (grid, array of shape (runs, points))."""
    merged = [merge_repeats(x, y) for x, y in curves]
    lo, hi = max(x[0] for x, _ in merged), min(x[-1] for x, _ in merged)
    grid = np.linspace(lo, hi, points) if hi > lo else np.array([hi])
    return grid, np.stack([np.interp(grid, x, y) for x, y in merged])


def plot_curves(
    groups: dict[tuple[str, str], list[RunLog]],
    env_ids: list[str],
    variants: list[str],
    x_axis: str,
    metric: str,
    path: Path,
) -> None:
    """One panel per environment with a curve per variant: the mean across seeds, shaded ± one std.
    `x_axis` is "steps" (environment steps) or "minutes" (wall time since the run's first scalar)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = min(3, len(env_ids))
    nrows = math.ceil(len(env_ids) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, env_id in zip(axes.flat, env_ids):
        for i, variant in enumerate(variants):
            runs = groups.get((env_id, variant))
            if not runs:
                continue
            grid, ys = align([(getattr(run, x_axis), run.values) for run in runs])
            mean, std = ys.mean(axis=0), ys.std(axis=0)
            color = colors[i % len(colors)]
            ax.plot(grid, mean, color=color, label=f"{variant} ({len(runs)} seed{'s' * (len(runs) > 1)})")
            ax.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        ax.set_title(env_id)
        ax.set_xlabel("environment steps" if x_axis == "steps" else "wall time (minutes)")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes.flat[len(env_ids) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def ordered(requested: list[str], found: set[str], what: str) -> list[str]:
    """The requested names that have runs, in the order given (all found ones, sorted, when none requested)."""
    for name in requested:
        if name not in found:
            warn(f"no run of {what} {name!r}")
    return [name for name in requested if name in found] if requested else sorted(found)


def load_groups(runs_dir: Path, exp_names: list[str], env_ids: list[str], metric: str, include_unfinished=False):
    """The runs under `runs_dir` that log `metric`, by (env_id, exp_name), in the order found; runs that have not
    reached their last iteration are left out (with a warning) unless `include_unfinished`."""
    found = find_runs(runs_dir, exp_names, env_ids)
    if not found:
        filters = "".join(
            f" {flag} {' '.join(names)}"
            for flag, names in (("--exp-names", exp_names), ("--env-ids", env_ids))
            if names
        )
        raise UserError(f"no run folder under {runs_dir}" + (f" matches{filters}" if filters else ""))
    groups: dict[tuple[str, str], list[RunLog]] = {}
    without_metric, unfinished = [], []
    for folder, env_id, exp_name, seed in found:
        run = load_run(folder, env_id, exp_name, seed, metric)
        if run is None:
            without_metric.append(folder)
        elif not (run.finished or include_unfinished):
            unfinished.append(run)
        else:
            groups.setdefault((env_id, exp_name), []).append(run)
    if not groups and unfinished:
        raise UserError(
            f"all {len(unfinished)} runs under {runs_dir} that log {metric!r} are unfinished or still running: "
            "wait for them, or pass --include-unfinished"
        )
    if not groups:
        raise UserError(f"none of the {len(found)} runs under {runs_dir} logs the scalar {metric!r}: check --metric")
    for run in unfinished:
        warn(
            f"{run.path} stopped at step {run.last_step} of {run.planned_steps} (unfinished or still running); "
            "left out: pass --include-unfinished to count it"
        )
    for folder in without_metric:
        warn(f"{folder} has no scalar {metric!r}; left out")
    for (env_id, exp_name), runs in groups.items():
        seeds = sorted(run.seed for run in runs)
        if len(set(seeds)) < len(seeds):
            warn(f"{exp_name} on {env_id} has several runs with one seed (seeds {seeds}); all of them count")
    return groups


def report(args: Args) -> list[Path]:
    """Writes the table and the plots; returns the files written."""
    runs_dir = Path(args.runs_dir)
    if args.last_episodes < 1:
        raise UserError(f"--last-episodes must be at least 1, got {args.last_episodes}")
    if not runs_dir.is_dir():
        raise UserError(f"no runs folder {runs_dir}: point --runs-dir at the folder the scripts wrote")
    if args.plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError(
                "the plots need matplotlib: pip install -r requirements/requirements-plot.txt, or pass --no-plots"
            ) from None
    if args.compare:
        return compare(args, runs_dir)
    groups = load_groups(runs_dir, args.exp_names, args.env_ids, args.metric, args.include_unfinished)
    env_ids = ordered(args.env_ids, {env_id for env_id, _ in groups}, "environment")
    variants = ordered(args.exp_names, {exp_name for _, exp_name in groups}, "variant")
    summaries = {key: summarise(runs, args.last_episodes) for key, runs in groups.items()}
    reference = load_reference() if args.compare_reference else None
    table = results_table(summaries, env_ids, variants, args.metric, args.last_episodes, reference)
    print(table)

    curves = (("steps", "curves_steps.png"), ("minutes", "curves_walltime.png"))
    return write_outputs(args, "table.md", table, groups, env_ids, variants, curves)


def write_outputs(args: Args, table_name: str, table: str, groups, env_ids, variants, curves) -> list[Path]:
    """Writes `table` as `table_name` into --output-dir and, with --plots, one plot per (x axis, file name) of
    `curves`; returns the files written."""
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    written = [output_dir / table_name]
    written[0].write_text(table)
    if args.plots:
        for x_axis, name in curves:
            plot_curves(groups, env_ids, variants, x_axis, args.metric, output_dir / name)
            written.append(output_dir / name)
    return written


def compare(args: Args, runs_dir: Path) -> list[Path]:
    """--compare: the equivalence table and the curves of the two variants, for every environment both ran."""
    if len(args.compare) != 2 or len(set(args.compare)) != 2:
        raise UserError(f"--compare takes two different variants, BASELINE CANDIDATE; got {args.compare}")
    if not 0 < args.margin < 1:
        raise UserError(f"--margin must lie between 0 and 1 (a fraction of the baseline's mean), got {args.margin}")
    if args.bootstrap_samples < 100:
        raise UserError(f"--bootstrap-samples must be at least 100, got {args.bootstrap_samples}")
    groups = load_groups(runs_dir, args.compare, args.env_ids, args.metric, args.include_unfinished)
    both = {env_id for env_id, _ in groups if all((env_id, variant) in groups for variant in args.compare)}
    if not both:
        raise UserError(f"no environment under {runs_dir} has runs of both {args.compare[0]} and {args.compare[1]}")
    env_ids = ordered(args.env_ids, both, "environment with runs of both")
    results = {}
    baseline, candidate = args.compare
    for env_id in env_ids:
        baseline_scores = np.array([run_score(run.values, args.last_episodes) for run in groups[env_id, baseline]])
        candidate_scores = np.array([run_score(run.values, args.last_episodes) for run in groups[env_id, candidate]])
        results[env_id] = equivalence(baseline_scores, candidate_scores, args.margin, args.bootstrap_samples)
    table = equivalence_table(results, args.compare, args.margin, args.metric)
    print(table)
    curves = (("steps", "equivalence_steps.png"),)
    return write_outputs(args, "equivalence.md", table, groups, env_ids, args.compare, curves)


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="python -m cleanrl_utils.report")
    try:
        written = report(args)
    except UserError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print("report: wrote " + ", ".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
