"""Writes the scalars of one TensorBoard run into a conformance record (tests/conformance/*.json).

Run it wherever the run was made, for example in a scratch environment beside the reference implementation:

    python tests/conformance/record.py RUN_DIR tests/conformance/ppo__cartpole.json --stack own_stack

It only needs tensorboard. The record's other fields (script, args, compare_to, tolerances, provenance) are
written by hand; this fills `reference[STACK]` with {tag: [[step, value], ...]} for the tags compared."""

import argparse
import json
import re
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = (
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "charts/learning_rate",
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/avg_episodic_return",
    "charts/avg_episodic_length",
)


def scalars(run_dir, tags=TAGS):
    """{tag: [[step, value], ...]} of the tags in `tags` that the run logged."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    logged = acc.Tags()["scalars"]
    return {tag: [[event.step, event.value] for event in acc.Scalars(tag)] for tag in tags if tag in logged}


def dump(record):
    """The record as JSON, one tag's numbers to a line (the reference's and each machine's), so a diff shows which
    tag changed."""
    text = json.dumps(record, indent=1)
    numbers = list(record.get("reference", {}).values())
    numbers += [machine["numbers"] for machine in record.get("machines", {}).values()]
    for stack in numbers:
        for tag, points in stack.items():
            # the tag's indented rendering, at whatever depth, becomes one line
            indented = re.compile(r"( *)" + re.escape(json.dumps(tag)) + r": \[\n.*?\n\1\]", re.S)
            text = indented.sub(lambda m: f"{m.group(1)}{json.dumps(tag)}: {json.dumps(points)}", text, count=1)
    assert json.loads(text) == record
    return text + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("record")
    parser.add_argument("--stack", required=True, help="own_stack (the reference's pins) or our_stack (a port)")
    parsed = parser.parse_args()
    path = Path(parsed.record)
    record = json.loads(path.read_text()) if path.exists() else {}
    record.setdefault("reference", {})[parsed.stack] = scalars(parsed.run_dir)
    path.write_text(dump(record))
