"""The environments in a checkpoint: capturing their state, putting it into the freshly built ones, and restarting
them where it could not be captured. Uses fileformat.py (BadCheckpoint) and plaindata.py (to_data, from_data).

What is captured: the vector environment's own attributes (autoreset flags, buffers), and for every sub-environment
the attributes of every wrapper down its stack (episode statistics, normalisers' running means and discounted
returns, frame stacks, lives, time limits, its np_random), each in the plain form of plaindata.py, plus the state of
the engine, which lives outside Python: ALE's full system state with its random generator
(`cloneState(include_rng=True)`), MuJoCo's whole `MjData` (`mj_copyData` back into the fresh one: also the derived
quantities some tasks read before stepping, which `mjSTATE_INTEGRATION` alone would leave stale) and Procgen's games,
each stored as the bytes its library serialises it to. What a fresh build recreates identically is not stored:
functions (wrappers' transforms), specs, spaces, models and renderers. Restoring checks that the fresh build is the
checkpoint's (the same wrapper classes, number of environments and engine).

Where a sub-environment holds state that cannot be captured (a Box2D world: pybox2d can neither pickle its bodies nor
set a world's full state, contact caches included; a vector environment that keeps its environments in C++ or in
other processes), the checkpoint holds no environment state: on resume the learner goes on exactly and the
environments restart (restart_envs), seeded from the seed and the iteration, which the script says in one line.
"""

import inspect
import sys

import gymnasium as gym

from cleanrl_utils.checkpoint.fileformat import BadCheckpoint
from cleanrl_utils.checkpoint.plaindata import Unstorable, from_data, restore_attributes, to_data

# attributes that a fresh build recreates: the next wrapper, constructor arguments, specs
STATIC = {
    "env",
    "envs",
    "env_fns",
    "_saved_kwargs",
    "_ezpickle_args",
    "_ezpickle_kwargs",
    "spec",
    "_cached_spec",
    "metadata",
    "_metadata",
}
# other environments (the next wrapper, the sub-environments) and spaces (their bounds are static, and the scripts
# never sample them, so their generators are not drawn from): a fresh build recreates them
STRUCTURE = (gym.Env, gym.vector.VectorEnv, gym.spaces.Space)
# what holds the engine: captured through the engine's own calls, or static
ENGINE_ATTRIBUTES = {"ale": {"ale"}, "mujoco": {"model", "data", "mujoco_renderer"}, "procgen": {"venv"}, None: set()}
WRAPPERS = (gym.Wrapper, gym.vector.VectorWrapper)


def engine(env):
    """The emulator, physics engine or game whose state lives outside Python, "ale", "mujoco" or "procgen", or None."""
    ale_py = sys.modules.get("ale_py")
    if ale_py is not None and isinstance(getattr(env, "ale", None), ale_py.ALEInterface):
        return "ale"
    mujoco = sys.modules.get("mujoco")
    if mujoco is not None and isinstance(getattr(env, "data", None), mujoco.MjData):
        return "mujoco"
    procgen = sys.modules.get("procgen")
    if procgen is not None and isinstance(getattr(getattr(env, "venv", None), "env", None), procgen.ProcgenGym3Env):
        return "procgen"
    return None


def attributes(obj, skip=frozenset()):
    """The state an object keeps in its own attributes, as plain data (to_data), and the names of those that have
    no plain form."""
    kept, lost = {}, []
    for name, value in vars(obj).items():
        if name in STATIC or name in skip or callable(value) or isinstance(value, STRUCTURE):
            continue
        if type(value).__module__.startswith("pygame"):  # what renders (classic control, Box2D): made anew
            continue
        try:
            kept[name] = to_data(value)
        except Unstorable:
            lost.append(f"{type(obj).__name__}.{name}")
    return kept, lost


def capture_stack(env, lost):
    """The state of an environment: every wrapper's attributes down to the base environment, the base's own and its
    engine's state, and for a SyncVectorEnv that of each sub-environment. What cannot be stored goes to `lost`."""
    layers = []
    while isinstance(env, WRAPPERS):
        kept, layer_lost = attributes(env)
        layers.append({"class": type(env).__qualname__, "attributes": kept})
        lost += layer_lost
        env = env.env
    kind = engine(env)
    kept, base_lost = attributes(env, ENGINE_ATTRIBUTES[kind])
    lost += base_lost
    base = {"class": type(env).__qualname__, "attributes": kept, "engine": kind}
    if kind == "ale":  # the emulator's whole state, its random generator included, as the bytes ALE serialises
        base["engine_state"] = to_data(env.ale.cloneState(include_rng=True).__getstate__())
    elif kind == "mujoco":
        base["engine_state"] = to_data(env.data)
    elif kind == "procgen":
        base["engine_state"] = to_data(env.venv.env.get_state())  # each game's bytes, its random generators included
    elif isinstance(env, gym.vector.SyncVectorEnv):
        base["envs"] = [capture_stack(sub_env, lost) for sub_env in env.envs]
    elif isinstance(env, gym.vector.VectorEnv) or not isinstance(env, gym.Env):
        lost.append(f"{type(env).__name__}'s environments")  # another vector env keeps them elsewhere: C++, processes
    return {"layers": layers, "base": base}


def capture_envs(envs, env_id):
    """(the state of `envs`, None) or, where some of it cannot be stored, (None, why)."""
    lost = []
    state = capture_stack(envs, lost)
    if lost:
        return None, f"{env_id}'s state cannot be saved ({lost[0]})"
    return state, None


def restore_envs(env, saved):
    """Puts the state `capture_stack` took into the freshly built `env`; BadCheckpoint where `env` is not built as
    the checkpoint's was (another wrapper stack, another number of environments, another engine)."""
    for layer in saved["layers"]:
        same_class(env, layer["class"])
        restore_attributes(env, layer["attributes"])
        env = env.env
    base = saved["base"]
    same_class(env, base["class"])
    if engine(env) != base["engine"]:
        raise BadCheckpoint(f"the checkpoint's {base['class']} runs on {base['engine']}, this one on {engine(env)}")
    restore_attributes(env, base["attributes"])
    if base["engine"] == "ale":
        import ale_py

        emulator = ale_py.ALEState.__new__(ale_py.ALEState)
        emulator.__setstate__(from_data(base["engine_state"]))
        env.ale.restoreState(emulator)
    elif base["engine"] == "mujoco":
        from_data(base["engine_state"], env.data)
    elif base["engine"] == "procgen":
        env.venv.env.set_state(from_data(base["engine_state"]))
    sub_envs, sub_states = getattr(env, "envs", []), base.get("envs", [])
    if len(sub_envs) != len(sub_states):
        raise BadCheckpoint(
            f"the checkpoint has {len(sub_states)} environments in {base['class']}, this run {len(sub_envs)}"
        )
    for sub_env, sub_state in zip(sub_envs, sub_states, strict=True):
        restore_envs(sub_env, sub_state)


def same_class(env, name):
    if type(env).__qualname__ != name:
        raise BadCheckpoint(
            f"the environments are built otherwise than in the checkpoint: {type(env).__qualname__} where it has {name}"
        )


def made_by_envpool(envs):
    """Whether `envs` is an EnvPool environment, or wraps one."""
    while envs is not None:
        if any(cls.__module__.startswith("envpool.") for cls in type(envs).__mro__):
            return True
        envs = getattr(envs, "env", None)
    return False


def restart_envs(envs, seed, iteration, script, why):
    """Where the checkpoint holds no environment state: the environments restart, seeded from `seed` (--seed) and the
    `iteration` the checkpoint finished where their reset takes a seed, and the run says so in one line, which names
    the `script` and `why`; returns their first observations. EnvPool's reset accepts a seed and ignores it, and the
    Newton tasks' takes none: both are seeded only when made (with --seed), so a resumed run of theirs is reproducible
    from the checkpoint all the same."""
    reset_seed = seed + envs.num_envs * iteration
    parameters = inspect.signature(envs.reset).parameters.values()
    seeded = any(p.name == "seed" or p.kind == p.VAR_KEYWORD for p in parameters)
    envpool = made_by_envpool(envs)
    if envpool:
        how = "EnvPool seeds them only when made: with --seed"
    elif seeded:
        how = f"seeded with --seed and the iteration, {reset_seed}"
    else:
        how = "as made, with --seed"
    print(
        f"{script}: {why}: the environments restart ({how}); the learner goes on exactly",
        flush=True,
    )
    if envpool:
        return envs.reset()[0]
    if seeded:
        return envs.reset(seed=reset_seed)[0]
    return envs.reset()
