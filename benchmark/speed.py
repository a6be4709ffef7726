"""Steps per second of a PPO script next to the raw rate of its own vector environment.

    python benchmark/speed.py ppo                         # defaults of ppo.py, 3 runs of 100k steps
    python benchmark/speed.py ppo --env-id Acrobot-v1 --total-timesteps 200000 --repeats 1

The raw rate steps the same vector environment the script builds (same wrappers, same number of
environments) with random actions and nothing else. Run it alone on the machine: any other load skews both.
"""

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]


def envpool_vector_env(mod, env_id, num_envs):
    """An EnvPool script's environments, seen as raw_env_sps steps them: EnvPool reports the action space of one
    environment and takes its seed when made, so the adapter gives the batched space and ignores reset's seed."""
    import types

    import gymnasium as gym

    envs = mod.make_env(env_id, num_envs, 1)
    return types.SimpleNamespace(
        reset=lambda seed=None: envs.reset(),
        step=envs.step,
        close=envs.close,
        action_space=gym.vector.utils.batch_space(envs.single_action_space, num_envs),
    )


# How to build each script's vector environment, and its defaults (env id, number of environments).
VECTOR_ENVS = {
    "ppo": (lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"), "CartPole-v1", 4),
    "ppo_continuous_action": (
        lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"),
        "HalfCheetah-v4",
        1,
    ),
    "ppo_procgen": (
        lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"),
        "starpilot",
        64,
    ),
    "ppo_pettingzoo_ma_atari": (
        lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"),
        "pong_v3",
        16,
    ),
    "ppo_atari": (
        lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"),
        "BreakoutNoFrameskip-v4",
        8,
    ),
    "ppo_atari_lstm": (
        lambda mod, env_id, num_envs: mod.make_vector_env(env_id, num_envs, False, "speed"),
        "BreakoutNoFrameskip-v4",
        8,
    ),
    # the three EnvPool scripts build the same environments (the JAX ones step them through EnvPool's XLA interface);
    # their SPS since the start includes the JAX variants' compilation: see charts/first_iteration_seconds
    "ppo_atari_envpool": (envpool_vector_env, "Breakout-v5", 8),
    "ppo_atari_envpool_xla_jax": (envpool_vector_env, "Breakout-v5", 8),
    "ppo_atari_envpool_xla_jax_scan": (envpool_vector_env, "Breakout-v5", 8),
}


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "cleanrl" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def raw_env_sps(make, env_id, num_envs, steps):
    envs = make(env_id, num_envs)
    envs.reset(seed=1)
    envs.action_space.seed(1)
    actions = [envs.action_space.sample() for _ in range(steps // num_envs)]
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - start
    envs.close()
    return len(actions) * num_envs / elapsed


def script_sps(script, args):
    with tempfile.TemporaryDirectory() as cwd:
        subprocess.run(
            [sys.executable, str(ROOT / "cleanrl" / f"{script}.py"), *args],
            cwd=cwd,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (run_dir,) = (Path(cwd) / "runs").iterdir()
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
        return acc.Scalars("charts/SPS")[-1].value


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", choices=sorted(VECTOR_ENVS))
    parser.add_argument("--env-id", default=None)
    parser.add_argument("--num-envs", type=int, default=None)
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--raw-steps", type=int, default=50_000)
    args, extra = parser.parse_known_args()
    make, default_env, default_num_envs = VECTOR_ENVS[args.script]
    env_id, num_envs = args.env_id or default_env, args.num_envs or default_num_envs
    module = load(args.script)

    script_args = ["--env-id", env_id, "--num-envs", num_envs, "--total-timesteps", args.total_timesteps, *extra]
    raw = [raw_env_sps(lambda e, n: make(module, e, n), env_id, num_envs, args.raw_steps) for _ in range(args.repeats)]
    sps = [script_sps(args.script, list(map(str, script_args))) for _ in range(args.repeats)]
    print(f"| script | env | num_envs | script SPS (median of {args.repeats}) | raw env SPS | script / raw |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.script}.py | {env_id} | {num_envs} | {statistics.median(sps):,.0f} "
        f"| {statistics.median(raw):,.0f} | {statistics.median(sps) / statistics.median(raw):.1%} |"
    )
    print(f"script SPS runs: {[round(s) for s in sps]}; raw env runs: {[round(r) for r in raw]}", file=sys.stderr)


if __name__ == "__main__":
    main()
