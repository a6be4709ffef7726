"""What the JAX pair calls instead of restore and save: restore_jax, save_jax. Uses script_calls.py (RUN, the run of
this process), run.py (capture_random), envs.py (capture_envs) and fileformat.py (BadCheckpoint).

ppo_atari_envpool_xla_jax.py and its scan variant step EnvPool's environments inside XLA, whose state cannot be
captured: the learner resumes exactly and the environments restart (Checkpoints.restart_envs). The learner is what
the loop carries in JAX arrays: the TrainState (parameters, the optimizer's state and its step counts, from which
optax's schedule anneals the learning rate), the PRNG key and the episode statistics. JAX's arrays are immutable:
restore_jax returns them anew. The checkpoint holds them as tensors named by their path in the tree (torch.save
stores a tensor's bytes as they are; a NumPy array it would pickle as text, a quarter larger).
"""

import numpy as np
import torch

from cleanrl_utils.checkpoint.envs import capture_envs
from cleanrl_utils.checkpoint.fileformat import BadCheckpoint
from cleanrl_utils.checkpoint.run import capture_random
from cleanrl_utils.checkpoint.script_calls import RUN

# the episode statistics of the games under way, which restart with the environments (the last finished ones stay)
UNDER_WAY = ("episode_returns", "episode_lengths")


def restore_jax(envs, agent_state, key, episode_stats):
    """With --resume: the checkpoint's learner in place of the freshly built one, the environments restarted;
    returns the first iteration to run, global_step, start_time, next_obs, agent_state, key and episode_stats."""
    import jax.numpy as jnp

    run = RUN[0]
    state = run.state
    try:
        agent_state, key, episode_stats = from_named_arrays(state["agent"], (agent_state, key, episode_stats))
    except BadCheckpoint as e:
        run.fail(f"--resume: {e}")
    episode_stats = episode_stats.replace(**{name: jnp.zeros_like(getattr(episode_stats, name)) for name in UNDER_WAY})
    next_obs = run.restart_envs(envs, run.changed_code or state["envs_lost"])
    start_time = run.resumed()
    return state["iteration"] + 1, state["global_step"], start_time, next_obs, agent_state, key, episode_stats


def save_jax(iteration, global_step, start_time, writer, envs, agent_state, key, episode_stats):
    """At the end of each iteration: a checkpoint of the learner where one is due (as Checkpoints.save)."""
    run = RUN[0]
    if not run.due(iteration):
        return
    _, lost = capture_envs(envs, run.args.env_id)
    state = run.run_state(iteration, int(global_step), start_time, writer)  # global_step: a JAX array after a rollout
    state.update(agent=named_arrays((agent_state, key, episode_stats)), random=capture_random(), envs=None)
    state["envs_lost"] = lost or f"{run.args.env_id}'s state lives in XLA"
    run.commit(state)


def named_arrays(tree):
    """{path: tensor} of every leaf of a JAX tree, copied from the device."""
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(jax.device_get(tree))
    return {jax.tree_util.keystr(path): torch.from_numpy(np.array(leaf)) for path, leaf in leaves}


def from_named_arrays(saved, like):
    """The tree `like` with every leaf the array `named_arrays` saved at its path, bit for bit."""
    import jax
    import jax.numpy as jnp

    leaves, structure = jax.tree_util.tree_flatten_with_path(like)
    paths = [jax.tree_util.keystr(path) for path, _ in leaves]
    if sorted(paths) != sorted(saved):
        raise BadCheckpoint("the checkpoint's learner has other parts than this script's")
    for path, (_, leaf) in zip(paths, leaves, strict=True):
        if tuple(saved[path].shape) != tuple(np.shape(leaf)):
            raise BadCheckpoint(
                f"the checkpoint's {path} has shape {tuple(saved[path].shape)}, this script's {np.shape(leaf)}"
            )
    return jax.tree_util.tree_unflatten(structure, [jnp.asarray(saved[path].numpy()) for path in paths])
