"""cleanrl_utils/report.py: scores, tables and learning curves from TensorBoard logs written here by the tests."""

import re
import statistics
import time
import tomllib

import numpy as np
import pytest
from helpers import ROOT, assert_user_error, run_script
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils import report

METRIC = "charts/episodic_return"


def write_run(runs_dir, name, values, start=1000.0, seconds_per_episode=6.0, tag=METRIC):
    """A run folder whose episode i ends at step 100 * (i + 1), `seconds_per_episode` after episode i - 1."""
    writer = SummaryWriter(str(runs_dir / name))
    for i, value in enumerate(values):
        writer.add_scalar(tag, value, 100 * (i + 1), walltime=start + i * seconds_per_episode)
    return writer


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    runs = tmp_path_factory.mktemp("report") / "runs"
    # 150 episodes 0..149: the score is the mean of the last 100, 50..149 = 99.5; SPS is logged a minute earlier
    with write_run(runs, "CartPole-v1__ppo__1__100", range(150)) as writer:
        writer.add_scalar("charts/SPS", 1000, 0, walltime=940.0)
    write_run(runs, "CartPole-v1__ppo__2__100", [80.0] * 40).close()
    write_run(runs, "CartPole-v1__ppo_lstm__1__100", [10.0] * 5).close()
    for seed, value in [(1, -100.0), (2, -90.0), (3, -80.0)]:
        with write_run(runs, f"Acrobot-v1__ppo__{seed}__100", [value] * 10) as writer:
            writer.add_scalar("charts/episodic_length", -value, 100)
    for seed, value in [(1, 500.0), (2, 700.0)]:
        write_run(runs, f"dm_control/cartpole-balance-v0__ppo_continuous_action__{seed}__100", [value] * 3).close()
    return runs


def report_cli(*args, cwd):
    return run_script(ROOT / "cleanrl_utils" / "report.py", *args, cwd=cwd, check=False, timeout=120)


def table_cells(markdown):
    """{environment: {column: cell}} from the table at the top of `markdown`."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    header, rows = split[0], split[2:]
    return {row[0]: dict(zip(header[1:], row[1:])) for row in rows}


def test_runs_are_grouped_by_variant_and_environment(runs_dir):
    groups = report.load_groups(runs_dir, [], [], METRIC)
    assert {key: sorted(run.seed for run in runs) for key, runs in groups.items()} == {
        ("CartPole-v1", "ppo"): [1, 2],
        ("CartPole-v1", "ppo_lstm"): [1],
        ("Acrobot-v1", "ppo"): [1, 2, 3],
        ("dm_control/cartpole-balance-v0", "ppo_continuous_action"): [1, 2],
    }
    filtered = report.load_groups(runs_dir, ["ppo"], ["Acrobot-v1", "CartPole-v1"], METRIC)
    assert set(filtered) == {("Acrobot-v1", "ppo"), ("CartPole-v1", "ppo")}
    assert set(report.load_groups(runs_dir, [], [], "charts/episodic_length")) == {("Acrobot-v1", "ppo")}


def test_scores_are_last_100_episode_means_with_population_std(runs_dir):
    groups = report.load_groups(runs_dir, [], [], METRIC)
    cartpole = report.summarise(groups["CartPole-v1", "ppo"], last_episodes=100)
    # seed 1: mean of 50..149 = 99.5; seed 2 has fewer than 100 episodes, all of them count: 80
    assert (cartpole.mean, cartpole.std, cartpole.seeds) == (pytest.approx(89.75), pytest.approx(9.75), 2)
    # runtime: seed 1 from its SPS at 940 s to its last episode at 1000 + 149 * 6 s; seed 2 39 * 6 s
    assert cartpole.runtime_minutes == pytest.approx(((60 + 149 * 6) / 60 + 39 * 6 / 60) / 2)
    acrobot = report.summarise(groups["Acrobot-v1", "ppo"], last_episodes=100)
    assert acrobot.mean == pytest.approx(-90.0)
    assert acrobot.std == pytest.approx(np.sqrt(200 / 3)), "numpy's population std, not the sample one (10)"
    assert report.summarise(groups["CartPole-v1", "ppo"], last_episodes=10).mean == pytest.approx((144.5 + 80) / 2)
    seed1 = next(run for run in groups["CartPole-v1", "ppo"] if run.seed == 1)
    assert seed1.minutes[:2] == pytest.approx([1.0, 1.1]), "wall time counts from the run's first scalar"


def test_table_and_plots(runs_dir, tmp_path, capsys):
    assert report.main(["--runs-dir", str(runs_dir), "--output-dir", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "table.md").read_text()
    assert table in capsys.readouterr().out, "the table is printed too"
    cells = table_cells(table)
    assert list(cells) == ["Acrobot-v1", "CartPole-v1", "dm_control/cartpole-balance-v0"]
    assert cells["CartPole-v1"]["ppo"] == "89.75 ± 9.75" and cells["CartPole-v1"]["ppo seeds"] == "2"
    assert cells["CartPole-v1"]["ppo runtime (min)"] == "9.90"
    assert cells["CartPole-v1"]["ppo_lstm"] == "10.00 ± 0.00"
    assert cells["Acrobot-v1"]["ppo"] == "-90.00 ± 8.16" and cells["Acrobot-v1"]["ppo_lstm"] == ""
    assert cells["dm_control/cartpole-balance-v0"]["ppo_continuous_action"] == "600.00 ± 100.00"
    assert "population std" in table
    for name in ("curves_steps.png", "curves_walltime.png"):
        png = (tmp_path / "out" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_reference_columns(runs_dir, tmp_path):
    args = ["--runs-dir", str(runs_dir), "--output-dir", str(tmp_path), "--compare-reference", "--no-plots"]
    assert report.main([*args, "--exp-names", "ppo", "ppo_continuous_action"]) == 0
    cells = table_cells((tmp_path / "table.md").read_text())
    assert cells["CartPole-v1"]["ppo reference"] == "490.04 ± 6.12"
    assert cells["CartPole-v1"]["ppo baseline"] == "497.54 ± 4.02"
    assert cells["Acrobot-v1"]["ppo reference"] == "-86.36 ± 1.32"
    nested = cells["dm_control/cartpole-balance-v0"]
    assert nested["ppo_continuous_action reference"] == "855.47 ± 22.06"
    assert "ppo_continuous_action baseline" not in nested, "no baseline was published for it"
    assert not (tmp_path / "curves_steps.png").exists()


def test_reference_scores_data():
    reference = report.load_reference()
    assert len(reference) == 35
    assert all(entry["statistic"] in ("episodic_return", "episodic_length") for entry in reference.values())
    isaacgym = reference["ppo_continuous_action_isaacgym", "Ant"]
    assert report.reference_cells(isaacgym, METRIC) == ("3953.30 ± 667.09", "5873.05 (rl_games)")
    pong = reference["ppo_pettingzoo_ma_atari", "pong_v3"]
    assert report.reference_cells(pong, "charts/episodic_length-player0") == ("4153.60 ± 190.80", "")
    assert report.reference_cells(pong, METRIC)[0] == "4153.60 ± 190.80 (episodic length)"
    assert report.reference_cells(reference["ppo_atari_envpool_xla_jax", "Pong-v5"], "charts/avg_episodic_return") == (
        "20.39 ± 0.24",
        "20.45 ± 0.81",
    )


def test_curves_are_interpolated_onto_a_common_grid():
    # two seeds of y = x / 10 logged at different steps; the grid spans where both have data: 50 to 200
    first = (np.array([0.0, 100, 200]), np.array([0.0, 10, 20]))
    second = (np.array([50.0, 150, 250]), np.array([5.0, 15, 25]))
    grid, ys = report.align([first, second], points=4)
    np.testing.assert_allclose(grid, [50, 100, 150, 200])
    np.testing.assert_allclose(ys, [[5, 10, 15, 20], [5, 10, 15, 20]])
    # episodes finishing at the same step are averaged first
    x, y = report.merge_repeats(np.array([10.0, 20, 10, 20]), np.array([1.0, 4, 3, 8]))
    np.testing.assert_allclose(x, [10, 20])
    np.testing.assert_allclose(y, [2, 6])


def test_a_resumed_run_reads_as_it_went_on_without_a_warning(tmp_path, caplog, monkeypatch):
    """A run stopped after logging episodes 1-8 and resumed from its checkpoint at step 500 (as checkpoint/run.py does:
    purge_step) logs its own steps 500-800 again: the reader keeps the resumed ones and says nothing about it."""
    name = "CartPole-v1__ppo__1__100"
    write_run(tmp_path, name, [1.0] * 8).close()
    # The resumed run starts later, in another process, so its event file's name (the time in seconds first) sorts
    # after the first one's, and the reader reads the files in that order. Both writers here are made in the same
    # second by one process, where only the names' last number, a counter, would tell them apart (and "10" sorts
    # before "9"): the resumed writer is made a minute later instead.
    a_minute_later = time.time() + 60
    monkeypatch.setattr(time, "time", lambda: a_minute_later)
    resumed = SummaryWriter(str(tmp_path / name), purge_step=500)
    monkeypatch.undo()
    for step in range(500, 900, 100):
        resumed.add_scalar(METRIC, 2.0, step, walltime=2000.0 + step)
    resumed.close()
    run = report.load_run(tmp_path / name, "CartPole-v1", "ppo", 1, METRIC)
    assert run.steps.tolist() == [100, 200, 300, 400, 500, 600, 700, 800]
    assert run.values.tolist() == [1.0] * 4 + [2.0] * 4
    assert not [record for record in caplog.records if "out of order" in record.getMessage()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("CartPole-v1__ppo__1__1700000000", ("CartPole-v1", "ppo", 1)),
        (
            "dm_control/cartpole-balance-v0__ppo_continuous_action__3__17",
            ("dm_control/cartpole-balance-v0", "ppo_continuous_action", 3),
        ),
        ("CartPole-v1__ppo__one__17", None),
        ("notes", None),
    ],
)
def test_run_folder_names(name, expected):
    assert report.parse_run_name(name) == expected


def test_other_folders_are_left_out_with_a_warning(tmp_path, capsys):
    write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0, 3.0]).close()
    write_run(tmp_path / "runs", "scratch", [5.0]).close()
    assert report.main(["--runs-dir", str(tmp_path / "runs"), "--output-dir", str(tmp_path), "--no-plots"]) == 0
    out = capsys.readouterr()
    assert "scratch is not named env_id__exp_name__seed__time; left out" in out.err
    assert table_cells(out.out)["CartPole-v1"]["ppo"] == "2.00 ± 0.00"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--runs-dir", "missing"], "no runs folder missing"),
        (["--runs-dir", "runs", "--last-episodes", "0"], "--last-episodes must be at least 1"),
        (["--runs-dir", "runs", "--exp-names", "ppo_atari"], "no run folder under runs matches --exp-names ppo_atari"),
        (
            ["--runs-dir", "runs", "--metric", "charts/nope"],
            "none of the 1 runs under runs logs the scalar 'charts/nope'",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0]).close()
    proc = report_cli(*args, "--output-dir", "out", cwd=tmp_path)
    assert_user_error(proc, "report: error:", fragment)
    assert not (tmp_path / "out").exists()


def hyperparameters_text(total_timesteps, batch_size):
    """The hyperparameters table every script logs as text, with the two fields the report reads."""
    rows = {"env_id": "CartPole-v1", "total_timesteps": total_timesteps, "batch_size": batch_size, "seed": 1}
    return "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in rows.items())


@pytest.mark.parametrize(
    ("total_timesteps", "batch_size", "planned"), [(1000, 100, 1000), (1050, 100, 1000), (99, 100, 0)]
)
def test_planned_last_step_is_whole_batches(total_timesteps, batch_size, planned):
    assert report.planned_last_step(hyperparameters_text(total_timesteps, batch_size)) == planned
    assert report.planned_last_step("|param|value|\n|-|-|\n|seed|1|") is None


def test_unfinished_runs_are_left_out_unless_asked(tmp_path, capsys):
    runs = tmp_path / "runs"
    # seed 1 finished (episodes end at steps 100..1000, 1000 planned); seed 2 stopped at step 500 of 1000
    for seed, episodes, total in [(1, 10, 1050), (2, 5, 1000)]:
        with write_run(runs, f"CartPole-v1__ppo__{seed}__100", [10.0 * seed] * episodes) as writer:
            writer.add_text("hyperparameters", hyperparameters_text(total, 100))
    argv = ["--runs-dir", str(runs), "--output-dir", str(tmp_path), "--no-plots"]
    assert report.main(argv) == 0
    out = capsys.readouterr()
    assert table_cells(out.out)["CartPole-v1"]["ppo"] == "10.00 ± 0.00"
    assert "CartPole-v1__ppo__2__100 stopped at step 500 of 1000 (unfinished or still running); left out" in out.err
    assert report.main([*argv, "--include-unfinished"]) == 0
    assert table_cells(capsys.readouterr().out)["CartPole-v1"]["ppo"] == "15.00 ± 5.00"


def test_only_unfinished_runs_is_a_user_error(tmp_path):
    with write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0] * 3) as writer:
        writer.add_text("hyperparameters", hyperparameters_text(1000, 100))
    proc = report_cli("--runs-dir", "runs", "--output-dir", "out", cwd=tmp_path)
    assert_user_error(proc, "report: error:", "all 1 runs under runs that log 'charts/episodic_return' are unfinished")


# ---- --compare: do two variants learn the same? ------------------------------------------------------------------


def test_iqm_is_the_mean_of_the_middle_half():
    scores = np.array([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -50.0])  # a quarter (2 of 8) cut from each end
    assert report.iqm(scores) == pytest.approx(3.5)
    from scipy.stats import trim_mean

    rng = np.random.default_rng(3)
    for size in (4, 5, 10, 13):
        sample = rng.normal(size=size)
        assert report.iqm(sample) == pytest.approx(trim_mean(sample, 0.25))


def test_student_t_matches_scipy():
    from scipy import stats

    for df in (1.0, 2.5, 4.0, 9.3, 30.0, 285.1):
        t = np.array([-3.0, 0.0, 0.5, 1.7, 5.0, 40.0])
        np.testing.assert_allclose(report.student_t_sf(t, df), stats.t.sf(t, df), rtol=1e-9, atol=1e-14)
        tails = np.array([0.5, 0.1, 0.05, 1e-3, 1e-9])
        np.testing.assert_allclose(report.student_t_upper(tails, df), stats.t.isf(tails, df), rtol=1e-9, atol=1e-12)


def test_welch_interval_matches_scipy():
    from scipy import stats

    rng = np.random.default_rng(5)
    baseline = rng.normal(100.0, 5.0, size=7)
    candidate = rng.normal(103.0, 15.0, size=11)
    welch = report.welch_interval(baseline, candidate, alpha=0.05)
    reference = stats.ttest_ind(candidate, baseline, equal_var=False).confidence_interval(confidence_level=0.9)
    assert float(welch.difference) == pytest.approx(candidate.mean() - baseline.mean())
    assert (float(welch.low), float(welch.high)) == pytest.approx((reference.low, reference.high), rel=1e-9)


def coverage(draw_baseline, draw_candidate, true_difference, seeds, simulations=2000):
    """The share of simulated pairs of groups, `seeds` runs a side, whose 90% Welch interval holds the true
    difference, and the shares it misses below and above."""
    welch = report.welch_interval(draw_baseline((simulations, seeds)), draw_candidate((simulations, seeds)), 0.05)
    above = float(np.mean(welch.low >= true_difference))
    below = float(np.mean(welch.high <= true_difference))
    return 1 - above - below, above, below


@pytest.mark.parametrize("seeds", [5, 10])
@pytest.mark.parametrize("shape", ["normal", "skewed"])
def test_the_90_percent_interval_covers_the_difference_9_times_in_10(shape, seeds):
    """2,000 simulated comparisons, unequal spreads (the candidate's three times the baseline's): normal scores, and
    right-skewed ones (gamma with shape 4, skewness 1). With skew, the misses lean to one side: the interval's
    upper end falls below the true difference up to 9-10% of the time where 5% is meant (the docs say so)."""
    rng = np.random.default_rng(2026 + seeds)
    if shape == "normal":
        covered, above, below = coverage(
            lambda size: rng.normal(10.0, 1.0, size), lambda size: rng.normal(12.0, 3.0, size), 2.0, seeds
        )
        assert above < 0.07 and below < 0.07
    else:
        covered, above, below = coverage(
            lambda size: rng.gamma(4.0, 1.0, size), lambda size: rng.gamma(4.0, 3.0, size), 8.0, seeds
        )
        assert above < 0.05 and below < 0.10
    assert 0.88 <= covered <= 0.92


def test_the_interval_under_covers_strongly_skewed_scores_at_5_seeds():
    """The limit the docs state: exponential scores (skewness 2), spreads 1 and 3, five seeds a side."""
    rng = np.random.default_rng(11)
    covered, _, below = coverage(
        lambda size: rng.exponential(1.0, size), lambda size: rng.exponential(3.0, size), 2.0, 5
    )
    assert covered < 0.88 and below > 0.1


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (-9.0, 9.0, report.EQUIVALENT),
        (3.0, 6.0, report.EQUIVALENT),
        (11.0, 30.0, report.BETTER),
        (-30.0, -10.5, report.WORSE),
        (5.0, 12.0, report.INCONCLUSIVE),
        (-12.0, 12.0, report.INCONCLUSIVE),
        (-10.0, 0.0, report.INCONCLUSIVE),
    ],
)
def test_the_verdict_is_where_the_interval_lies_against_the_margin(low, high, verdict):
    assert report.tost_verdict(low, high, margin=10.0) == verdict


@pytest.mark.parametrize(
    ("shift", "spread", "verdict"),
    [(0.0, 5.0, "equivalent"), (80.0, 5.0, "not equivalent, better"), (-80.0, 5.0, "not equivalent, worse")]
    + [(0.0, 400.0, "inconclusive")],
    ids=["same", "better", "worse", "too-noisy"],
)
def test_equivalence_of_scores(shift, spread, verdict):
    rng = np.random.default_rng(0)
    baseline = 500.0 + rng.normal(scale=5.0, size=10)
    candidate = 500.0 + shift + rng.normal(scale=spread, size=10)
    result = report.equivalence(baseline, candidate, margin=50.0, alpha=0.05, samples=2000)
    assert result.verdict == verdict
    difference, low, high = result.difference
    assert low <= difference <= high and difference == pytest.approx(candidate.mean() - baseline.mean())
    assert (result.p_value < 0.05) == (verdict == "equivalent")
    iqm, low, high = result.baseline_iqm
    assert low <= iqm <= high and iqm == pytest.approx(report.iqm(baseline))
    # the same scores give the same intervals: the resamples are drawn from a fixed seed
    assert report.equivalence(baseline, candidate, margin=50.0, alpha=0.05, samples=2000) == result


@pytest.fixture(scope="module")
def synthetic_groups(tmp_path_factory):
    """Run folders of four made-up tasks, a run's score the value of its three episodes, the baseline's mean 1000:
    the same distribution with 40 seeds a side; a candidate 20% better, 40 seeds; one 5% better, 60 seeds; a noisy
    task (standard deviation 400) with 4 seeds a side."""
    runs = tmp_path_factory.mktemp("groups") / "runs"
    rng = np.random.default_rng(76)
    tasks = {
        "Same-v0": (40, 1000.0, 50.0),
        "Better-v0": (40, 1200.0, 50.0),
        "Slightly-v0": (60, 1050.0, 50.0),
        "Noisy-v0": (4, 1000.0, 400.0),
    }
    for env_id, (seeds, candidate_mean, spread) in tasks.items():
        for exp_name, mean in (("ppo", 1000.0), ("ppo_torchcompile", candidate_mean)):
            for seed, value in enumerate(rng.normal(mean, spread, size=seeds), start=1):
                with write_run(runs, f"{env_id}__{exp_name}__{seed}__100", [value] * 3) as writer:
                    writer.add_text("hyperparameters", hyperparameters_text(300, 100))
    return runs


def test_done_when_checks_on_synthetic_groups(synthetic_groups, tmp_path):
    argv = ["--runs-dir", str(synthetic_groups), "--compare", "ppo", "ppo_torchcompile", "--no-plots"]
    assert report.main([*argv, "--output-dir", str(tmp_path)]) == 0
    cells = table_cells((tmp_path / "equivalence.md").read_text())
    verdicts = {env_id: row["verdict"] for env_id, row in cells.items()}
    assert verdicts == {
        "Same-v0": "equivalent",
        "Better-v0": "not equivalent, better",
        "Slightly-v0": "equivalent",
        "Noisy-v0": "inconclusive",
    }
    assert cells["Slightly-v0"]["seeds"] == "60 / 60" and cells["Noisy-v0"]["seeds"] == "4 / 4"
    # 5% better: the interval leaves out 0, which the old rule called "different", and lies inside ±10%
    difference, low, high = (float(x) for x in re.findall(r"-?\d+\.\d+", cells["Slightly-v0"]["difference of means"]))
    margin = float(cells["Slightly-v0"]["margin"].lstrip("±"))
    assert 0 < low < difference < high < margin and margin == pytest.approx(100.0, abs=5.0)


def test_power_gives_the_seeds_a_side():
    # the normal approximation's 2 (1.645 + 1.282)^2 = 17.13 sd^2 / delta^2, a little more with t quantiles
    assert report.seeds_needed(1.0, 0.5) == 70
    assert report.seeds_needed(1.0, 1.0) == 18
    assert report.seeds_needed(300.0, 238.0, alpha=0.05, power=0.8) == 29
    assert report.seeds_needed(1.0, 0.5, power=0.9) > 70
    # simulated: at 70 seeds a side, no true difference, the test calls equivalence about 80% of the time
    rng = np.random.default_rng(3)
    for seeds, low, high in ((70, 0.78, 0.85), (50, 0.55, 0.68)):
        welch = report.welch_interval(rng.normal(size=(2000, seeds)), rng.normal(size=(2000, seeds)), 0.05)
        assert low < np.mean((welch.low > -0.5) & (welch.high < 0.5)) < high


def test_power_on_the_command_line(capsys):
    assert report.main(["--power", "300", "--margin-abs", "238"]) == 0
    assert capsys.readouterr().out.startswith("29 seeds a side: ")


def test_sequential_levels_match_published_boundaries():
    """Lan-DeMets O'Brien-Fleming-type spending at one-sided 0.025, looks equally spaced: the boundaries z_k that
    R's gsDesign (sfLDOF) and ldbounds give, 2.963 and 1.969 for two looks, 4.877, 3.357, 2.680, 2.290, 2.031
    for five."""
    normal = statistics.NormalDist()

    def boundaries(fractions, alpha):
        return [-normal.inv_cdf(level) for level in report.sequential_levels(fractions, alpha)]

    assert boundaries([0.5, 1.0], 0.025) == pytest.approx([2.963, 1.969], abs=6e-4)
    assert boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.025) == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=6e-4)
    assert report.sequential_levels([1.0], 0.05) == pytest.approx([0.05])
    # two looks at overall one-sided 0.05: nominal levels 0.0056 and 0.0482 (not the 0.0026 and 0.048 of the
    # classical two-sided O'Brien-Fleming design at 0.05, whose first level is one-sided and second two-sided)
    assert report.sequential_levels([0.5, 1.0], 0.05) == pytest.approx([0.005575, 0.04825], abs=2e-5)


def test_sequential_levels_spend_alpha_as_planned():
    """Simulated standardized statistics at unequal looks (5, 10, 20, 25 of 25): the chance of first crossing by
    look k is the spending function at t_k."""
    fractions = [0.2, 0.4, 0.8, 1.0]
    levels = report.sequential_levels(fractions, 0.05)
    boundaries = np.array([-statistics.NormalDist().inv_cdf(level) for level in levels])
    rng = np.random.default_rng(9)
    paths = 400_000
    increments = rng.normal(size=(paths, 4)) * np.sqrt(np.diff([0.0, *fractions]))
    statistic = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    crossed_by = np.mean(np.cumsum(statistic > boundaries, axis=1) > 0, axis=0)
    spent = report.obrien_fleming_spent(fractions, 0.05)
    assert spent[-1] == pytest.approx(0.05)
    np.testing.assert_allclose(crossed_by, spent, atol=4 * np.sqrt(0.05 / paths) + 1e-5)


def test_area_under_the_curve_score():
    # returns 0 at step 100, 10 at step 300, held until step 400: (0 * 100 + 5 * 200 + 10 * 100) / 400
    steps = np.array([100.0, 300.0])
    assert report.curve_mean(steps, np.array([0.0, 10.0]), 400) == pytest.approx(5.0)
    # two episodes at one step count as their mean; the curve is flat at its first value before it
    assert report.curve_mean(np.array([200.0, 200.0]), np.array([2.0, 4.0]), 400) == pytest.approx(3.0)
    assert report.curve_mean(np.array([100.0, 500.0]), np.array([4.0, 8.0]), 300) == pytest.approx(4.0)


def test_compare_writes_the_table_and_the_curves(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in range(1, 6):
        write_run(runs, f"CartPole-v1__ppo__{seed}__100", [400.0 + seed] * 20).close()
        write_run(runs, f"CartPole-v1__ppo_torchcompile__{seed}__100", [401.0 + seed] * 20).close()
        write_run(runs, f"Acrobot-v1__ppo__{seed}__100", [-80.0 - seed] * 20).close()  # no candidate runs here
    args = ["--runs-dir", str(runs), "--compare", "ppo", "ppo_torchcompile", "--output-dir", str(tmp_path / "out")]
    assert report.main(args) == 0
    cells = table_cells((tmp_path / "out" / "equivalence.md").read_text())
    assert list(cells) == ["CartPole-v1"], "only the environments both variants ran"
    row = cells["CartPole-v1"]
    assert row["ppo IQM"].startswith("403.00 [") and row["ppo_torchcompile IQM"].startswith("404.00 [")
    # Welch: standard error sqrt(2.5 / 5 * 2) = 1, 8 degrees of freedom, t(0.95, 8) = 1.8595
    assert row["difference of means"] == "1.00 [-0.86, 2.86]" and row["seeds"] == "5 / 5"
    assert row["margin"] == "±40.30" and row["verdict"] == "equivalent"
    assert (tmp_path / "out" / "equivalence_steps.png").stat().st_size > 1000
    assert "equivalence.md" in capsys.readouterr().out
    assert report.main([*args, "--margin-abs", "2", "--alpha", "0.025", "--no-plots"]) == 0
    row = table_cells((tmp_path / "out" / "equivalence.md").read_text())["CartPole-v1"]
    assert row["margin"] == "±2.00" and row["verdict"] == "inconclusive"
    assert row["difference of means"] == "1.00 [-1.31, 3.31]", "a 95% interval at alpha 0.025: t(0.975, 8) = 2.306"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--compare", "ppo"], "--compare takes two different variants"),
        (["--compare", "ppo", "ppo"], "--compare takes two different variants"),
        (["--compare", "ppo", "ppo_torchcompile", "--margin", "0"], "--margin must lie between 0 and 1"),
        (["--compare", "ppo", "ppo_torchcompile", "--margin", "0.1", "--margin-abs", "3"], "not both"),
        (["--compare", "ppo", "ppo_torchcompile", "--margin-abs", "-1"], "--margin-abs must be positive"),
        (["--compare", "ppo", "ppo_torchcompile", "--alpha", "0.5"], "--alpha must lie between 0 and 0.5"),
        (["--compare", "ppo", "other"], "no environment under runs has runs of both ppo and other"),
        (["--power", "10"], "--power needs --margin-abs"),
        (["--power", "0", "--margin-abs", "3"], "--power and --margin-abs must be positive"),
    ],
)
def test_bad_compare_is_one_line_and_exit_2(tmp_path, args, fragment):
    write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0]).close()
    write_run(tmp_path / "runs", "Acrobot-v1__other__1__100", [1.0]).close()
    proc = report_cli("--runs-dir", "runs", *args, "--output-dir", "out", cwd=tmp_path)
    assert_user_error(proc, "report: error:", fragment)
    assert not (tmp_path / "out").exists()


# ---- protocols ---------------------------------------------------------------------------------------------------

PROTOCOLS = ROOT / "benchmark" / "protocols"


def test_committed_protocols_are_consistent():
    """Each file loads, plans at least the seeds its own power analysis asks for, and says whether it was written
    after its runs (all of them so far were)."""
    files = sorted(PROTOCOLS.glob("*.toml"))
    assert len(files) == 5
    for path in files:
        protocol = report.load_protocol(path)
        fields = tomllib.loads(path.read_text())
        needed = report.seeds_needed(fields["pilot_sd"], protocol.margin, protocol.alpha, fields["power"])
        assert protocol.seeds >= needed, path.name
        assert len(protocol.looks) == 1 or protocol.seeds == needed, f"{path.name}: a sequential plan ends at n"
        assert protocol.post_hoc and fields["history"] and fields["margin_reason"], path.name


def write_protocol(path, **changes):
    """A protocol for the synthetic Hopper runs below: 10 seeds a side read at 5 and 10, delta 100."""
    fields = {
        "baseline": '"ppo"',
        "candidate": '"ppo_torchcompile"',
        "env_id": '"Hopper-v4"',
        "total_timesteps": "1000",
        "score": '"last"',
        "margin": "100.0",
        "alpha": "0.05",
        "seeds": "10",
        "looks": "[5, 10]",
        "fixed": "2026-12-01",
    }
    fields.update(changes)
    path.write_text("".join(f"{key} = {value}\n" for key, value in fields.items() if value is not None))
    return path


def write_hopper_runs(runs, seeds, total_timesteps=1000, spread=20.0):
    rng = np.random.default_rng(seeds)
    for exp_name in ("ppo", "ppo_torchcompile"):
        for seed, value in enumerate(rng.normal(2000.0, spread, size=seeds), start=1):
            with write_run(runs, f"Hopper-v4__{exp_name}__{seed}__100", [value] * 10) as writer:
                writer.add_text("hyperparameters", hyperparameters_text(total_timesteps, 100))


def test_a_followed_protocol_is_applied(tmp_path, capsys):
    protocol = write_protocol(tmp_path / "plan.toml")
    write_hopper_runs(tmp_path / "runs", 10)
    write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0]).close()  # another task: not this protocol's
    argv = ["--runs-dir", str(tmp_path / "runs"), "--protocol", str(protocol), "--output-dir", str(tmp_path)]
    assert report.main([*argv, "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert (
        f"protocol {protocol}, fixed 2026-12-01: the runs follow it (ppo against ppo_torchcompile on Hopper-v4" in out
    )
    assert "10 seeds a side: look 2 of 2, one-sided level 0.0482; margin ±100)" in out
    cells = table_cells((tmp_path / "equivalence.md").read_text().split("\n\n", 1)[1])
    assert list(cells) == ["Hopper-v4"] and cells["Hopper-v4"]["verdict"] == "equivalent"
    assert cells["Hopper-v4"]["margin"] == "±100.00"
    # read at its first look, with a noisier task, the plan says to go on
    noisy = tmp_path / "noisy"
    write_hopper_runs(noisy, 5, spread=300.0)
    assert report.main(["--runs-dir", str(noisy), "--protocol", str(protocol), "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "look 1 of 2, one-sided level 0.00557" in out
    assert "inconclusive at look 1: go on to 10 seeds a side" in out


def test_a_post_hoc_protocol_says_so(tmp_path, capsys):
    protocol = write_protocol(tmp_path / "plan.toml", post_hoc="true", looks=None)
    write_hopper_runs(tmp_path / "runs", 10)
    argv = ["--runs-dir", str(tmp_path / "runs"), "--protocol", str(protocol), "--output-dir", str(tmp_path)]
    assert report.main([*argv, "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "look 1 of 1, one-sided level 0.05" in out and "written after its runs (post hoc)" in out


@pytest.mark.parametrize(
    ("runs", "changes", "args", "fragment"),
    [
        (10, {"total_timesteps": "2000"}, [], "fixes 2000 steps, but Hopper-v4__ppo__10__100 ran 1000"),
        (7, {}, [], "reads the data at 5, 10 seeds a side, but found 7 runs of ppo and 7 of ppo_torchcompile"),
        (10, {}, ["--compare", "ppo", "ppo_atari"], "compares ppo with ppo_torchcompile, not ppo with ppo_atari"),
        (10, {}, ["--margin-abs", "5"], "fixes the margin and alpha"),
        (10, {}, ["--env-ids", "Walker2d-v4"], "is about Hopper-v4 alone"),
        (
            10,
            {"env_id": '"Walker2d-v4"'},
            [],
            "no run folder under runs matches --exp-names ppo ppo_torchcompile --env-ids Walker2d-v4",
        ),
        (10, {"margin": "-1.0"}, [], "margin must be positive"),
        (10, {"looks": "[5, 8]"}, [], "the last look (8) must be seeds (10)"),
        (10, {"seed_count": "3"}, [], "unknown fields ['seed_count']"),
        (10, {"alpha": None}, [], "lacks the field 'alpha'"),
        (10, {"seeds": '"ten"'}, [], "field 'seeds' has the wrong type"),
        (10, {"score": '"median"'}, [], 'score must be "last" or "auc"'),
        (10, {"fixed": '"soon'}, [], "is not valid TOML"),
    ],
)
def test_runs_that_do_not_follow_the_protocol_are_one_line_and_exit_2(tmp_path, runs, changes, args, fragment):
    write_protocol(tmp_path / "plan.toml", **changes)
    write_hopper_runs(tmp_path / "runs", runs)
    proc = report_cli("--runs-dir", "runs", "--protocol", "plan.toml", *args, "--output-dir", "out", cwd=tmp_path)
    assert_user_error(proc, "report: error:", fragment)
    assert not (tmp_path / "out").exists()
