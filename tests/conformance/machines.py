"""Numbers of other machines for the conformance records (tests/conformance/README.md).

python tests/conformance/machines.py collect OUT.json [--records NAME ...] [--settings default pinned ...]
    runs every record's configuration here, the way tests/test_conformance.py runs it, once per kernel setting,
    and writes what our scripts logged, with this machine's kind under each setting (fingerprint.py)
python tests/conformance/machines.py fold MACHINE.json --label LABEL [--settings ...] [--no-kind]
    puts a machine file's numbers into the records' `machines`, as "LABEL SETTING"; with the kind, the record
    is compared bitwise wherever that kind runs it; --no-kind keeps the numbers only for the portability check
    (a machine whose kind is not known, such as ../shared/conformance/machine-b.json)
python tests/conformance/machines.py tolerance RECORD --iterations N
    sets the record's portable comparison from the machines it holds: over the first N points of each update
    tag, MARGIN times the largest spread between a machine's numbers and the reference's, per tag
python tests/conformance/machines.py check RUN_DIR RECORD [--against LABEL]
    compares a run with a record: bitwise against LABEL's numbers when given, and within the record's portable
    tolerance against the reference's numbers (or LABEL's); prints what differs, exits 1 if anything does
"""

import argparse
import json
import math
import os
import platform
import sys
import tempfile
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers import (  # noqa: E402
    CONFORMANCE,
    KIND_VARIABLES,
    PINNED,
    bitwise_problems,
    machine_kind,
    portable_problems,
    read_scalars,
    run_record,
)
from record import dump  # noqa: E402

SETTINGS = {
    "default": {},
    "mkl": {"MKL_CBWR": "COMPATIBLE"},
    "onednn": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "aten": {"ATEN_CPU_CAPABILITY": "default"},
    "pinned": PINNED,
}


def records(names=None):
    """{name: path} of the records named (all by default); a name ending in .json is a record file elsewhere."""
    paths = sorted(CONFORMANCE.glob("*.json"))
    found = {p.stem: p for p in paths if not names or p.stem in names}
    found.update({Path(n).stem: Path(n) for n in names or [] if n.endswith(".json")})
    return found


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def collect(out, names, settings):
    result = {"about": f"{cpu_name()}, {platform.system()}, recorded {date.today()} by machines.py collect"}
    for setting in settings:
        extra = SETTINGS[setting]
        # the kernel variables set before collect started (an emulated machine's) count too: they set the rounding
        outside = {
            name: os.environ[name] for name in KIND_VARIABLES if name in os.environ and name != "OMP_NUM_THREADS"
        }
        entry = {"env": outside | extra, "kind": machine_kind(**extra), "records": {}}
        for name, path in records(names).items():
            record = json.loads(path.read_text())
            with tempfile.TemporaryDirectory() as cwd:
                entry["records"][name] = run_record(record, cwd, **extra)
            print(f"{setting} {name}: done", flush=True)
        result[setting] = entry
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


def fold(machine_file, label, settings, with_kind):
    machine = json.loads(Path(machine_file).read_text())
    for setting in settings or [s for s in SETTINGS if s in machine]:
        entry = machine[setting]
        for name, path in records().items():
            if name not in entry["records"]:
                continue
            record = json.loads(path.read_text())
            compared = record["reference"][record["compare_to"]]
            numbers = {tag: points for tag, points in entry["records"][name].items() if tag in compared}
            record.setdefault("machines", {})[f"{label} {setting}"] = {
                "kind": entry.get("kind") if with_kind else None,
                "about": f"{machine.get('about', '')[:300]}; kernel settings {entry.get('env') or 'default'}",
                "numbers": numbers,
            }
            path.write_text(dump(record))


MARGIN = 5  # the tolerance is this many times the largest spread measured
RTOL_FLOOR = 1e-5  # for tags on which every machine measured agrees bitwise: another may still round once
# Tags that sit near zero, where a relative tolerance is none (rtol x 0 = 0): an absolute floor. Explained variance
# is 1 - a float32 ratio near 1, whose rounding step there is 6e-8 to 1.2e-7 (another CPU logged -1.19e-7 for 0.0);
# a KL estimate is a mean of differences of float32 log-probabilities, each rounded at 1.2e-7 of its size; both
# get about eight such steps. A clip fraction counts samples: at least one in a hundred may flip.
NEAR_ZERO_ATOL = {
    "losses/explained_variance": 1e-6,
    "losses/old_approx_kl": 1e-6,
    "losses/approx_kl": 1e-6,
    "losses/clipfrac": 0.01,
}
EXACT = ("charts/learning_rate", "charts/episodic_length", "charts/avg_episodic_length", "charts/episodic_length-")


def spread(expected, numbers, n, absolute=0.0):
    """The largest |ours - reference| beyond `absolute` / max(|reference|, 1% of the tag's largest |reference|) over
    the first n points, and that 1% floor; None where the machine logged at other steps (another trajectory)."""
    points = expected[:n]
    got = numbers[: len(points)]
    if [step for step, _ in got] != [step for step, _ in points]:
        return None
    floor = 0.01 * max(abs(value) for _, value in points)
    worst = 0.0
    for (_, value), (_, mine) in zip(points, got):
        if math.isnan(value) or math.isnan(mine):
            continue
        beyond = max(abs(mine - value) - absolute, 0.0)
        worst = max(worst, beyond / max(abs(value), floor, 1e-30))
    return worst, floor


def tolerance(record_path, iterations):
    path = Path(record_path)
    record = json.loads(path.read_text())
    expected = record["reference"][record["compare_to"]]
    update_steps = [step for tag, points in expected.items() if tag.startswith("losses/") for step, _ in points]
    horizon = sorted(set(update_steps))[iterations - 1]
    left_out = record.get("portable", {}).get("left_out")  # tags kept out of the comparison, with the reason
    tags = {}
    lines = []
    for tag, points in expected.items():
        n = len([1 for step, _ in points if step <= horizon])
        if n == 0 or left_out and tag in left_out["tags"]:
            continue
        held = {label: m["numbers"][tag] for label, m in record["machines"].items() if tag in m["numbers"]}
        absolute = NEAR_ZERO_ATOL.get(tag, 0.0)  # for these tags the rtol covers what the absolute floor does not
        spreads = {label: spread(points, numbers, n, absolute) for label, numbers in held.items()}
        if any(found is None for found in spreads.values()):
            raise SystemExit(f"{path.name} {tag}: a machine parts from the reference's steps within {iterations}")
        worst = max(found[0] for found in spreads.values())
        floor = max(found[1] for found in spreads.values())
        if tag.startswith(EXACT) or (worst == 0 and not tag.startswith("losses/")):
            rtol = 0.0 if worst == 0 else MARGIN * worst
        else:
            rtol = max(MARGIN * worst, RTOL_FLOOR)
        atol = absolute + rtol * floor
        tags[tag] = {"rtol": float(f"{rtol:.2g}"), "atol": float(f"{atol:.2g}")}
        lines.append(f"{tag} {worst:.2g}")
    span = f"{iterations} iteration{'s' if iterations > 1 else ''}"
    floors = ", ".join(f"{tag.removeprefix('losses/')} {atol:g}" for tag, atol in NEAR_ZERO_ATOL.items() if tag in tags)
    note = (
        f"First {span} (steps up to {horizon}) and the episodes that ended by then. Largest spread against the "
        f"reference's numbers over the {len(record['machines'])} machine settings held, per tag, relative to "
        "max(|value|, 1% of the tag's largest |value|): " + ", ".join(lines) + f". Tolerance: {MARGIN} times "
        f"that (rtol; atol = rtol x that 1% floor), at least {RTOL_FLOOR} for a loss. The tags that sit near zero "
        f"have an absolute floor ({floors}): their spread is what lies beyond it, and their atol is the floor plus "
        "rtol x the 1% floor. Learning rate and episode lengths exact."
    )
    record["portable"] = {"iterations": iterations, "tolerance": tags, "note": note}
    if left_out:
        record["portable"]["left_out"] = left_out
        record["portable"]["note"] += f" Left out: {', '.join(left_out['tags'])}. {left_out['why']}"
    path.write_text(dump(record))


def check(run_dir, record_path, against):
    record = json.loads(Path(record_path).read_text())
    ours = {tag: [[s, v] for s, v in points] for tag, points in read_scalars(run_dir).items()}
    expected = record["machines"][against]["numbers"] if against else record["reference"][record["compare_to"]]
    problems = []
    if against:
        problems += [f"bitwise: {p}" for p in bitwise_problems(expected, ours)]
    problems += [f"portable: {p}" for p in portable_problems(record, expected, ours)]
    print("\n".join(problems) or "same numbers")
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect")
    p.add_argument("out")
    p.add_argument("--records", nargs="*")
    p.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    p = sub.add_parser("fold")
    p.add_argument("machine_file")
    p.add_argument("--label", required=True)
    p.add_argument("--settings", nargs="*", choices=list(SETTINGS))
    p.add_argument("--no-kind", action="store_true")
    p = sub.add_parser("tolerance")
    p.add_argument("record")
    p.add_argument("--iterations", type=int, required=True)
    p = sub.add_parser("check")
    p.add_argument("run_dir")
    p.add_argument("record")
    p.add_argument("--against")
    parsed = parser.parse_args()
    if parsed.command == "collect":
        collect(parsed.out, parsed.records, parsed.settings)
    elif parsed.command == "fold":
        fold(parsed.machine_file, parsed.label, parsed.settings, not parsed.no_kind)
    elif parsed.command == "tolerance":
        tolerance(parsed.record, parsed.iterations)
    else:
        sys.exit(check(parsed.run_dir, parsed.record, parsed.against))
