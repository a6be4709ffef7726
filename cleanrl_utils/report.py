"""Tables and learning curves from the TensorBoard logs of benchmark runs, offline.

    python -m cleanrl_utils.report                                   # every run under runs/
    python -m cleanrl_utils.report --exp-names ppo --env-ids CartPole-v1 Acrobot-v1 --compare-reference
    python -m cleanrl_utils.report --metric charts/avg_episodic_return --output-dir benchmark/results/jax
    python -m cleanrl_utils.report --compare ppo ppo_torchcompile    # do the two learn the same? (below)

Run folders are named `{env_id}__{exp_name}__{seed}__{unix_time}`, relative to --runs-dir (an env id with a '/',
such as dm_control/cartpole-balance-v0, puts the folder one level deeper). A run's score is the average of its
last 100 values of --metric (its last 100 episodes); a table cell is the mean ± standard deviation of the scores
across seeds, the standard deviation being numpy's default, the population one (ddof=0).

--compare BASELINE CANDIDATE asks whether two variants learn the same, by an equivalence test: Schuirmann's two
one-sided tests (TOST) at level --alpha (0.05), which call the two equivalent when the (1 - 2 alpha) Welch interval
of the difference of the mean scores (candidate - baseline) lies inside ±delta, the margin: --margin-abs in the
score's units, or --margin (0.1) times the baseline's mean. The verdict is "equivalent" (the interval inside
±delta), "not equivalent, better" or "not equivalent, worse" (the interval wholly above +delta or below -delta),
or "inconclusive" (anything else: more seeds may decide). Beside it, for description, each side's interquartile
mean (IQM, the mean of the middle half) with a 95% bootstrap interval. It writes equivalence.md and the two curves,
mean ± one std across seeds, in equivalence_steps.png.

--protocol FILE reads a comparison planned before its runs (benchmark/protocols/): the variants, the environment,
the steps, the score, delta, alpha, the seeds and, if the data are read more than once, the looks, whose levels
O'Brien-Fleming-type alpha spending sets. The report checks that the runs follow it and applies it.

    python -m cleanrl_utils.report --protocol benchmark/protocols/ppo_torchcompile_cartpole.toml
    python -m cleanrl_utils.report --power 300 --margin-abs 238   # the seeds a side that delta needs
"""

import datetime
import json
import logging
import math
import re
import statistics
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
    margin: float | None = None
    """with --compare: the margin delta as a fraction of the baseline's mean score (0.1 unless --margin-abs is given)"""
    margin_abs: float | None = None
    """with --compare or --power: the margin delta in the score's own units"""
    alpha: float | None = None
    """with --compare or --power: the level of each one-sided test, the interval being 1 - 2 alpha (0.05: 90%)"""
    protocol: str | None = None
    """with --compare (or alone): a planned comparison's TOML file; its variants, delta, alpha and looks apply"""
    score: Literal["last", "auc"] = "last"
    """a run's score: "last", its average --metric over its last --last-episodes values; "auc", the mean of its
    learning curve over all its steps (the area under it over the steps run)"""
    power: float | None = None
    """print the seeds a side that --margin-abs needs when a run's score has this standard deviation, and stop"""
    target_power: float = 0.8
    """with --power: the chance of calling two variants that do not differ equivalent"""
    bootstrap_samples: int = 10000
    """with --compare: resamples for the IQMs' intervals (drawn from a fixed seed: the same files, the same
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
    total_timesteps: int | None = None
    """the run's --total-timesteps (from its hyperparameters text), None when unknown"""

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


def hyperparameter_cells(hyperparameters: str) -> dict[str, str]:
    """{name: value} from the hyperparameters table the scripts log as text."""
    return dict(re.findall(r"^\|(\w+)\|([^|]*)\|$", hyperparameters, flags=re.MULTILINE))


def planned_last_step(hyperparameters: str) -> int | None:
    """The global step of a run's last iteration, from the hyperparameters table the scripts log as text:
    total_timesteps rounded down to whole batches (num_iterations = total_timesteps // batch_size)."""
    cells = hyperparameter_cells(hyperparameters)
    try:
        total, batch = int(cells["total_timesteps"]), int(cells["batch_size"])
    except (KeyError, ValueError):
        return None
    return total // batch * batch if batch > 0 else None


def logged_total_timesteps(hyperparameters: str) -> int | None:
    """The run's total_timesteps from its hyperparameters text, None when it has none."""
    try:
        return int(hyperparameter_cells(hyperparameters)["total_timesteps"])
    except (KeyError, ValueError):
        return None


def event_reader(folder: Path):
    """A reader of the run's TensorBoard events (every scalar, the first text), for `load_run`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # A resumed run marks where it went on (purge_step, in cleanrl_utils/checkpoint/run.py), and the reader drops what
    # the stopped attempt had logged past that point. That is what should happen, so TensorBoard's warning of each drop,
    # which blames "a TensorFlow restart", is not shown.
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
    total_timesteps = None
    if "hyperparameters/text_summary" in accumulator.Tags()["tensors"]:
        text = accumulator.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
        planned = planned_last_step(text)
        total_timesteps = logged_total_timesteps(text)
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
        total_timesteps=total_timesteps,
    )


def run_score(values: np.ndarray, last_episodes: int) -> float:
    """The average of the last `last_episodes` values (all of them when there are fewer)."""
    return float(np.mean(values[-last_episodes:]))


def curve_mean(steps: np.ndarray, values: np.ndarray, last_step: int) -> float:
    """The area under a run's learning curve divided by its steps: the mean return over steps 0 to `last_step`,
    the curve joining the episodes' returns (those ending at one step averaged) by straight lines, flat before the
    first episode and after the last."""
    x, y = merge_repeats(steps, values)
    inside = x <= last_step
    x = np.concatenate([[0.0], x[inside], [float(last_step)]])
    y = np.concatenate([[y[0]], y[inside], [y[inside][-1] if inside.any() else y[0]]])
    return float(np.trapezoid(y, x) / last_step) if last_step > 0 else float(y[0])


def scores_of(runs: list[RunLog], score: str, last_episodes: int) -> np.ndarray:
    """Each run's score: "last", the average of its last `last_episodes` values; "auc", `curve_mean` up to its
    planned last step (the last step it logged when the plan is unknown)."""
    if score == "auc":
        return np.array([curve_mean(run.steps, run.values, run.planned_steps or run.last_step) for run in runs])
    return np.array([run_score(run.values, last_episodes) for run in runs])


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


# ---- statistics for --compare: Student's t, Welch's interval, TOST, power, group-sequential levels ---------------


def regularized_beta(x, a, b) -> np.ndarray:
    """The regularized incomplete beta function I_x(a, b), elementwise, from its continued fraction (evaluated by
    the modified Lentz method), on whichever of x and 1 - x makes the fraction converge fast."""
    x, a, b = np.broadcast_arrays(*(np.asarray(value, dtype=np.float64) for value in (x, a, b)))
    swap = x > (a + 1) / (a + b + 2)
    x_used = np.where(swap, 1 - x, x)
    a_used = np.where(swap, b, a)
    b_used = np.where(swap, a, b)
    log_gamma = np.frompyfunc(math.lgamma, 1, 1)
    log_beta = np.asarray(log_gamma(a_used) + log_gamma(b_used) - log_gamma(a_used + b_used), dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_front = a_used * np.log(x_used) + b_used * np.log1p(-x_used) - log_beta
    fraction = beta_continued_fraction(x_used, a_used, b_used)
    value = np.exp(log_front) * fraction / a_used
    value = np.where(x_used <= 0, 0.0, value)
    return np.where(swap, 1 - value, value)


def beta_continued_fraction(x: np.ndarray, a: np.ndarray, b: np.ndarray, terms: int = 1000) -> np.ndarray:
    """The continued fraction of I_x(a, b) (without its front factor), for x < (a + 1) / (a + b + 2)."""
    smallest = 1e-300

    def not_zero(value):
        return np.where(np.abs(value) < smallest, smallest, value)

    numerator_ratio = np.ones_like(x)
    denominator_ratio = 1 / not_zero(1 - (a + b) * x / (a + 1))
    result = denominator_ratio.copy()
    for m in range(1, terms + 1):
        even_term = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        denominator_ratio = 1 / not_zero(1 + even_term * denominator_ratio)
        numerator_ratio = not_zero(1 + even_term / numerator_ratio)
        result *= denominator_ratio * numerator_ratio
        odd_term = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        denominator_ratio = 1 / not_zero(1 + odd_term * denominator_ratio)
        numerator_ratio = not_zero(1 + odd_term / numerator_ratio)
        step = denominator_ratio * numerator_ratio
        result *= step
        if np.all(np.abs(step - 1) < 1e-15):
            break
    return result


def student_t_sf(t, df) -> np.ndarray:
    """P(T > t) for Student's t with `df` degrees of freedom (any positive real), elementwise."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=np.float64), np.asarray(df, dtype=np.float64))
    both_tails = regularized_beta(df / (df + t * t), df / 2, 0.5)
    return np.where(t >= 0, both_tails / 2, 1 - both_tails / 2)


def student_t_upper(tail, df) -> np.ndarray:
    """The t with P(T > t) = tail, for 0 < tail <= 0.5, elementwise, by bisection (relative error about 1e-15).
    Taking the tail rather than 1 - tail keeps tiny levels, such as an early look's, from rounding to 1."""
    tail, df = np.broadcast_arrays(np.asarray(tail, dtype=np.float64), np.asarray(df, dtype=np.float64))
    low = np.zeros_like(tail)
    high = np.ones_like(tail)
    while np.any(student_t_sf(high, df) > tail):
        high = np.where(student_t_sf(high, df) > tail, 2 * high, high)
    for _ in range(60):
        middle = (low + high) / 2
        above = student_t_sf(middle, df) > tail
        low = np.where(above, middle, low)
        high = np.where(above, high, middle)
    return (low + high) / 2


def normal_sf(z) -> np.ndarray:
    """P(Z > z) for the standard normal, elementwise."""
    erfc = np.frompyfunc(math.erfc, 1, 1)
    return np.asarray(erfc(np.asarray(z, dtype=np.float64) / math.sqrt(2)), dtype=np.float64) / 2


@dataclass
class Welch:
    """Welch's interval of mean(candidate) - mean(baseline), along the last axis of the scores."""

    difference: np.ndarray
    low: np.ndarray
    high: np.ndarray
    standard_error: np.ndarray
    df: np.ndarray
    """Welch-Satterthwaite degrees of freedom"""


def welch_interval(baseline, candidate, alpha: float) -> Welch:
    """The two-sided (1 - 2 alpha) Welch t interval of the difference of means (candidate - baseline): each side's
    sample variance (ddof=1) over its size, the two summed, with the Welch-Satterthwaite degrees of freedom. The
    scores may carry leading axes (one interval per row, as a simulation needs)."""
    baseline = np.asarray(baseline, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    base_share = baseline.var(axis=-1, ddof=1) / baseline.shape[-1]
    cand_share = candidate.var(axis=-1, ddof=1) / candidate.shape[-1]
    variance = base_share + cand_share
    df_denominator = base_share**2 / (baseline.shape[-1] - 1) + cand_share**2 / (candidate.shape[-1] - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(df_denominator > 0, variance**2 / df_denominator, np.inf)
    df = np.minimum(df, 1e6)
    standard_error = np.sqrt(variance)
    difference = candidate.mean(axis=-1) - baseline.mean(axis=-1)
    reach = student_t_upper(alpha, df) * standard_error
    return Welch(difference, difference - reach, difference + reach, standard_error, df)


def tost_p_value(welch: Welch, margin: float) -> np.ndarray:
    """The larger of the two one-sided tests' p-values: that the difference is at most -margin, and that it is at
    least +margin (Schuirmann's two one-sided tests). Below alpha exactly when the (1 - 2 alpha) interval lies
    inside (-margin, +margin)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        above_lower = student_t_sf((welch.difference + margin) / welch.standard_error, welch.df)
        below_upper = student_t_sf((margin - welch.difference) / welch.standard_error, welch.df)
    return np.maximum(above_lower, below_upper)


EQUIVALENT = "equivalent"
BETTER = "not equivalent, better"
WORSE = "not equivalent, worse"
INCONCLUSIVE = "inconclusive"


def tost_verdict(low: float, high: float, margin: float) -> str:
    """Where the interval of the difference lies against ±margin: inside it, wholly above +margin, wholly below
    -margin, or across one of its ends."""
    if -margin < low and high < margin:
        return EQUIVALENT
    if low > margin:
        return BETTER
    if high < -margin:
        return WORSE
    return INCONCLUSIVE


def seeds_needed(sd: float, margin: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Seeds a side for the two one-sided tests at `alpha` to call two variants equivalent with probability `power`
    when they do not differ: the smallest n with n >= 2 sd^2 (t(1 - alpha, 2n - 2) + t(1 - (1 - power) / 2, 2n - 2))^2
    / margin^2, where sd is a run score's standard deviation (the root mean square of the two sides' when they
    differ). With no true difference, the estimate lands inside margin - t(1 - alpha) SE on both sides with
    probability 2 P(T < margin / SE - t(1 - alpha)) - 1, the SE of a difference of two means of n being
    sd sqrt(2 / n); setting that to `power` gives the formula (Chow, Shao and Wang, Sample Size Calculations in
    Clinical Research, 2nd ed., 2008, section 3.2, with the true difference 0)."""
    if sd <= 0 or margin <= 0:
        raise ValueError("the standard deviation and the margin must be positive")
    normal = statistics.NormalDist()
    z_sum = normal.inv_cdf(1 - alpha) + normal.inv_cdf(1 - (1 - power) / 2)
    n = max(2, math.ceil(2 * (sd * z_sum / margin) ** 2))
    while True:
        df = 2 * n - 2
        t_sum = float(student_t_upper(alpha, df) + student_t_upper((1 - power) / 2, df))
        if n >= 2 * (sd * t_sum / margin) ** 2:
            return n
        n += 1


def obrien_fleming_spent(fraction, alpha: float) -> np.ndarray:
    """The one-sided alpha spent up to information fraction t by Lan and DeMets's (1983) O'Brien-Fleming-type
    spending function, 2 - 2 Phi(z(1 - alpha / 2) / sqrt(t)): almost nothing early, alpha at t = 1."""
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return 2 * normal_sf(z / np.sqrt(np.asarray(fraction, dtype=np.float64)))


def sequential_levels(fractions: list[float], alpha: float) -> list[float]:
    """The nominal one-sided level of each look of a group-sequential test whose looks come at the information
    `fractions` (increasing, the last 1) and whose overall one-sided level is `alpha`, spent by the O'Brien-Fleming
    type function. Look k's boundary c_k makes the chance of first crossing at look k, under the null, the
    alpha spent between looks k - 1 and k; the standardized statistics Z_k are jointly normal with
    Z_k | Z_(k-1) = u ~ N(u sqrt(t_(k-1) / t_k), 1 - t_(k-1) / t_k), and the density of not yet having crossed is
    carried from look to look on a grid (Simpson's rule), as Armitage, McPherson and Rowe's recursion does."""
    spent = obrien_fleming_spent(fractions, alpha)
    levels = [float(spent[0])]
    boundary = -statistics.NormalDist().inv_cdf(max(levels[0], 1e-300))
    grid, weights = simpson_grid(-10.0, boundary, 0.02)
    density = np.exp(-(grid**2) / 2) / math.sqrt(2 * math.pi)
    for k in range(1, len(fractions)):
        ratio = fractions[k - 1] / fractions[k]
        spread = math.sqrt(1 - ratio)
        mass = weights * density

        def crossing(c, mass=mass, grid=grid, ratio=ratio, spread=spread):
            return float(np.sum(mass * normal_sf((c - grid * math.sqrt(ratio)) / spread)))

        target = float(spent[k] - spent[k - 1])
        low, high = -10.0, 40.0
        for _ in range(64):
            middle = (low + high) / 2
            if crossing(middle) > target:
                low = middle
            else:
                high = middle
        boundary = (low + high) / 2
        levels.append(float(normal_sf(boundary)))
        new_grid, new_weights = simpson_grid(-10.0, boundary, min(0.02, spread / 10))
        shifted = (new_grid[:, None] - grid[None, :] * math.sqrt(ratio)) / spread
        kernel = np.exp(-(shifted**2) / 2) / (spread * math.sqrt(2 * math.pi))
        density = kernel @ mass
        grid, weights = new_grid, new_weights
    return levels


def simpson_grid(start: float, stop: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Points from `start` to `stop`, an odd number spaced at most `step` apart, and Simpson's rule's weights."""
    intervals = max(2, 2 * math.ceil((stop - start) / (2 * step)))
    points = np.linspace(start, stop, intervals + 1)
    spacing = (stop - start) / intervals
    weights = np.full(intervals + 1, 2.0)
    weights[1::2] = 4.0
    weights[0] = weights[-1] = 1.0
    return points, weights * spacing / 3


@dataclass
class Equivalence:
    baseline_iqm: tuple[float, float, float]
    """the IQM and its 95% bootstrap interval"""
    candidate_iqm: tuple[float, float, float]
    difference: tuple[float, float, float]
    """mean(candidate) - mean(baseline) and its (1 - 2 alpha) Welch interval"""
    margin: float
    """delta, in the score's units"""
    alpha: float
    p_value: float
    """the two one-sided tests' p-value (the larger of the two)"""
    seeds: tuple[int, int]
    verdict: str


def equivalence(baseline: np.ndarray, candidate: np.ndarray, margin: float, alpha: float, samples: int, seed=0):
    """Whether two groups of run scores are the same within ±`margin` (in the scores' units), by the two one-sided
    tests at `alpha` on Welch's interval; with each side's IQM and its bootstrap interval, for description."""
    rng = np.random.default_rng(seed)

    def iqm_with_interval(scores):
        low, high = np.percentile(iqm(resampled(scores, samples, rng)), [2.5, 97.5])
        return float(iqm(scores)), float(low), float(high)

    welch = welch_interval(baseline, candidate, alpha)
    low, high = float(welch.low), float(welch.high)
    return Equivalence(
        baseline_iqm=iqm_with_interval(baseline),
        candidate_iqm=iqm_with_interval(candidate),
        difference=(float(welch.difference), low, high),
        margin=margin,
        alpha=alpha,
        p_value=float(tost_p_value(welch, margin)),
        seeds=(len(baseline), len(candidate)),
        verdict=tost_verdict(low, high, margin),
    )


def equivalence_table(results: dict[str, Equivalence], variants: list[str], metric: str, score: str) -> str:
    def cell(value):
        return f"{value[0]:.2f} [{value[1]:.2f}, {value[2]:.2f}]"

    baseline, candidate = variants
    levels = sorted({e.alpha for e in results.values()})
    widths = ", ".join(f"{1 - 2 * level:.4g}".rstrip("0").rstrip(".") for level in levels)
    header = [
        "environment",
        f"{baseline} IQM",
        f"{candidate} IQM",
        "difference of means",
        "margin",
        "seeds",
        "TOST p",
        "verdict",
    ]
    rows = [
        [
            env_id,
            cell(e.baseline_iqm),
            cell(e.candidate_iqm),
            cell(e.difference),
            f"±{e.margin:.2f}",
            f"{e.seeds[0]} / {e.seeds[1]}",
            f"{e.p_value:.3g}",
            e.verdict,
        ]
        for env_id, e in results.items()
    ]
    scored = (
        f"its average `{metric}` over its last values (--last-episodes)"
        if score == "last"
        else f"the mean of its `{metric}` curve over all its steps (the area under it over the steps run)"
    )
    notes = (
        f"A run's score: {scored}. IQM: the mean of the middle half of the scores, with its 95% bootstrap interval "
        f"in brackets, for description. Difference: mean({candidate}) - mean({baseline}), with its Welch interval "
        f"at {widths} (1 - 2 alpha). TOST p: the larger p-value of the two one-sided tests against -margin and "
        "+margin. Equivalent: the interval lies inside ±margin; not equivalent, better or worse: it lies wholly "
        "above +margin or below -margin; inconclusive: neither (more seeds may decide)."
    )
    return markdown_table(header, rows) + "\n\n" + notes + "\n"


# ---- protocols: comparisons planned before their runs --------------------------------------------------------------

PROTOCOL_REQUIRED = {
    "baseline": str,
    "candidate": str,
    "env_id": str,
    "total_timesteps": int,
    "score": str,
    "margin": (int, float),
    "alpha": float,
    "seeds": int,
    "fixed": datetime.date,
}
PROTOCOL_OPTIONAL = {
    "last_episodes": int,
    "looks": list,
    "spending": str,
    "power": float,
    "pilot_sd": (int, float),
    "pilot_source": str,
    "margin_reason": str,
    "post_hoc": bool,
    "history": str,
}


@dataclass
class Protocol:
    """A planned comparison (benchmark/protocols/*.toml); `looks` are the seeds a side at each reading, the last
    of them `seeds`."""

    path: Path
    baseline: str
    candidate: str
    env_id: str
    total_timesteps: int
    score: str
    last_episodes: int
    margin: float
    alpha: float
    seeds: int
    looks: list[int]
    fixed: datetime.date
    post_hoc: bool
    levels: list[float]
    """each look's nominal one-sided level (alpha alone for a single look)"""


def load_protocol(path: Path) -> Protocol:
    """Reads and checks a protocol file; a missing or malformed field is a UserError."""
    try:
        fields = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the protocol {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"the protocol {path} is not valid TOML: {e}") from None
    unknown = sorted(set(fields) - set(PROTOCOL_REQUIRED) - set(PROTOCOL_OPTIONAL))
    if unknown:
        raise UserError(f"the protocol {path} has unknown fields {unknown}: check their spelling")
    for name, kind in {**PROTOCOL_REQUIRED, **PROTOCOL_OPTIONAL}.items():
        if name in PROTOCOL_REQUIRED and name not in fields:
            raise UserError(f"the protocol {path} lacks the field {name!r}")
        if name in fields and (not isinstance(fields[name], kind) or isinstance(fields[name], bool) != (kind is bool)):
            raise UserError(f"the protocol {path}'s field {name!r} has the wrong type: {fields[name]!r}")
    looks = fields.get("looks", [fields["seeds"]])
    problems = [
        (fields["score"] not in ("last", "auc"), f'score must be "last" or "auc", not {fields["score"]!r}'),
        (fields["margin"] <= 0, "margin must be positive (an absolute delta, in the score's units)"),
        (not 0 < fields["alpha"] < 0.5, "alpha must lie between 0 and 0.5"),
        (fields["seeds"] < 2, "seeds must be at least 2"),
        (fields.get("last_episodes", 100) < 1, "last_episodes must be at least 1"),
        (
            not all(isinstance(n, int) and n >= 2 for n in looks) or looks != sorted(set(looks)),
            "looks must be increasing whole numbers of seeds a side, each at least 2",
        ),
        (looks[-1] != fields["seeds"], f"the last look ({looks[-1]}) must be seeds ({fields['seeds']})"),
        (fields.get("spending", "obrien-fleming") != "obrien-fleming", 'spending must be "obrien-fleming"'),
    ]
    for failed, message in problems:
        if failed:
            raise UserError(f"the protocol {path}: {message}")
    levels = sequential_levels([n / looks[-1] for n in looks], fields["alpha"]) if len(looks) > 1 else [fields["alpha"]]
    return Protocol(
        path=path,
        baseline=fields["baseline"],
        candidate=fields["candidate"],
        env_id=fields["env_id"],
        total_timesteps=fields["total_timesteps"],
        score=fields["score"],
        last_episodes=fields.get("last_episodes", 100),
        margin=float(fields["margin"]),
        alpha=fields["alpha"],
        seeds=fields["seeds"],
        looks=looks,
        fixed=fields["fixed"],
        post_hoc=fields.get("post_hoc", False),
        levels=levels,
    )


def check_protocol(protocol: Protocol, baseline_runs: list[RunLog], candidate_runs: list[RunLog]) -> int:
    """Whether the runs found follow the protocol: its steps, distinct seeds on each side, and as many a side as
    one of its looks; returns that look's index, or raises a UserError that says what differs."""
    where = f"the protocol {protocol.path}"
    for runs in (baseline_runs, candidate_runs):
        unknown = [run.path.name for run in runs if run.total_timesteps is None]
        if unknown:
            raise UserError(f"{where} fixes the steps, but {len(unknown)} runs did not log theirs (e.g. {unknown[0]})")
        other = [run for run in runs if run.total_timesteps != protocol.total_timesteps]
        if other:
            raise UserError(
                f"{where} fixes {protocol.total_timesteps} steps, but {other[0].path.name} ran "
                f"{other[0].total_timesteps}"
            )
        seeds = [run.seed for run in runs]
        if len(set(seeds)) < len(seeds):
            raise UserError(f"{where} counts each seed once, but {runs[0].exp_name} has a seed twice: {sorted(seeds)}")
    counts = (len(baseline_runs), len(candidate_runs))
    if counts[0] != counts[1] or counts[0] not in protocol.looks:
        looks = ", ".join(str(n) for n in protocol.looks)
        raise UserError(
            f"{where} reads the data at {looks} seeds a side, but found {counts[0]} runs of {protocol.baseline} "
            f"and {counts[1]} of {protocol.candidate}: run the seeds up to a planned look"
        )
    return protocol.looks.index(counts[0])


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
    if args.power is not None:
        plan_seeds(args)
        return []
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
    if args.compare or args.protocol:
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


def checked_level(alpha: float | None) -> float:
    """--alpha, 0.05 when not given."""
    level = 0.05 if alpha is None else alpha
    if not 0 < level < 0.5:
        raise UserError(f"--alpha must lie between 0 and 0.5 (the level of each one-sided test), got {level}")
    return level


def plan_seeds(args: Args) -> None:
    """--power SD: prints the seeds a side that --margin-abs needs at --alpha and --target-power."""
    if args.compare or args.protocol:
        raise UserError("--power plans a comparison before its runs; it takes no --compare or --protocol")
    if args.margin_abs is None:
        raise UserError("--power needs --margin-abs, the margin delta in the score's units")
    if args.power <= 0 or args.margin_abs <= 0:
        raise UserError(f"--power and --margin-abs must be positive, got {args.power} and {args.margin_abs}")
    if not 0 < args.target_power < 1:
        raise UserError(f"--target-power must lie between 0 and 1, got {args.target_power}")
    alpha = checked_level(args.alpha)
    seeds = seeds_needed(args.power, args.margin_abs, alpha, args.target_power)
    print(
        f"{seeds} seeds a side: where the two variants do not differ and a run's score has standard deviation "
        f"{args.power:g}, the two one-sided tests at alpha {alpha:g} (the {1 - 2 * alpha:.0%} interval inside "
        f"±{args.margin_abs:g}) call them equivalent with probability {args.target_power:.0%} or more"
    )


def compare_settings(args: Args) -> tuple[list[str], Protocol | None]:
    """The two variants and the protocol (None without --protocol), after checking the flags --compare takes."""
    if args.bootstrap_samples < 100:
        raise UserError(f"--bootstrap-samples must be at least 100, got {args.bootstrap_samples}")
    if args.protocol is None:
        if len(args.compare) != 2 or len(set(args.compare)) != 2:
            raise UserError(f"--compare takes two different variants, BASELINE CANDIDATE; got {args.compare}")
        if args.margin is not None and args.margin_abs is not None:
            raise UserError("give --margin (a fraction of the baseline's mean) or --margin-abs, not both")
        if args.margin is not None and not 0 < args.margin < 1:
            raise UserError(f"--margin must lie between 0 and 1 (a fraction of the baseline's mean), got {args.margin}")
        if args.margin_abs is not None and args.margin_abs <= 0:
            raise UserError(f"--margin-abs must be positive, got {args.margin_abs}")
        checked_level(args.alpha)
        return args.compare, None
    protocol = load_protocol(Path(args.protocol))
    planned = [protocol.baseline, protocol.candidate]
    where = f"the protocol {protocol.path}"
    if args.compare and args.compare != planned:
        raise UserError(f"{where} compares {planned[0]} with {planned[1]}, not {' with '.join(args.compare)}")
    if (args.margin, args.margin_abs, args.alpha) != (None, None, None):
        raise UserError(f"{where} fixes the margin and alpha: drop --margin, --margin-abs and --alpha")
    if args.env_ids and args.env_ids != [protocol.env_id]:
        raise UserError(f"{where} is about {protocol.env_id} alone, not {' '.join(args.env_ids)}")
    if args.include_unfinished:
        raise UserError(f"{where} counts finished runs only: drop --include-unfinished")
    return planned, protocol


def protocol_line(protocol: Protocol, look: int) -> str:
    """One line saying that the runs follow the protocol, at which look, and at which level."""
    line = (
        f"protocol {protocol.path}, fixed {protocol.fixed}: the runs follow it ({protocol.baseline} against "
        f"{protocol.candidate} on {protocol.env_id}, {protocol.total_timesteps} steps, {protocol.looks[look]} seeds "
        f"a side: look {look + 1} of {len(protocol.looks)}, one-sided level {protocol.levels[look]:.3g}; margin "
        f"±{protocol.margin:g})"
    )
    if protocol.post_hoc:
        line += "; written after its runs (post hoc), so its verdict describes these data and tests no plan"
    return line


def compare(args: Args, runs_dir: Path) -> list[Path]:
    """--compare: the equivalence table and the curves of the two variants, for every environment both ran."""
    variants, protocol = compare_settings(args)
    env_ids = [protocol.env_id] if protocol else args.env_ids
    groups = load_groups(runs_dir, variants, env_ids, args.metric, args.include_unfinished)
    both = {env_id for env_id, _ in groups if all((env_id, variant) in groups for variant in variants)}
    if not both:
        raise UserError(f"no environment under {runs_dir} has runs of both {variants[0]} and {variants[1]}")
    env_ids = ordered(env_ids, both, "environment with runs of both")
    results = {}
    lines = []
    baseline, candidate = variants
    for env_id in env_ids:
        base_runs, cand_runs = groups[env_id, baseline], groups[env_id, candidate]
        if protocol:
            look = check_protocol(protocol, base_runs, cand_runs)
            lines.append(protocol_line(protocol, look))
            score, last_episodes, alpha = protocol.score, protocol.last_episodes, protocol.levels[look]
        else:
            score, last_episodes, alpha = args.score, args.last_episodes, checked_level(args.alpha)
        base_scores = scores_of(base_runs, score, last_episodes)
        cand_scores = scores_of(cand_runs, score, last_episodes)
        if protocol:
            margin = protocol.margin
        elif args.margin_abs is not None:
            margin = args.margin_abs
        else:
            margin = (0.1 if args.margin is None else args.margin) * abs(float(base_scores.mean()))
        result = equivalence(base_scores, cand_scores, margin, alpha, args.bootstrap_samples)
        if protocol and result.verdict == INCONCLUSIVE and look + 1 < len(protocol.looks):
            result.verdict += f" at look {look + 1}: go on to {protocol.looks[look + 1]} seeds a side"
        results[env_id] = result
    table = equivalence_table(results, variants, args.metric, protocol.score if protocol else args.score)
    table = "".join(line + "\n\n" for line in lines) + table
    print(table)
    curves = (("steps", "equivalence_steps.png"),)
    return write_outputs(args, "equivalence.md", table, groups, env_ids, variants, curves)


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog="python -m cleanrl_utils.report")
    try:
        written = report(args)
    except UserError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    if written:
        print("report: wrote " + ", ".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
