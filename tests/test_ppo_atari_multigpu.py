"""cleanrl/ppo_atari_multigpu.py: two processes under torchrun on the CPU (gloo), a world of one under plain python,
and the one-call gradient averaging, run in two processes."""

import shutil
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import tyro
from helpers import (
    COMMON_METRICS,
    FAKE_ATARI_GAME,
    assert_user_error,
    check_smoke_run,
    load_script,
    only_run_dir,
    read_scalars,
    run_copied_alone,
    run_script,
    run_torchrun,
)

# Per process: two environments of 256 steps.
TINY = ["--total-timesteps", "1024", "--local-num-envs", "2", "--num-steps", "128"]
# One thread per process (torchrun's default too): the tests share a small machine.

multigpu = load_script("ppo_atari_multigpu")


def test_two_processes_copied_alone_log_once_then_save_and_evaluate(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(multigpu.__file__, alone / "ppo_atari_multigpu.py")
    proc = run_torchrun(alone / "ppo_atari_multigpu.py", 2, *TINY, "--save-model", cwd=alone, timeout=300)
    run_dir = only_run_dir(alone)  # rank 0 alone writes
    # global_step counts the steps of both processes: 2 processes x 2 environments x 128 steps per iteration
    scalars = check_smoke_run(run_dir, "BreakoutNoFrameskip-v4__ppo_atari_multigpu__1__", [512, 1024], proc.stdout)
    # the games of both processes are logged: random Breakout ends a game in about 200 steps, so each of the four
    # environments (256 steps) finishes one; one process alone would log two at most
    assert len(scalars["charts/episodic_return"]) >= 3
    assert proc.stdout.count("[100%] step 1024/1024") == 1  # one progress line per iteration, from rank 0
    assert (run_dir / "ppo_atari_multigpu.cleanrl_model").is_file()
    assert [step for step, _ in scalars["eval/episodic_return"]] == list(range(10))


def test_plain_python_is_a_world_of_one(tmp_path):
    run_dir = run_copied_alone("ppo_atari_multigpu.py", *TINY, "--total-timesteps", "512", tmp_path=tmp_path)
    scalars = read_scalars(run_dir)
    assert COMMON_METRICS <= set(scalars), COMMON_METRICS - set(scalars)
    assert [step for step, _ in scalars["charts/SPS"]] == [256, 512]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--num-minibatches", "3"], ["--local-num-envs x --num-steps = 1024", "--num-minibatches 3"]),
        (["--no-cuda", "--device-ids", "0"], ["--device-ids picks GPUs", "drop --device-ids"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragments):
    proc = run_script("ppo_atari_multigpu.py", *args, cwd=tmp_path, check=False, timeout=120)
    assert_user_error(proc, "ppo_atari_multigpu.py: error:", *fragments)
    assert not (tmp_path / "runs").exists(), "no work may start before the arguments are checked"


def checked(world_size=1, cuda_available=False, device_count=0, **fields):
    """What check_args, then check_device, find wrong with these arguments in a world of `world_size`."""
    args = multigpu.Args(**fields)
    args.world_size = world_size
    return multigpu.check_args(args) or multigpu.check_device(args, cuda_available, device_count)


def test_sizes_devices_and_backends_are_checked():
    assert checked() is None
    assert "--local-num-envs must be positive" in checked(local_num_envs=0)
    # each process splits its own batch: 2 x 128 into 4 minibatches is fine, 2 x 2 into 8 is not
    assert checked(local_num_envs=2, num_minibatches=4, total_timesteps=1024, world_size=2) is None
    assert "does not divide" in checked(local_num_envs=2, num_steps=2, num_minibatches=8)
    # the total must cover one batch of all processes
    assert "less than one batch of all 4 processes (4096)" in checked(total_timesteps=2048, world_size=4)
    # one device id per process; ids may repeat, and must exist
    assert "names 2 GPUs for 1 processes" in checked(device_ids=[0, 1])
    assert checked(device_ids=[0, 0], world_size=2, cuda_available=True, device_count=1) is None
    assert "names a GPU this machine lacks" in checked(
        device_ids=[0, 3], world_size=2, cuda_available=True, device_count=2
    )
    assert "--device-ids picks GPUs" in checked(device_ids=[0], cuda_available=True, device_count=1, cuda=False)
    assert "--backend nccl needs GPUs" in checked(backend="nccl")
    assert checked(backend="nccl", cuda_available=True, device_count=1) is None


def test_derived_sizes_are_not_flags(monkeypatch):
    monkeypatch.setitem(sys.modules, multigpu.__name__, multigpu)  # tyro reads the field docs from the source
    assert tyro.cli(multigpu.Args, args=["--local-num-envs", "4"]).local_num_envs == 4
    for flag in ("--num-envs", "--world-size", "--batch-size", "--local-batch-size", "--num-iterations"):
        with pytest.raises(SystemExit) as exit_info:
            tyro.cli(multigpu.Args, args=[flag, "4"])
        assert exit_info.value.code == 2


# ---- the gradient averaging, in two processes ---------------------------------------------------


def small_model():
    """A convolution in the script's channels-last layout and a linear layer, with the same weights everywhere."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.Flatten(), nn.Linear(12, 2)).to(memory_format=torch.channels_last)


def known_gradient(param, rank):
    """A different gradient in every process: (rank + 1) x (0, 1, 2, ...)."""
    return (rank + 1.0) * torch.arange(param.numel(), dtype=param.dtype).view(param.shape)


def average_in_process(rank, world_size, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    model = small_model()
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=0.1, eps=1e-5, fused=True)
    for param in params:
        # laid out like the parameter (channels-last for the convolution), as backward() leaves gradients
        param.grad = torch.empty_like(param).copy_(known_gradient(param, rank))
    multigpu.average_gradients(params, world_size)
    grads = [param.grad.clone() for param in params]
    nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
    optimizer.step()
    games = multigpu.gather_games([(64 * (rank + 1), float(rank), 100 + rank)], world_size)
    torch.save({"grads": grads, "params": [p.detach().clone() for p in params], "games": games}, out_dir / f"{rank}.pt")
    dist.destroy_process_group()


def test_gradients_are_averaged_in_one_all_reduce_and_steps_agree(tmp_path):
    world_size = 2
    mp.spawn(average_in_process, args=(world_size, tmp_path / "init", tmp_path), nprocs=world_size, join=True)
    results = [torch.load(tmp_path / f"{rank}.pt") for rank in range(world_size)]
    params = list(small_model().parameters())
    for i, param in enumerate(params):
        # the mean of (1 x base) and (2 x base) in both processes
        expected = (known_gradient(param, 0) + known_gradient(param, 1)) / 2
        for result in results:
            torch.testing.assert_close(result["grads"][i], expected)
        # so both took the same optimizer step from the same weights
        assert torch.equal(results[0]["params"][i], results[1]["params"][i])
        assert not torch.equal(results[0]["params"][i], param.detach())
    # every process receives every process's finished games, in step order
    assert results[0]["games"] == results[1]["games"] == [(64, 0.0, 100), (128, 1.0, 101)]


def test_average_gradients_makes_one_call_over_one_buffer(monkeypatch):
    calls = []
    monkeypatch.setattr(multigpu.dist, "all_reduce", lambda tensor, op: calls.append((tensor.shape, op)))
    params = list(small_model().parameters())
    for param in params:
        param.grad = known_gradient(param, 0)
    multigpu.average_gradients(params, 4)
    assert calls == [((sum(p.numel() for p in params),), dist.ReduceOp.SUM)]
    # without the other processes the sum is this process's gradient alone, divided by the world size
    for param in params:
        torch.testing.assert_close(param.grad, known_gradient(param, 0) / 4)


def test_logged_return_is_the_unclipped_score_of_a_whole_game():
    """The same statistics as ppo_atari.py: one point per game, its real return over all lives (see helpers)."""
    envs = multigpu.make_vector_env(FAKE_ATARI_GAME, 1, False, "unused")
    envs.reset(seed=1)
    games = []
    for _ in range(100):
        games.extend(multigpu.finished_games(envs.step([0])[4]))
    envs.close()
    assert len(games) >= 2 and games == [(360.0, 120)] * len(games)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_script("ppo_atari_multigpu")
    assert list(tmp_path.iterdir()) == []
