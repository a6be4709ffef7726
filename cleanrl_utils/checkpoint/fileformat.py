"""The checkpoint file on disk: its name, its header, its digest, how it is written so that a kill leaves a whole one,
and how a missing, truncated, damaged or crafted one is refused. The lowest part of the package: it uses none of the
others (the first line, CHECKPOINT_MAGIC, is shared with the benchmark runner through cleanrl_utils.scripts).

A checkpoint is the file `checkpoint.pt` in the run folder, `runs/{run_name}/`. It starts with the line MAGIC, then
its header, a line of JSON (HEADER: the run's flags as first given, the iteration reached, whether the run has
finished, and the code that made it), which the benchmark runner reads without loading the rest
(scripts.checkpoint_header): being part of the checkpoint, it cannot disagree with it. Then comes a sha256 digest of
the header and the payload, so that a truncated or damaged file is refused, and the payload, written by torch.save and
read with torch.load(weights_only=True), which builds tensors, numbers, strings and plain containers and runs no code
(what else a checkpoint holds is stored in the plain form of plaindata.py). `checkpoint.json` beside it repeats the
header for people.

Every file is written under a temporary name of its own (`.checkpoint.pt.<random>.tmp`), synced to disk, then renamed
over the previous one, so a kill at any moment leaves the last complete file in place. A write that fails (a full
disk) removes its temporary file and raises OSError, leaving the previous file as it was.
"""

import hashlib
import io
import json
import os
import pickle  # for its UnpicklingError only: nothing here unpickles
import secrets
from pathlib import Path

import torch

from cleanrl_utils.scripts import CHECKPOINT_MAGIC

FILE = "checkpoint.pt"
STATE_FILE = "checkpoint.json"  # the header again, for people, written after checkpoint.pt (a kill may fall between)
MAGIC = CHECKPOINT_MAGIC  # the first line; the header, a line of JSON, follows
# what the header holds of a checkpoint: what finds a run again, how far it got, and the code that made it
HEADER = ("script", "run_name", "argv", "iteration", "num_iterations", "global_step", "finished", "code")


class BadCheckpoint(Exception):
    """A checkpoint that cannot be used: missing, truncated, damaged, or not one of ours."""


def read(path):
    """The checkpoint in the file `path`, as saved; BadCheckpoint when it is missing, truncated, damaged, or holds
    anything but data (loading builds tensors, numbers, strings and plain containers, and runs no code)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BadCheckpoint(f"cannot read {path}: {e.strerror}") from None
    if data.startswith(b"cleanrl checkpoint 1\n"):
        raise BadCheckpoint(
            f"{path} has the format of an earlier version, which loading would have to run as code: "
            "start the run afresh (or go on with the version that wrote it)"
        )
    header_end = data.find(b"\n", len(MAGIC)) + 1
    digest_end = header_end + hashlib.sha256().digest_size
    if not data.startswith(MAGIC) or header_end == 0:
        raise BadCheckpoint(f"{path} is not a checkpoint of these scripts")
    digest = hashlib.sha256(data[len(MAGIC) : header_end] + data[digest_end:]).digest()
    if len(data) < digest_end or digest != data[header_end:digest_end]:
        raise BadCheckpoint(f"{path} is truncated or damaged")
    try:
        return torch.load(io.BytesIO(data[digest_end:]), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # a type that is not plain data: what a crafted file would run on loading
        raise BadCheckpoint(f"{path} holds more than plain data (loading it would run code): refused") from None
    except Exception as e:  # whole, yet unreadable here: another version of the libraries, say
        raise BadCheckpoint(f"cannot load {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def write(state, path):
    """Writes `state` to `path` so that a kill at any moment leaves either the previous file or this one, whole. The
    file starts with a line of JSON, its header: what the benchmark runner reads (scripts.checkpoint_header), in the
    same file, so that it can never disagree with the checkpoint."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    header = json.dumps({name: state[name] for name in HEADER if name in state}).encode() + b"\n"
    write_whole([MAGIC, header, hashlib.sha256(header + payload).digest(), payload], path)


def write_whole(parts, path):
    """Writes the bytes `parts` to `path` under a temporary name of its own (`.checkpoint.pt.<random>.tmp`),
    synced, then renamed over `path`. A write that fails (a full disk) removes its temporary file and raises
    OSError, leaving `path` as it was."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "xb") as f:  # x: a name no other writer has
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(Path(path).parent, os.O_RDONLY)  # the rename itself, on disk
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
