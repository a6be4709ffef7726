"""The training scripts of cleanrl/ seen as modules, for the tools around them (the replay command, the benchmarks)
and the tests. Importing a script has no side effects: its program runs under `if __name__ == "__main__":`."""

import ast
import dataclasses
import importlib.util
import inspect
import json
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "cleanrl"

# The Args fields a continued run may set otherwise than its first attempt: what is done with the run, not what it
# computes. The scripts' --resume accepts a change in these (checkpoint/flags.py), and the benchmark runner counts two
# commands that differ only in them as one run. True where the field is a switch, which takes no value.
OPERATIONAL = {
    "resume": False,
    "resume_changed_code": True,
    "checkpoint_every": False,
    "track": True,
    "wandb_project_name": False,
    "wandb_entity": False,
    "save_model": True,
    "upload_model": True,
    "hf_entity": False,
}


# A checkpoint file (checkpoint/fileformat.py) starts with this line, then a line of JSON: its header, which the
# benchmark runner reads without loading the checkpoint (the flags, the iteration reached, whether the run finished, the
# code's hash).
CHECKPOINT_MAGIC = b"cleanrl checkpoint 2\n"


def checkpoint_header(path):
    """The header of the checkpoint file `path`, a dict; OSError or ValueError where it has none."""
    with open(path, "rb") as f:
        if f.read(len(CHECKPOINT_MAGIC)) != CHECKPOINT_MAGIC:
            raise ValueError(f"{path} is not a checkpoint of this version")
        header = json.loads(f.readline(1 << 20))
    if not isinstance(header, dict):
        raise ValueError(f"{path} has no header")
    return header


def operational_flags():
    """({spelling of an operational flag that takes a value}, {spelling of an operational switch}): hyphens or
    underscores, and the switches' --no- forms."""
    with_value, switches = set(), set()
    for name, switch in OPERATIONAL.items():
        for spelt in {name, name.replace("_", "-")}:
            if switch:
                switches.update({f"--{spelt}", f"--no-{spelt}", f"--no_{spelt}"})
            else:
                with_value.add(f"--{spelt}")
    return with_value, switches


def script_names(folder=SCRIPTS):
    """The names of the scripts in `folder` (file names without `.py`), sorted."""
    return sorted(path.stem for path in Path(folder).glob("*.py"))


def load_script(name, folder=SCRIPTS):
    """Imports `folder/name.py` as the module `name` (in sys.modules, where tools that read its source look)."""
    spec = importlib.util.spec_from_file_location(name, Path(folder) / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def script_flags(path):
    """The fields of the script's `Args` that are command-line flags, read from its source without importing it
    (its imports may need an extra that is not installed): {field name: type annotation as written}, in order.
    The fields computed after parsing (annotated `tyro.conf.Suppress[...]`) are left out."""
    tree = ast.parse(Path(path).read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Args":
            fields = (
                stmt for stmt in node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            )
            annotations = {stmt.target.id: ast.unparse(stmt.annotation) for stmt in fields}
            return {name: kind for name, kind in annotations.items() if "Suppress[" not in kind}
    return {}


def vector_env(module, env_id, num_envs, **values):
    """The vector environment a script trains on, made with its own `make_env` as its program makes it: the thunks
    in a SyncVectorEnv with same-step autoreset, or the vector environment that `make_env` returns itself (EnvPool,
    Procgen, PettingZoo). `make_env`'s parameters are filled by name from `values`, else from env_id, num_envs,
    the environment's index (`index`, or `idx` in a script that still names it so), seed 1, no video, and the
    defaults of the script's `Args` (such as gamma)."""
    defaults = {f.name: f.default for f in dataclasses.fields(module.Args) if f.default is not dataclasses.MISSING}
    known = dict(defaults, env_id=env_id, num_envs=num_envs, seed=1, capture_video=False, run_name="unused")
    known.update(values)
    parameters = inspect.signature(module.make_env).parameters

    def make(index):
        given = {**known, "index": index, "idx": index}
        return module.make_env(**{name: given[name] for name in parameters if name in given})

    first = make(0)
    if hasattr(first, "step"):  # make_env made the vector environment
        return first
    import gymnasium as gym

    thunks = [first, *(make(index) for index in range(1, num_envs))]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def error_line(error):
    """One line for a user out of an exception: its first line, or for a PyTorch state-dict mismatch, whose first
    line is only a header, the first mismatch."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    return lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading state_dict") else lines[0]
