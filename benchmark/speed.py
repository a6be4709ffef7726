"""Steps per second of a PPO script: beside the raw rate of its own vector environment, or against another version
of the same script.

    python -m benchmark.speed ppo                         # defaults of ppo.py, 3 runs of 100k steps
    python benchmark/speed.py ppo --env-id Acrobot-v1 --total-timesteps 200000 --repeats 1
    git show main~1:cleanrl/ppo.py > /tmp/old.py
    python -m benchmark.speed ppo --compare /tmp/old.py --repeats 5   # the two versions in turn, 5 runs each

The raw rate steps the vector environment the script builds (its make_env, same number of environments) with
random actions and nothing else (not for Isaac Gym, whose environments take tensors: give --raw-steps 0). With
--compare, the two versions run alternately with the same arguments, and the ratio of their median SPS is
new / old. Arguments this command does not know go to the script (`--num-steps 64`). Run it alone on the machine:
any other load skews both.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file, from anywhere: find cleanrl_utils
from cleanrl_utils.scripts import SCRIPTS, load_script, script_names, vector_env  # noqa: E402


@dataclass
class Args:
    script: tyro.conf.Positional[str]
    """the script: a name in cleanrl/ (ppo) or the path of a .py file"""
    env_id: str | None = None
    """the environment (default: the script's)"""
    num_envs: int | None = None
    """the number of environments (default: the script's; per process in a multi-process script)"""
    total_timesteps: int = 100_000
    """the length of each training run"""
    repeats: int = 3
    """the runs of each version (and measurements of the raw rate)"""
    raw_steps: int = 50_000
    """the steps of each raw rate measurement; 0 leaves it out"""
    compare: str | None = None
    """another version of the script (a .py file) to run in turn with it, instead of the raw rate"""


def fail(message):
    print(f"speed: error: {message}", file=sys.stderr)
    sys.exit(2)


def script_path(script):
    path = Path(script) if script.endswith(".py") else SCRIPTS / f"{script}.py"
    if not path.is_file():
        fail(f"no script {path}; give a name in cleanrl/ ({', '.join(script_names())}) or a .py file")
    return path


def raw_env_sps(module, env_id, num_envs, steps):
    """Steps per second of the script's vector environment under random actions."""
    import gymnasium as gym

    envs = vector_env(module, env_id, num_envs)
    action_space = gym.vector.utils.batch_space(envs.single_action_space, num_envs)
    action_space.seed(1)
    envs.reset()
    actions = [action_space.sample() for _ in range(max(1, steps // num_envs))]
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - start
    envs.close()
    return len(actions) * num_envs / elapsed


def script_sps(path, args):
    """The last charts/SPS of one training run of the script at `path`, run in an empty folder."""
    with tempfile.TemporaryDirectory() as cwd:
        proc = subprocess.run([sys.executable, str(path), *args], cwd=cwd, stdout=subprocess.DEVNULL)
        if proc.returncode != 0:
            fail(f"{path.name} {' '.join(args)} exited {proc.returncode}")
        (run_dir,) = {p.parent for p in (Path(cwd) / "runs").rglob("events.out.tfevents*")}
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
        return acc.Scalars("charts/SPS")[-1].value


def beside_raw_rate(path, module, script_args, env_id, num_envs, args):
    """The script's median SPS over --repeats runs, beside the median raw rate of its vector environment."""
    sps = [script_sps(path, script_args) for _ in range(args.repeats)]
    raw = [raw_env_sps(module, env_id, num_envs, args.raw_steps) for _ in range(args.repeats)] if args.raw_steps else []
    raw_median = statistics.median(raw) if raw else float("nan")
    print(f"| script | env | num_envs | script SPS (median of {args.repeats}) | raw env SPS | script / raw |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {path.name} | {env_id} | {num_envs} | {statistics.median(sps):,.0f} "
        f"| {raw_median:,.0f} | {statistics.median(sps) / raw_median:.1%} |"
    )
    print(f"script SPS runs: {[round(s) for s in sps]}; raw env runs: {[round(r) for r in raw]}")


def paired(path, other, script_args, repeats):
    """The two versions in turn, `repeats` rounds of one run each with the same arguments: every run's SPS and each
    round's ratio new / old as they come, then both versions' runs and medians, and the ratio of the medians."""
    runs = {path: [], other: []}
    for repeat in range(repeats):
        for version in (path, other):
            runs[version].append(script_sps(version, script_args))
            print(f"run {repeat + 1}/{repeats}: {version} SPS {runs[version][-1]:,.0f}", flush=True)
        print(f"round {repeat + 1}/{repeats}: new / old {runs[path][-1] / runs[other][-1]:.3f}", flush=True)
    new, old = statistics.median(runs[path]), statistics.median(runs[other])
    rounds = statistics.median(n / o for n, o in zip(runs[path], runs[other]))
    print("| version | SPS runs | median SPS |\n|---|---|---|")
    for version, median in ((path, new), (other, old)):
        print(f"| {version} | {', '.join(f'{s:,.0f}' for s in runs[version])} | {median:,.0f} |")
    print(f"median of the rounds' ratios: {rounds:.3f}")
    print(f"new / old: {new / old:.3f} ({path.name} / {other.name}, medians of {repeats} runs each)")


def main():
    args, extra = tyro.cli(Args, return_unknown_args=True, prog="python -m benchmark.speed", description=__doc__)
    if args.total_timesteps <= 0 or args.repeats <= 0 or args.raw_steps < 0:
        fail("--total-timesteps and --repeats must be positive, --raw-steps 0 or more")
    path = script_path(args.script)
    other = script_path(args.compare) if args.compare else None
    module = load_script(path.stem, path.parent)
    defaults = module.Args.__dataclass_fields__
    num_envs_flag = "num_envs" if "num_envs" in defaults else "local_num_envs"
    env_id = args.env_id or defaults["env_id"].default
    num_envs = args.num_envs or defaults[num_envs_flag].default
    script_args = [f"--{num_envs_flag.replace('_', '-')}", num_envs, "--total-timesteps", args.total_timesteps]
    script_args = list(map(str, ["--env-id", env_id, *script_args, *extra]))
    print(f"{path.name} {' '.join(script_args)}", file=sys.stderr)
    if other is None:
        beside_raw_rate(path, module, script_args, env_id, num_envs, args)
    else:
        paired(path, other, script_args, args.repeats)


if __name__ == "__main__":
    main()
