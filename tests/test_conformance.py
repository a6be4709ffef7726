"""Same seed, same numbers (CONVENTIONS §6): each script, run with the arguments of a recorded configuration, logs
what the reference implementation's own script logged, iteration by iteration, on any machine.

The records are tests/conformance/*.json, one per configuration (tests/conformance/README.md). Float kernels round
differently per CPU, so a record holds:
- `reference`: the numbers of the reference's own script (`own_stack`: on its pinned packages; `our_stack`: ported
  to ours with API changes only), with their provenance;
- `machines`: what our script logs on machine kinds measured so far (one CPU under one kernel setting each), with the
  kind's fingerprint (tests/conformance/fingerprint.py) where it is known;
- `portable`: how many iterations to compare on any other machine, and the tolerance per tag, measured as the spread
  of the rounding between those machines over a horizon too short for it to grow into another trajectory.

On a machine whose kind the record holds, every tag is compared bitwise at every point. Anywhere else, the first
`portable.iterations` iterations (and every episode that ended by then) are compared with the reference's numbers
within the portable tolerance. Every machine's numbers in a record must themselves pass that comparison: a record
bound to one machine's rounding fails here before it ships."""

import importlib
import json
import textwrap
from pathlib import Path

import pytest
from helpers import (
    CONFORMANCE,
    KIND_VARIABLES,
    PINNED,
    SCRIPTS,
    bitwise_problems,
    fingerprint_kind,
    machine_kind,
    portable_problems,
    run_record,
)

RECORDS = sorted(CONFORMANCE.glob("*.json"))
# the variants with a reference script; Isaac Gym's cannot run here (no Isaac Gym, no NVIDIA GPU)
# every script with a reference script to compare with: not Isaac Gym's (never run with Isaac Gym here), not the
# compiled siblings (no reference; they promise their parent's learning, not its numbers: test_torchcompile.py)
VARIANTS = sorted(
    p.stem
    for p in SCRIPTS.glob("ppo*.py")
    if p.stem != "ppo_continuous_action_isaacgym" and not p.stem.endswith("_torchcompile")
)
# the kernel settings that round like an AVX2-only CPU (CONVENTIONS §6), set before pytest starts like the pinned ones
AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
LOSSES = ("losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl")


def load(path):
    return json.loads(path.read_text())


def expected_numbers(record):
    return record["reference"][record["compare_to"]]


def check(record, ours, kind):
    """What is wrong with our numbers: bitwise against a machine of this kind where the record holds one, and
    within the portable tolerance of the reference's numbers everywhere."""
    problems = [f"portable: {p}" for p in portable_problems(record, expected_numbers(record), ours)]
    for label, machine in record["machines"].items():
        if machine["kind"] == kind:
            problems += [f"{label}: {p}" for p in bitwise_problems(machine["numbers"], ours)]
    return problems


def test_every_variant_has_a_record():
    """Every variant with a reference script has at least one conformance record, with its provenance, numbers of
    at least two roundings (two machines, or one machine under two kernel settings) and a portable comparison of at
    least one iteration that covers every loss."""
    recorded = {load(path)["script"].removesuffix(".py") for path in RECORDS}
    assert set(VARIANTS) <= recorded, f"no conformance record for {sorted(set(VARIANTS) - recorded)}"
    for path in RECORDS:
        record = load(path)
        for key in ("script", "args", "compare_to", "provenance", "reference", "machines", "portable"):
            assert key in record, f"{path.name}: no {key}"
        for key in ("reference", "command", "recorded"):
            assert key in record["provenance"], f"{path.name}: provenance has no {key}"
        assert expected_numbers(record), f"{path.name}: no {record['compare_to']} numbers"
        assert len(record["machines"]) >= 2, f"{path.name}: the numbers of one rounding cannot show a tolerance"
        assert any(machine["kind"] for machine in record["machines"].values()), f"{path.name}: no known kind"
        assert record["portable"]["iterations"] >= 1 and record["portable"].get("note"), path.name
        tolerance = record["portable"]["tolerance"]
        assert set(LOSSES) & set(expected_numbers(record)) <= set(tolerance), f"{path.name}: a loss is not compared"


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_every_recorded_machine_passes_the_portable_comparison(path):
    """The portable tolerance holds the rounding of every machine and kernel setting measured: each machine's own
    numbers (those of ../shared/conformance/machine-b.json and machine-c.json among them) pass the comparison the
    test makes on an unknown machine."""
    record = load(path)
    for label, machine in record["machines"].items():
        # the tags that machine's file holds (../shared's files leave out the learning rate)
        expected = {tag: points for tag, points in expected_numbers(record).items() if tag in machine["numbers"]}
        problems = portable_problems(record, expected, machine["numbers"])
        assert not problems, f"{label}: " + "\n".join(problems)


def test_tags_that_sit_near_zero_have_an_absolute_floor(monkeypatch):
    """A relative tolerance of a zero is zero, and another CPU rounds a zero to a few float32 steps off it (an
    emulated AVX2 machine logs an explained variance of -1.19e-7 for 0.0): every record compares explained variance,
    the KL estimates and the clip fraction with at least machines.py's absolute floor."""
    monkeypatch.syspath_prepend(str(CONFORMANCE))  # machines.py imports record.py beside it
    machines = importlib.import_module("machines")
    for path in RECORDS:
        tolerance = load(path)["portable"]["tolerance"]
        for tag, floor in machines.NEAR_ZERO_ATOL.items():
            if tag in tolerance:
                assert tolerance[tag]["atol"] >= floor, f"{path.name} {tag}: atol {tolerance[tag]['atol']} < {floor}"


@pytest.mark.parametrize(
    "path",
    # a record of several processes (torchrun's) runs them at the same time
    [pytest.param(p, marks=pytest.mark.multicore) if load(p).get("nproc", 1) > 1 else p for p in RECORDS],
    ids=lambda p: p.stem,
)
def test_same_seed_same_numbers(path, tmp_path):
    record = load(path)
    ours = run_record(record, tmp_path)
    problems = check(record, ours, machine_kind(**record.get("env", {})))
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("name", ["ppo__cartpole", "ppo_atari__breakout"])
def test_same_numbers_under_kernels_that_round_like_another_cpu(name, tmp_path):
    """MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=SSE41 and ATEN_CPU_CAPABILITY=default give this machine another
    rounding (CONVENTIONS §6): the record still passes, bitwise if it holds that kind, else within its tolerance."""
    record = load(CONFORMANCE / f"{name}.json")
    ours = run_record(record, tmp_path, **PINNED)
    problems = check(record, ours, machine_kind(**record.get("env", {}), **PINNED))
    assert not problems, "\n".join(problems[:10])


# Gymnasium 1.x's GrayscaleObservation (0.2125 R + 0.7154 G + 0.0721 B, truncated) where the script computes
# Gymnasium 0.29's cv2 grey: a real departure, put back through cv2.cvtColor in every process of the run
GYMNASIUM_1_GREY = textwrap.dedent(
    """
    import cv2
    import numpy as np

    def gymnasium_1_grey(image, code, *args, **kwargs):
        assert code == cv2.COLOR_RGB2GRAY
        return np.sum(np.multiply(image, np.array([0.2125, 0.7154, 0.0721])), axis=-1).astype(np.uint8)

    cv2.cvtColor = gymnasium_1_grey
    """
)


def test_a_real_departure_fails_on_every_machine(tmp_path):
    """The comparisons have teeth: Breakout with Gymnasium 1.x's grey pixels differs bitwise from every machine
    recorded, and by more than the portable tolerance from the reference's numbers and from every machine's."""
    (tmp_path / "sitecustomize.py").write_text(GYMNASIUM_1_GREY)
    record = load(CONFORMANCE / "ppo_atari__breakout.json")
    cwd = tmp_path / "run"
    cwd.mkdir()
    ours = run_record(record, cwd, PYTHONPATH=str(tmp_path))
    assert portable_problems(record, expected_numbers(record), ours)
    for label, machine in record["machines"].items():
        assert bitwise_problems(machine["numbers"], ours), label
        assert portable_problems(record, machine["numbers"], ours), label


def test_machine_kind_names_the_rounding(monkeypatch):
    """The fingerprint is the same twice under the same settings and tells the pinned kernels and the AVX2 ones from
    the default. Each child's kernel variables are the case's alone: those set before pytest started (the pinned or
    AVX2 ones of a run under another rounding) are removed first."""
    for name in KIND_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    settings = (("ATEN_CPU_CAPABILITY", "default"), ("OMP_NUM_THREADS", "1"))
    twice = [fingerprint_kind(settings) for _ in range(2)]  # two processes: no cached value
    assert twice[0] == twice[1] == machine_kind(ATEN_CPU_CAPABILITY="default"), "the fingerprint is not repeatable"
    kinds = [machine_kind(), machine_kind(**PINNED), machine_kind(**AVX2)]
    assert len(set(kinds)) == 3, "the fingerprint does not see the kernels' rounding"
    assert Path(CONFORMANCE / "fingerprint.py").is_file()
