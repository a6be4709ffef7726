"""The plain-data form: the one boundary between a checkpoint file and code that runs. Uses fileformat.py (for
BadCheckpoint) and nothing else of the package; its tests are tests/test_checkpoint_plaindata.py.

A checkpoint is data, never code: torch.load(weights_only=True) reads it (fileformat.read), which builds tensors,
numbers, strings and plain containers and refuses everything else. What an environment keeps beyond those, to_data
stores as a plain dict tagged under KIND, and from_data rebuilds it with this module's own code, never through a name
the file gives. The whole list of what from_data makes, one branch each:
- "bytes", "array", "scalar", "dtype": from their bytes and a dtype string (no object or structured dtype is stored);
- "dict", "set", "frozenset", "deque": the containers, their items rebuilt one by one;
- "generator" (a BitGenerator of BIT_GENERATORS only), "randomstate", "random": NumPy's and Python's random
  generators, made fresh and given their saved state;
- "member": an enum member (Python's, pybind's), looked up by name in the class of the fresh build's own value;
- "mjdata": MuJoCo's MjData, from the bytes MuJoCo serialises it to, then copied into the fresh one (mj_copyData);
- "object", "state": an object of a plain Python class (a normaliser's running statistics, a dm_control task), whose
  attributes go into the object of the same class that the fresh build made: no object is ever made from a class
  the file names.
Anything else, or a value that does not fit what the fresh build holds in its place, is BadCheckpoint.
"""

import abc
import collections
import random
import sys
import zlib
from collections.abc import Mapping

import numpy as np
import torch

from cleanrl_utils.checkpoint.fileformat import BadCheckpoint

KIND = "~kind"
MISSING = object()
BIT_GENERATORS = {name: getattr(np.random, name) for name in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")}
NESTING = 16  # deeper than any environment's state here: a cycle, or a graph not worth storing


class Unstorable(Exception):
    """A value with no plain-data form here."""


def byte_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.zeros(0, dtype=torch.uint8)


def to_data(value, depth=0):
    """`value` as tensors, numbers, strings and plain containers; Unstorable where it has no such form."""
    if depth > NESTING:
        raise Unstorable("nested too deep")
    inner = depth + 1
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if kind is bytes:
        return {KIND: "bytes", "data": byte_tensor(value)}
    if kind is np.ndarray:
        if value.dtype.hasobject or value.dtype.fields is not None:
            raise Unstorable(f"an array of {value.dtype}")
        data = byte_tensor(np.ascontiguousarray(value).tobytes())
        return {KIND: "array", "dtype": value.dtype.str, "shape": list(value.shape), "data": data}
    if isinstance(value, np.generic):
        return {KIND: "scalar", "array": to_data(np.asarray(value), inner)}
    if kind is np.dtype or isinstance(value, np.dtype):
        if value.hasobject or value.fields is not None:
            raise Unstorable(f"the dtype {value}")
        return {KIND: "dtype", "str": value.str}
    if kind in (list, tuple):
        return kind(to_data(item, inner) for item in value)
    if kind is dict:
        return {KIND: "dict", "items": [[to_data(k, inner), to_data(v, inner)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {KIND: kind.__name__, "items": [to_data(item, inner) for item in value]}
    if kind is collections.deque:
        return {KIND: "deque", "items": [to_data(item, inner) for item in value], "maxlen": value.maxlen}
    if kind is np.random.Generator:
        return {KIND: "generator", "state": to_data(value.bit_generator.state, inner)}
    if kind is np.random.RandomState:
        return {KIND: "randomstate", "state": to_data(value.get_state(legacy=False), inner)}
    if kind is random.Random:
        return {KIND: "random", "state": to_data(value.getstate(), inner)}
    if isinstance(getattr(kind, "__members__", None), Mapping) and isinstance(getattr(value, "name", None), str):
        return {KIND: "member", "class": kind.__qualname__, "name": value.name}  # an enum's member (Python's, pybind's)
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and kind is mujoco.MjData:  # the arena is mostly zeros
        return {KIND: "mjdata", "data": byte_tensor(zlib.compress(value.__getstate__(), 1))}
    if isinstance(value, type) or callable(value) or not hasattr(value, "__dict__"):
        raise Unstorable(f"a {kind.__name__}")
    if kind.__getstate__ is object.__getstate__:  # a plain Python object
        if not python_class(kind):
            raise Unstorable(f"a {kind.__name__}")
        attributes = {name: to_data(item, inner) for name, item in vars(value).items()}
        return {KIND: "object", "class": kind.__qualname__, "attributes": attributes}
    # an object that says itself what its state is: stored where that state is another object it holds (dm_control's
    # Physics, its MjData), which the restore fills in place
    try:
        state = value.__getstate__()
    except Exception:
        raise Unstorable(f"a {kind.__name__}") from None
    state = to_data(state, inner)
    if not (isinstance(state, dict) and state.get(KIND) in ("object", "state", "mjdata")):
        raise Unstorable(f"a {kind.__name__}")
    return {KIND: "state", "class": kind.__qualname__, "state": state}


def python_class(kind):
    """Whether objects of the class `kind` keep their state in their __dict__ as Python objects do: a class made by
    Python's own metaclass (or abc's), no __slots__, no pickling of its own. Not a class of an extension (pybind11's,
    JPype's Java proxies), whose state lives elsewhere. (Nothing is ever made from a class here: the restore puts
    the state into the object the fresh build made.)"""
    if type(kind) not in (type, abc.ABCMeta):
        return False
    if kind.__reduce_ex__ is not object.__reduce_ex__ or kind.__reduce__ is not object.__reduce__:
        return False
    return not any("__slots__" in vars(base) for base in kind.__mro__)


def from_data(data, current=MISSING):
    """The value `to_data` stored as `data`. `current` is what the freshly built environment holds in its place: an
    object, an MjData or an enum member is restored into it or taken from its class; BadCheckpoint where it does not
    match."""
    if isinstance(data, (list, tuple)):
        like = current if isinstance(current, (list, tuple)) and len(current) == len(data) else [MISSING] * len(data)
        return type(data)(from_data(item, was) for item, was in zip(data, like, strict=True))
    if not isinstance(data, dict):
        return data
    kind = data.get(KIND)
    if kind == "bytes":
        return data["data"].numpy().tobytes()
    if kind == "array":
        raw = data["data"].numpy().tobytes()
        try:
            dtype = np.dtype(data["dtype"])
        except TypeError:
            raise BadCheckpoint(f"the checkpoint names an array of an unknown type, {data['dtype']!r}") from None
        if dtype.hasobject:  # NumPy would refuse too, but with a traceback: this is a damaged or crafted file
            raise BadCheckpoint(f"the checkpoint holds an array of Python objects ({dtype}), which it never writes")
        try:
            return np.frombuffer(raw, dtype=dtype).reshape(data["shape"]).copy()
        except ValueError:
            raise BadCheckpoint(f"the checkpoint's array of shape {data['shape']} does not fit its bytes") from None
    if kind == "scalar":
        return from_data(data["array"])[()]
    if kind == "dtype":
        return np.dtype(data["str"])
    if kind == "dict":
        known = current if isinstance(current, dict) else {}
        pairs = [(from_data(k), v) for k, v in data["items"]]
        return {key: from_data(value, known.get(key, MISSING)) for key, value in pairs}
    if kind in ("set", "frozenset"):
        return {"set": set, "frozenset": frozenset}[kind](from_data(item) for item in data["items"])
    if kind == "deque":
        return collections.deque((from_data(item) for item in data["items"]), maxlen=data["maxlen"])
    if kind == "generator":
        state = from_data(data["state"])
        if state.get("bit_generator") not in BIT_GENERATORS:
            raise BadCheckpoint(f"the checkpoint names an unknown bit generator, {state.get('bit_generator')}")
        generator = np.random.Generator(BIT_GENERATORS[state["bit_generator"]]())
        generator.bit_generator.state = state
        return generator
    if kind == "randomstate":
        generator = np.random.RandomState()
        generator.set_state(from_data(data["state"]))
        return generator
    if kind == "random":
        generator = random.Random()
        generator.setstate(from_data(data["state"]))
        return generator
    if kind == "member":
        members = getattr(type(current), "__members__", None)
        if (
            type(current).__qualname__ != data["class"]
            or not isinstance(members, Mapping)
            or data["name"] not in members
        ):
            raise BadCheckpoint(f"the checkpoint's {data['class']}.{data['name']} has no counterpart in this build")
        return members[data["name"]]
    if kind == "mjdata":
        import mujoco

        if type(current) is not mujoco.MjData:
            raise BadCheckpoint("the checkpoint holds a MuJoCo simulation where this build has none")
        saved = mujoco.MjData.__new__(mujoco.MjData)
        saved.__setstate__(zlib.decompress(data["data"].numpy().tobytes()))
        if saved.model.nq != current.model.nq or saved.model.nv != current.model.nv:
            raise BadCheckpoint("the checkpoint's MuJoCo model is not this build's")
        mujoco.mj_copyData(current, current.model, saved)
        return current
    if kind in ("object", "state"):
        if current is MISSING or type(current).__qualname__ != data["class"]:
            have = "nothing" if current is MISSING else type(current).__qualname__
            raise BadCheckpoint(f"the checkpoint holds a {data['class']} where this build has {have}")
        if kind == "object":
            restore_attributes(current, data["attributes"])
        elif from_data(data["state"], current.__getstate__()) is not current.__getstate__():
            raise BadCheckpoint(f"the checkpoint's {data['class']} cannot be put back in place")
        return current
    raise BadCheckpoint(f"the checkpoint holds data of an unknown kind, {kind!r}")


def restore_attributes(obj, saved):
    """Puts the attributes `saved` (name: plain data) into the object `obj` the fresh build made, each rebuilt by
    from_data against what `obj` holds in its place."""
    for name, data in saved.items():
        vars(obj)[name] = from_data(data, vars(obj).get(name, MISSING))
