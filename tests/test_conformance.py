"""Same seed, same numbers (CONVENTIONS §6): each script, run with the arguments of a recorded configuration, logs
what the reference implementation's own script logged, iteration by iteration.

The records are tests/conformance/*.json, one per configuration, written from runs of the reference's script outside
this repository (tests/conformance/README.md says how, and each record's `provenance` says where its numbers come
from). A record compares with the numbers of the reference on its own pinned stack (`compare_to: own_stack`) or of
the reference ported to our stack (`our_stack`), within `rtol`/`atol` (per tag in `tolerance`), over the first
`iterations` points of each tag if given (where a library's random stream makes later points differ, the record's
`divergence` says why). A record with `compare_to: distribution` is not run here: its `divergence` names the first
difference and its cause, and the docs compare the scripts over seeds."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, SCRIPTS, only_run_dir, read_scalars, run_script, run_torchrun, script_env

RECORDS = sorted((Path(__file__).parent / "conformance").glob("*.json"))
# the variants with a reference script; Isaac Gym's cannot run here (no Isaac Gym, no NVIDIA GPU)
VARIANTS = sorted(p.stem for p in SCRIPTS.glob("ppo*.py") if p.stem != "ppo_continuous_action_isaacgym")


def load(path):
    return json.loads(path.read_text())


def test_every_variant_has_a_record():
    """Every variant with a reference script has at least one conformance record, with its provenance."""
    recorded = {load(path)["script"].removesuffix(".py") for path in RECORDS}
    assert set(VARIANTS) <= recorded, f"no conformance record for {sorted(set(VARIANTS) - recorded)}"
    for path in RECORDS:
        record = load(path)
        for key in ("script", "args", "compare_to", "provenance", "reference"):
            assert key in record, f"{path.name}: no {key}"
        for key in ("reference", "command", "recorded"):
            assert key in record["provenance"], f"{path.name}: provenance has no {key}"
        if record["compare_to"] == "distribution":
            assert record.get("divergence"), f"{path.name}: a record compared by distribution says why"
        else:
            assert record["reference"].get(record["compare_to"]), f"{path.name}: no {record['compare_to']} numbers"


def compared(record):
    """(tag, recorded points, rtol, atol) of each tag the record compares."""
    tolerance = record.get("tolerance", {})
    for tag, points in record["reference"][record["compare_to"]].items():
        rtol = tolerance.get(tag, {}).get("rtol", record.get("rtol", 0.0))
        atol = tolerance.get(tag, {}).get("atol", record.get("atol", 0.0))
        yield tag, points[: record.get("iterations")], rtol, atol


@pytest.mark.parametrize("path", [p for p in RECORDS if load(p)["compare_to"] != "distribution"], ids=lambda p: p.stem)
def test_same_seed_same_numbers(path, tmp_path):
    record = load(path)
    extra = dict(record.get("env", {}))
    if "PYTHONPATH" in extra:  # a folder of this repository, named from its root
        extra["PYTHONPATH"] = str(ROOT / extra["PYTHONPATH"])
    env = script_env(**extra)
    if record.get("nproc", 1) > 1:
        run_torchrun(record["script"], record["nproc"], *record["args"], cwd=tmp_path, env=env)
    else:
        run_script(record["script"], *record["args"], cwd=tmp_path, env=env)
    ours = read_scalars(only_run_dir(tmp_path))
    for tag, points, rtol, atol in compared(record):
        got = ours.get(tag, [])[: len(points)]
        assert [step for step, _ in got] == [step for step, _ in points], f"{tag}: logged at other steps"
        expected = np.array([value for _, value in points])
        values = np.array([value for _, value in got])
        worst = np.argmax(np.abs(values - expected) - rtol * np.abs(expected))
        assert np.allclose(values, expected, rtol=rtol, atol=atol, equal_nan=True), (
            f"{tag}: point {worst} is {values[worst]!r}, the reference's {expected[worst]!r} (rtol {rtol}, atol {atol})"
        )
