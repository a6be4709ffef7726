"""cleanrl_utils/report.py: scores, tables and learning curves from TensorBoard logs written here by the tests."""

import time

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
    assert len(reference) == 34
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


@pytest.mark.parametrize(
    ("shift", "verdict"),
    [(0.0, "equivalent"), (30.0, "different"), (None, "undecided")],
    ids=["same", "shifted", "too-noisy"],
)
def test_the_verdict_follows_the_interval_of_the_difference(shift, verdict):
    rng = np.random.default_rng(0)
    baseline = 500.0 + rng.normal(scale=5.0, size=10)
    if shift is None:  # as likely above as below, but too spread for 10% of the baseline's mean
        candidate = 500.0 + rng.normal(scale=400.0, size=10)
        candidate += baseline.mean() - candidate.mean()
    else:
        candidate = baseline[::-1] + shift
    result = report.equivalence(baseline, candidate, margin=0.1, samples=2000)
    assert result.verdict.startswith(verdict)
    difference, low, high = result.difference
    assert low <= difference <= high
    assert difference == pytest.approx(candidate.mean() - baseline.mean())
    iqm, low, high = result.baseline_iqm
    assert low <= iqm <= high and iqm == pytest.approx(report.iqm(baseline))
    # the same scores give the same intervals: the resamples are drawn from a fixed seed
    assert report.equivalence(baseline, candidate, margin=0.1, samples=2000) == result


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
    assert row["difference of means"].startswith("1.00 [") and row["seeds"] == "5 / 5"
    assert row["verdict"] == "equivalent"
    assert (tmp_path / "out" / "equivalence_steps.png").stat().st_size > 1000
    assert "equivalence.md" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--compare", "ppo"], "--compare takes two different variants"),
        (["--compare", "ppo", "ppo"], "--compare takes two different variants"),
        (["--compare", "ppo", "ppo_torchcompile", "--margin", "0"], "--margin must lie between 0 and 1"),
        (["--compare", "ppo", "other"], "no environment under runs has runs of both ppo and other"),
    ],
)
def test_bad_compare_is_one_line_and_exit_2(tmp_path, args, fragment):
    write_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", [1.0]).close()
    write_run(tmp_path / "runs", "Acrobot-v1__other__1__100", [1.0]).close()
    proc = report_cli("--runs-dir", "runs", *args, "--output-dir", "out", cwd=tmp_path)
    assert_user_error(proc, "report: error:", fragment)
    assert not (tmp_path / "out").exists()
