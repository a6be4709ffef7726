"""The Box2D tasks people try right after CartPole (the `box2d` extra): ppo.py trains on LunarLander-v3 and
ppo_continuous_action.py on BipedalWalker-v3, with the settings of the benchmark's box2d block, logging every
metric and finishing episodes; the saved models evaluate. benchmark/ppo.sh's box2d block runs them at full length."""

import pytest
from helpers import COMMON_METRICS, check_smoke_run, only_run_dir, run_script


@pytest.mark.parametrize(
    ("script", "env_id", "args", "batch_size"),
    [
        # the tuned LunarLander settings' shape (many minibatches, gamma 0.999), shortened
        (
            "ppo.py",
            "LunarLander-v3",
            ["--num-envs", "4", "--num-steps", "128", "--num-minibatches", "8", "--gamma", "0.999"],
            4 * 128,
        ),
        ("ppo_continuous_action.py", "BipedalWalker-v3", ["--num-steps", "256", "--update-epochs", "2"], 256),
    ],
    ids=["LunarLander-v3", "BipedalWalker-v3"],
)
def test_box2d_task_trains_saves_and_evaluates(tmp_path, script, env_id, args, batch_size):
    steps = 1024
    proc = run_script(
        script, "--env-id", env_id, *args, "--total-timesteps", steps, "--save-model", cwd=tmp_path, timeout=600
    )
    run_dir = only_run_dir(tmp_path)
    sps_steps = range(batch_size, steps + 1, batch_size)
    scalars = check_smoke_run(run_dir, f"{env_id}__", sps_steps, proc.stdout, COMMON_METRICS)
    assert len(scalars["eval/episodic_return"]) == 10
    assert (run_dir / f"{script[:-3]}.cleanrl_model").is_file()
