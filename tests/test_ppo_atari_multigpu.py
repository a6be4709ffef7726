"""cleanrl/ppo_atari_multigpu.py: two processes under torchrun on the CPU (gloo), the checks of sizes, devices and
backends, and the gathering of episodes, run in two processes."""

import json
import shutil
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import tyro
from helpers import ROOT, check_smoke_run, load_script, only_run_dir, read_scalars, run_torchrun

# Per process: two environments of 256 steps.
TINY = ["--total-timesteps", "1024", "--local-num-envs", "2", "--num-steps", "128"]

multigpu = load_script("ppo_atari_multigpu")


@pytest.mark.multicore
def test_two_processes_copied_alone_log_once_then_save_and_evaluate(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(multigpu.__file__, alone / "ppo_atari_multigpu.py")
    proc = run_torchrun(alone / "ppo_atari_multigpu.py", 2, *TINY, "--save-model", cwd=alone, timeout=600)
    run_dir = only_run_dir(alone)  # rank 0 alone writes
    # global_step counts the steps of both processes: 2 processes x 2 environments x 128 steps per iteration
    scalars = check_smoke_run(run_dir, "BreakoutNoFrameskip-v4__ppo_atari_multigpu__1__", [512, 1024], proc.stdout)
    # the episodes of both processes are logged: random Breakout ends a game in about 200 steps, so each of the four
    # environments (256 steps) finishes one; one process alone would log two at most
    assert len(scalars["charts/episodic_return"]) >= 3
    assert proc.stdout.count("[100%] step 1024/1024") == 1  # one progress line per iteration, from rank 0
    assert (run_dir / "ppo_atari_multigpu.cleanrl_model").is_file()
    assert [step for step, _ in scalars["eval/episodic_return"]] == list(range(10))


def checked(monkeypatch, world_size=1, cuda_available=False, device_count=0, **fields):
    """What check_args finds wrong with these arguments in a world of `world_size`, on a machine with these GPUs."""
    monkeypatch.setattr(multigpu.torch.cuda, "is_available", lambda: cuda_available)
    monkeypatch.setattr(multigpu.torch.cuda, "device_count", lambda: device_count)
    args = multigpu.Args(**fields)
    args.world_size = world_size
    return multigpu.check_args(args)


def test_sizes_devices_and_backends_are_checked(monkeypatch):
    assert checked(monkeypatch) is None
    assert "--local-num-envs must be positive" in checked(monkeypatch, local_num_envs=0)
    # each process splits its own batch: 2 x 128 into 4 minibatches is fine, 2 x 2 into 8 is not
    assert checked(monkeypatch, local_num_envs=2, num_minibatches=4, total_timesteps=1024, world_size=2) is None
    assert "--num-minibatches 8 must divide --local-num-envs x --num-steps = 4" in checked(
        monkeypatch, local_num_envs=2, num_steps=2, num_minibatches=8
    )
    # the total must cover one batch of all processes: 4 x 8 x 128 = 4096
    assert "4 processes x --local-num-envs x --num-steps = 4096 must be at most" in checked(
        monkeypatch, total_timesteps=2048, world_size=4
    )
    assert checked(monkeypatch, total_timesteps=4096, world_size=4) is None
    # one device id per process; ids may repeat, and must be GPUs of this machine, with CUDA on
    gpus = {"cuda_available": True, "device_count": 2}
    assert "each of the 1 processes" in checked(monkeypatch, device_ids=[0, 1], **gpus)
    assert checked(monkeypatch, device_ids=[1, 1], world_size=2, **gpus) is None
    assert "one of this run's 2 GPUs" in checked(monkeypatch, device_ids=[0, 2], world_size=2, **gpus)
    assert "this run's 0 GPUs" in checked(monkeypatch, device_ids=[0], cuda=False, **gpus)
    assert "this run's 0 GPUs" in checked(monkeypatch, device_ids=[0])
    assert "--backend nccl is not available" in checked(monkeypatch, backend="nccl")
    assert checked(monkeypatch, backend="nccl", **gpus) is None


def test_derived_sizes_are_not_flags(monkeypatch):
    monkeypatch.setitem(sys.modules, multigpu.__name__, multigpu)  # tyro reads the field docs from the source
    args = tyro.cli(multigpu.Args, args=["--local-num-envs", "4", "--device-ids", "0", "1", "--backend", "nccl"])
    assert (args.local_num_envs, args.device_ids, args.backend) == (4, [0, 1], "nccl")
    for flags in (["--num-envs", "4"], ["--world-size", "4"], ["--local-batch-size", "4"], ["--backend", "tcp"]):
        with pytest.raises(SystemExit) as exit_info:
            tyro.cli(multigpu.Args, args=flags)
        assert exit_info.value.code == 2


# ---- the gathering of episodes, in two processes ------------------------------------------------
# (the gradient averaging is inline in the update loop: the conformance record of two processes checks it, and
# test_distinct_env_seeds_change_the_other_processes_games shows process 1's games reach process 0's update)


def gather_in_process(rank, world_size, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    episodes = multigpu.gather_episodes([(64 * (rank + 1), float(rank), 100 + rank)], world_size)
    torch.save(episodes, out_dir / f"{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.multicore
def test_every_process_receives_every_process_episodes_in_step_order(tmp_path):
    world_size = 2
    mp.spawn(gather_in_process, args=(world_size, tmp_path / "init", tmp_path), nprocs=world_size, join=True)
    results = [torch.load(tmp_path / f"{rank}.pt") for rank in range(world_size)]
    assert results[0] == results[1] == [(64, 0.0, 100), (128, 1.0, 101)]


def test_a_world_of_one_gathers_nothing():
    episodes = [(8, 1.0, 40)]
    assert multigpu.gather_episodes(episodes, 1) is episodes


@pytest.mark.multicore
def test_distinct_env_seeds_change_the_other_processes_games(tmp_path):
    """The default gives environment i of process r the reference's seed + r + i (its numbers are the conformance
    record's); --distinct-env-seeds gives it seed + r x local_num_envs + i, so process 1 plays other games and the
    averaged update, logged by process 0, differs from the first iteration on."""
    record = json.loads((ROOT / "tests/conformance/ppo_atari_multigpu__breakout_2envs.json").read_text())
    run_torchrun("ppo_atari_multigpu.py", 2, *record["args"], "--distinct-env-seeds", cwd=tmp_path)
    value_loss = read_scalars(only_run_dir(tmp_path))["losses/value_loss"]
    reference = record["reference"]["own_stack"]["losses/value_loss"]
    assert value_loss[0][0] == reference[0][0]
    assert abs(value_loss[0][1] - reference[0][1]) > 1e-3 * abs(reference[0][1])
