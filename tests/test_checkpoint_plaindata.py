"""The plain-data form of cleanrl_utils/checkpoint/plaindata.py, the boundary between a checkpoint file and code that
runs: what to_data stores loads with torch.load(weights_only=True); from_data rebuilds each kind it lists and nothing
else; what it cannot store is Unstorable; a file that names a class, a member or a generator the fresh build does not
have is BadCheckpoint, and no object is ever made from a class the file names."""

import collections
import enum
import io
import random

import numpy as np
import pytest
import torch

from cleanrl_utils.checkpoint.fileformat import BadCheckpoint
from cleanrl_utils.checkpoint.plaindata import (
    BIT_GENERATORS,
    KIND,
    MISSING,
    NESTING,
    Unstorable,
    from_data,
    restore_attributes,
    to_data,
)


class Colour(enum.Enum):
    RED = 1
    GREEN = 2


class Shade(enum.Enum):
    RED = 1


class Statistics:
    """A plain Python class, as a normaliser's running statistics are."""

    def __init__(self):
        self.mean = np.zeros(2)
        self.count = 0


class Other:
    def __init__(self):
        self.mean = np.zeros(2)


class Slotted:
    __slots__ = ("value",)

    def __init__(self):
        self.value = 1


class PicklesItself:
    def __init__(self):
        self.value = 1

    def __reduce__(self):
        return (PicklesItself, ())


def through_a_file(data):
    """`data` saved with torch.save and loaded as a checkpoint is: weights_only, which refuses all but plain data."""
    buffer = io.BytesIO()
    torch.save(data, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def only_plain(data):
    """Whether `data` holds nothing but tensors, numbers, strings, None and plain containers."""
    if data is None or type(data) in (bool, int, float, str) or isinstance(data, torch.Tensor):
        return True
    if type(data) in (list, tuple):
        return all(only_plain(item) for item in data)
    if type(data) is dict:
        return all(type(key) is str and only_plain(value) for key, value in data.items())
    return False


def test_every_kind_goes_through_a_file_as_plain_data_and_comes_back():
    generator = np.random.default_rng(5)
    generator.random(3)
    legacy = np.random.RandomState(6)
    legacy.random_sample()
    python_random = random.Random(7)
    python_random.random()
    value = {
        "bytes": b"\x00\x01\xff",
        "empty bytes": b"",
        "array": np.arange(6, dtype=np.int16).reshape(2, 3),
        "boolean array": np.array([True, False]),
        "scalar": np.uint8(200),
        "dtype": np.dtype(np.float32),
        "set": {1, 2},
        "frozenset": frozenset({"a"}),
        "deque": collections.deque([1.5, 2.5], maxlen=4),
        "generator": generator,
        "randomstate": legacy,
        "random": python_random,
        "list and tuple": [1, (2, "three"), None, True],
        "tensor": torch.arange(3),
        7: "a key that is not a string",
    }
    data = through_a_file(to_data(value))
    assert only_plain(data)
    back = from_data(data)
    assert back["bytes"] == b"\x00\x01\xff" and back["empty bytes"] == b""
    assert back["array"].dtype == np.int16 and np.array_equal(back["array"], value["array"])
    assert back["boolean array"].dtype == np.bool_ and back["boolean array"].tolist() == [True, False]
    assert type(back["scalar"]) is np.uint8 and back["scalar"] == 200
    assert back["dtype"] == np.float32
    assert back["set"] == {1, 2} and type(back["frozenset"]) is frozenset and back["frozenset"] == {"a"}
    assert back["deque"] == value["deque"] and back["deque"].maxlen == 4
    assert back["generator"].random() == generator.random()
    assert back["randomstate"].random_sample() == legacy.random_sample()
    assert back["random"].random() == python_random.random()
    assert back["list and tuple"] == [1, (2, "three"), None, True]
    assert torch.equal(back["tensor"], torch.arange(3))
    assert back[7] == "a key that is not a string"


@pytest.mark.parametrize("name", sorted(BIT_GENERATORS))
def test_each_bit_generator_comes_back_with_its_stream(name):
    generator = np.random.Generator(BIT_GENERATORS[name](11))
    back = from_data(through_a_file(to_data(generator)))
    assert type(back.bit_generator) is BIT_GENERATORS[name]
    assert np.array_equal(back.random(4), generator.random(4))


def test_a_plain_object_and_an_enum_member_go_back_into_what_the_fresh_build_holds():
    saved = Statistics()
    saved.mean = np.array([1.0, 2.0])
    saved.count = 3
    data = through_a_file(to_data({"statistics": saved, "colour": Colour.GREEN}))
    fresh = {"statistics": Statistics(), "colour": Colour.RED}
    back = from_data(data, fresh)
    assert back["statistics"] is fresh["statistics"]
    assert np.array_equal(back["statistics"].mean, [1.0, 2.0]) and back["statistics"].count == 3
    assert back["colour"] is Colour.GREEN


def test_restore_attributes_fills_the_fresh_object_in_place():
    saved = Statistics()
    saved.count = 9
    fresh = Statistics()
    restore_attributes(fresh, {"count": to_data(saved.count), "mean": to_data(np.ones(2))})
    assert fresh.count == 9 and np.array_equal(fresh.mean, np.ones(2))


def test_mujoco_data_is_copied_into_the_fresh_one():
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the mujoco group's (scripts/setup.sh mujoco)")
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><joint type='slide'/><geom size='0.1'/></body></worldbody></mujoco>"
    )
    saved = mujoco.MjData(model)
    saved.qpos[:] = 0.25
    saved.qvel[:] = -1.5
    mujoco.mj_forward(model, saved)
    fresh = mujoco.MjData(model)
    back = from_data(through_a_file(to_data(saved)), fresh)
    assert back is fresh
    assert fresh.qpos.tolist() == [0.25] and fresh.qvel.tolist() == [-1.5]
    with pytest.raises(BadCheckpoint, match="MuJoCo simulation where this build has none"):
        from_data(through_a_file(to_data(saved)), None)


@pytest.mark.parametrize(
    "value",
    [
        lambda: None,
        Statistics,
        object(),
        np.array([object()]),
        np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
        np.dtype(object),
        Slotted(),
        PicklesItself(),
    ],
    ids=["function", "class", "no attributes", "object array", "structured array", "object dtype", "slots", "reduce"],
)
def test_what_has_no_plain_form_is_unstorable(value):
    with pytest.raises(Unstorable):
        to_data(value)


def test_a_nesting_deeper_than_the_limit_is_unstorable():
    nested = []
    for _ in range(NESTING + 2):
        nested = [nested]
    with pytest.raises(Unstorable, match="nested too deep"):
        to_data(nested)


@pytest.mark.parametrize(
    ("data", "current", "message"),
    [
        ({KIND: "code", "source": "print(1)"}, MISSING, "unknown kind, 'code'"),
        ({KIND: "object", "class": "Popen", "attributes": {}}, MISSING, "holds a Popen where this build has nothing"),
        ({KIND: "object", "class": "Statistics", "attributes": {}}, Other(), "holds a Statistics where this build has"),
        ({KIND: "state", "class": "Statistics", "state": {}}, MISSING, "holds a Statistics where this build has"),
        ({KIND: "member", "class": "Colour", "name": "BLUE"}, Colour.RED, "Colour.BLUE has no counterpart"),
        ({KIND: "member", "class": "Colour", "name": "RED"}, Shade.RED, "Colour.RED has no counterpart"),
        ({KIND: "member", "class": "Colour", "name": "RED"}, MISSING, "Colour.RED has no counterpart"),
    ],
    ids=[
        "unknown kind",
        "class named by the file",
        "another class",
        "state into nothing",
        "no member",
        "other enum",
        "member into nothing",
    ],
)
def test_what_the_fresh_build_does_not_hold_is_bad_checkpoint(data, current, message):
    with pytest.raises(BadCheckpoint, match=message):
        from_data(data, current)


def test_a_bit_generator_not_on_the_list_is_bad_checkpoint():
    data = to_data(np.random.default_rng(1))
    data["state"]["items"][0][1] = "os.system"  # the entry "bit_generator"
    assert from_data(data["state"]["items"][0][0]) == "bit_generator"
    with pytest.raises(BadCheckpoint, match="unknown bit generator, os.system"):
        from_data(data)


@pytest.mark.parametrize(
    ("dtype", "shape", "message"),
    [
        ("|O", [1], "an array of Python objects"),
        ("no such type", [1], "an array of an unknown type"),
        ("<f8", [3], "does not fit its bytes"),
    ],
)
def test_an_array_a_file_describes_wrongly_is_bad_checkpoint_and_never_built(dtype, shape, message):
    """A crafted or damaged array ends `--resume` in one line (BadCheckpoint), never in NumPy's traceback."""
    data = {KIND: "array", "dtype": dtype, "shape": shape, "data": torch.zeros(8, dtype=torch.uint8)}
    with pytest.raises(BadCheckpoint, match=message):
        from_data(data)
