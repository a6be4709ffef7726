"""cleanrl/ppo_continuous_action_isaacgym.py on the real engine: IsaacGymEnvs' tasks simulated by Newton, from this
repository's adapter (adapters/isaacgym-tasks-newton, installed by `bash scripts/setup.sh newton`), on the CPU.

First the script: a short run of each task, Cartpole learning, the errors a user can cause. Then the tasks
themselves, in this process: their observations and rewards against the same quantities computed here from a state
the test sets (with rotation matrices where the tasks use quaternions), a fall that ends one robot's episode and
restarts that robot alone, the time limit, and the same numbers from the same seed. (What every script shares, this
one on Cartpole, is tested in test_scripts.py; its resume in test_resume_more.py.)

The tasks are made with 10 or 64 copies, the numbers `python -m isaacgym_tasks_newton.warmup` compiles Warp's
kernels for, so that with a warm kernel cache nothing compiles here.

No record of the reference's numbers exists (it needs Isaac Gym and a GPU), so no test pins a loss. What the script
draws is the reference's: the minibatch order is `torch.randperm` on the device every epoch, from the generator
`torch.manual_seed` seeds; a test checks that text."""

import ast
import math
from types import SimpleNamespace

import isaacgym_tasks_newton
import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import (
    COMMON_METRICS,
    SCRIPTS,
    assert_user_error,
    check_smoke_run,
    hiding_folder,
    load_script,
    only_run_dir,
    read_scalars,
    run_as_main,
    run_script,
    script_env,
)

SCRIPT = "ppo_continuous_action_isaacgym.py"
# 4 iterations of 64 copies x 16 steps: the "Done when" run of issue 75
SHORT = ["--num-envs", "64", "--num-steps", "16", "--total-timesteps", "4096", "--no-cuda"]
EPISODE_METRICS = {"charts/episodic_return", "charts/episodic_length"}

ppo = load_script("ppo_continuous_action_isaacgym")


# ---- the script ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["Ant", "Humanoid"])
def test_each_task_trains_through_the_script(task, tmp_path):
    """64 robots, 4 iterations. Humanoids fall within the run, so their episodes are logged; ants at the start of
    training seldom fall, and their episodes last 1000 steps, so the run need not end any."""
    proc = run_script(SCRIPT, "--env-id", task, *SHORT, cwd=tmp_path)
    run_dir = only_run_dir(tmp_path)
    metrics = COMMON_METRICS if task == "Humanoid" else COMMON_METRICS - EPISODE_METRICS
    scalars = check_smoke_run(
        run_dir, f"{task}__ppo_continuous_action_isaacgym__1__", [1024, 2048, 3072, 4096], proc.stdout, metrics
    )
    assert [lr for _, lr in scalars["charts/learning_rate"]] == [pytest.approx(0.0026)] * 4  # not annealed
    if task == "Humanoid":
        lengths = [length for _, length in scalars["charts/episodic_length"]]
        assert lengths and all(1 <= length <= 64 for length in lengths)
        # an episode is logged at the step it ended, which an iteration's 64 steps hold
        ends = [step for step, _ in scalars["charts/episodic_return"]]
        assert all(0 < step <= 4096 for step in ends)


def test_cartpole_return_improves(tmp_path):
    """Learning on the real engine in a few seconds: the first hundred episodes of a fresh policy against the
    last hundred of the run."""
    args = ["--env-id", "Cartpole", "--num-envs", "64", "--num-steps", "16", "--total-timesteps", "32768", "--no-cuda"]
    run_script(SCRIPT, *args, cwd=tmp_path)
    returns = [ret for _, ret in read_scalars(only_run_dir(tmp_path))["charts/episodic_return"]]
    first, last = np.mean(returns[:100]), np.mean(returns[-100:])
    assert last > first + 20, (first, last)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--env-id", "Anymal"], ["there is no task 'Anymal'", "the tasks are Ant, Cartpole, Humanoid"]),
        (["--reward-scaler", "0"], ["--reward-scaler must be positive"]),
        (["--record-video-step-frequency", "-1"], ["--record-video-step-frequency must be positive"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd, args, fragments):
    proc = run_as_main(SCRIPTS / SCRIPT, *args, "--no-cuda", cwd=tmp_path, capfd=capfd)
    assert_user_error(proc, "ppo_continuous_action_isaacgym.py: error:", *fragments)
    assert list(tmp_path.iterdir()) == []


def test_without_newton_one_line_names_the_group_to_install(tmp_path):
    """The adapter installed and Newton not (hidden from a fresh process): the script stops at its import with the
    one command that installs both. (The adapter itself missing is a case of test_scripts.py's.)"""
    hidden = hiding_folder(tmp_path / "hidden", "newton")
    (tmp_path / "work").mkdir()
    proc = run_script(SCRIPT, cwd=tmp_path / "work", check=False, timeout=120, env=script_env(PYTHONPATH=str(hidden)))
    assert_user_error(
        proc, "ppo_continuous_action_isaacgym.py: error: newton is missing", "run `bash scripts/setup.sh newton`"
    )
    assert list((tmp_path / "work").iterdir()) == []


def test_the_rollout_never_reads_a_tensor_on_the_host():
    """Nothing in the rollout loop copies to the host or waits for the device: no .cpu(), .numpy(), .item(),
    .tolist() or .nonzero(), and no NumPy. (The tasks keep to the device too: they restart ended episodes by mask.)"""
    tree = ast.parse((SCRIPTS / SCRIPT).read_text())
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and ast.unparse(node.target) == "step"]
    assert len(loops) == 1
    methods = {
        node.func.attr
        for node in ast.walk(loops[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "step" in methods and not methods & {"cpu", "numpy", "item", "tolist", "nonzero"}
    assert "np" not in {node.id for node in ast.walk(loops[0]) if isinstance(node, ast.Name)}


def test_the_update_draws_its_minibatches_on_the_device_as_the_reference_does():
    """Each epoch's order is `torch.randperm(args.batch_size, device=device)`, the reference's own draw: the stream
    torch.manual_seed(args.seed) seeds, on the device, with no NumPy (nor its random stream) in the update."""
    tree = ast.parse((SCRIPTS / SCRIPT).read_text())
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and ast.unparse(node.target) == "epoch"]
    assert len(loops) == 1
    first = ast.unparse(loops[0].body[0])
    assert first == "order = torch.randperm(args.batch_size, device=device)"
    assert "np" not in {node.id for node in ast.walk(loops[0]) if isinstance(node, ast.Name)}


class FakeTask:
    """Three environments; `step` returns the rewards and dones it is given, in its own buffers, as a task does."""

    num_envs, observation_space, action_space = 3, spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (1,))

    def __init__(self):
        self.rew_buf, self.reset_buf = torch.zeros(3), torch.zeros(3, dtype=torch.long)

    def step(self, script):
        rewards, dones = script
        self.rew_buf[:], self.reset_buf[:] = torch.tensor(rewards), torch.tensor(dones)
        return {"obs": torch.zeros((3, 2))}, self.rew_buf, self.reset_buf, {}


def test_episode_statistics_count_every_ending_in_tensors():
    envs = ppo.RecordEpisodeStatisticsTorch(FakeTask(), torch.device("cpu"))
    assert envs.single_observation_space.shape == (2,) and envs.single_action_space.shape == (1,)
    obs, _, _, infos = envs.step(([1.0, 2.0, 0.5], [0, 0, 0]))
    assert obs.shape == (3, 2)  # the policy's part of the observation dictionary
    assert infos["r"].tolist() == [1.0, 2.0, 0.5] and infos["l"].tolist() == [1, 1, 1]
    # two environments end in the same step: both are reported, and their counters restart
    _, _, _, infos = envs.step(([1.0, 1.0, 1.0], [1, 0, 1]))
    assert infos["r"].tolist() == [2.0, 3.0, 1.5] and infos["l"].tolist() == [2, 2, 2]
    _, _, _, infos = envs.step(([1.0, 1.0, 1.0], [1, 1, 0]))
    assert infos["r"].tolist() == [1.0, 4.0, 1.0] and infos["l"].tolist() == [1, 3, 1]
    # the reference's counters, float32 and int32, through the restarts too
    assert infos["r"].dtype == torch.float32 and infos["l"].dtype == torch.int32
    # what the caller keeps is a copy: later steps do not change it
    envs.step(([5.0, 5.0, 5.0], [0, 0, 0]))
    assert infos["r"].tolist() == [1.0, 4.0, 1.0]


def test_finished_episodes_of_rollout_reads_where_the_rollout_ended_episodes():
    """dones[t] marks obs[t] as the first of an episode: the step that ended it is t - 1, and next_done marks the
    last step. The returns and lengths are those recorded at that step; global_step is counted after the rollout."""
    dones = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # 3 steps x 2 environments
    next_done = torch.tensor([1.0, 1.0])
    returns = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]], dtype=torch.float64)
    lengths = torch.tensor([[1, 5], [2, 6], [3, 7]])
    episodes = ppo.finished_episodes_of_rollout(dones, next_done, returns, lengths, global_step=106)
    assert sorted(episodes) == [(102, 1.0, 1), (104, 20.0, 6), (106, 3.0, 3), (106, 30.0, 7)]
    assert ppo.finished_episodes_of_rollout(torch.zeros((3, 2)), torch.zeros(2), returns, lengths, 106) == []


def test_evaluate_counts_the_first_episode_of_each_fresh_copy(tmp_path):
    """Ten fresh copies, one episode each, whatever their lengths; the returns are those the copies earned."""
    envs = SimpleNamespace(
        single_observation_space=spaces.Box(-np.inf, np.inf, (4,)), single_action_space=spaces.Box(-1, 1, (1,))
    )
    torch.manual_seed(0)
    torch.save(ppo.Agent(envs).state_dict(), tmp_path / "model")
    returns = ppo.evaluate(tmp_path / "model", "Cartpole", 10, "eval", torch.device("cpu"), False, seed=1)
    assert len(returns) == 10 and all(math.isfinite(ret) for ret in returns)
    assert len(set(returns)) > 1  # ten copies, each with its own start


# ---- the tasks, by hand -------------------------------------------------------------------------------------------


def rotation_matrix(quat):
    """The rotation matrix of a unit quaternion stored x, y, z, w (numpy, float64)."""
    x, y, z, w = quat
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def set_robot(envs, world, position, quat, velocity, angular_velocity, dof_pos, dof_vel):
    envs.joint_q[world, :3] = torch.tensor(position)
    envs.joint_q[world, 3:7] = torch.tensor(quat)
    envs.joint_q[world, 7:] = torch.tensor(dof_pos)
    envs.joint_qd[world, :3] = torch.tensor(velocity)
    envs.joint_qd[world, 3:6] = torch.tensor(angular_velocity)
    envs.joint_qd[world, 6:] = torch.tensor(dof_vel)


def expected_feet(envs, world, forces, torques, quats, origins):
    """The feet's wrenches as the observations hold them: about each foot's origin, in its frame."""
    rows = []
    for index, force, torque, quat, origin in zip(envs.feet_index, forces, torques, quats, origins, strict=True):
        rotation = rotation_matrix(quat)
        com_offset = rotation @ envs.body_com[index].double().numpy()
        torque_at_origin = np.asarray(torque) + np.cross(com_offset, force)
        rows.append(np.concatenate([rotation.T @ force, rotation.T @ torque_at_origin]))
    return np.concatenate(rows)


def random_robot_state(envs, rng):
    """A torso somewhere above the ground, turned every way, moving; joints inside their ranges."""
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    lower, upper = envs.dof_lower.double().numpy(), envs.dof_upper.double().numpy()
    return dict(
        position=[rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(0.5, 1.5)],
        quat=quat.tolist(),
        velocity=rng.uniform(-2, 2, 3).tolist(),
        angular_velocity=rng.uniform(-3, 3, 3).tolist(),
        dof_pos=rng.uniform(lower, upper).tolist(),
        dof_vel=rng.uniform(-4, 4, len(lower)).tolist(),
    )


def set_feet(envs, world, rng):
    """Known poses and joint wrenches for the feet; returns them."""
    feet = len(envs.feet_index)
    quats = rng.normal(size=(feet, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    origins = rng.uniform(-1, 1, (feet, 3))
    forces, torques = rng.uniform(-50, 50, (feet, 3)), rng.uniform(-5, 5, (feet, 3))
    for k, index in enumerate(envs.feet_index):
        envs.body_q[world, index, :3] = torch.tensor(origins[k])
        envs.body_q[world, index, 3:] = torch.tensor(quats[k])
        envs.parent_f[world, index, :3] = torch.tensor(forces[k])
        envs.parent_f[world, index, 3:] = torch.tensor(torques[k])
    return forces, torques, quats, origins


def torso_expectations(state, dt):
    """Height, local velocities, yaw, roll, angle to the target, up and heading projections, and the potential:
    from the rotation matrix (its columns are the torso's axes in the world)."""
    rotation = rotation_matrix(state["quat"])
    position = np.array(state["position"])
    to_target = np.array([1000.0, 0.0, 0.0]) - position
    to_target[2] = 0.0
    yaw = math.atan2(rotation[1, 0], rotation[0, 0]) % (2 * math.pi)
    roll = math.atan2(rotation[2, 1], rotation[2, 2]) % (2 * math.pi)
    return dict(
        height=position[2],
        velocity=rotation.T @ state["velocity"],
        angular_velocity=rotation.T @ state["angular_velocity"],
        yaw=yaw,
        roll=roll,
        angle_to_target=math.atan2(-position[2], 1000.0 - position[0]) - yaw,  # the x-z plane, as IsaacGymEnvs has it
        up=rotation[2, 2],
        heading=rotation[:, 0] @ to_target / np.linalg.norm(to_target),
        potential=-np.linalg.norm(to_target) / dt,
    )


@pytest.fixture(scope="module")
def ant():
    return isaacgym_tasks_newton.make("Ant", num_envs=10, device="cpu", seed=1)


@pytest.fixture(scope="module")
def humanoid():
    return isaacgym_tasks_newton.make("Humanoid", num_envs=10, device="cpu", seed=1)


def test_ant_observations_and_reward_from_a_known_state(ant):
    ant.reset()
    rng = np.random.default_rng(5)
    world = 4
    state = random_robot_state(ant, rng)
    set_robot(ant, world, **state)
    feet = set_feet(ant, world, rng)
    actions = rng.uniform(-1, 1, 8)
    ant.actions[world] = torch.tensor(actions)
    ant.potentials[world] = -60000.0  # the potential before this step
    ant.progress_buf[world] = 10
    ant.compute_observations()
    ant.compute_reward()
    obs = ant.obs_buf[world].double().numpy()

    torso = torso_expectations(state, ant.dt)
    lower, upper = ant.dof_lower.double().numpy(), ant.dof_upper.double().numpy()
    scaled_pos = (2 * np.array(state["dof_pos"]) - upper - lower) / (upper - lower)
    expected = np.concatenate(
        [
            [torso["height"]],
            torso["velocity"],
            torso["angular_velocity"],
            [torso["yaw"], torso["roll"], torso["angle_to_target"], torso["up"], torso["heading"]],
            scaled_pos,
            0.2 * np.array(state["dof_vel"]),
            0.1 * expected_feet(ant, world, *feet),
            actions,
        ]
    )
    assert obs.shape == (60,)
    np.testing.assert_allclose(obs, expected, rtol=1e-4, atol=1e-4)

    # the reward, term by term, from the expected observations
    heading = 0.5 if torso["heading"] > 0.8 else 0.5 * torso["heading"] / 0.8
    up = 0.1 if torso["up"] > 0.93 else 0.0
    progress = torso["potential"] - (-60000.0)
    electricity = np.abs(actions * 0.2 * np.array(state["dof_vel"])).sum()
    at_limit = (scaled_pos > 0.99).sum()
    reward = progress + 0.5 + heading + up - 0.005 * (actions**2).sum() - 0.05 * electricity - 0.1 * at_limit
    assert ant.rew_buf[world].item() == pytest.approx(reward, rel=1e-4, abs=1e-3)
    assert ant.reset_buf[world].item() == 0  # above 0.31 m, 11 steps in


def test_humanoid_observations_and_reward_from_a_known_state(humanoid):
    humanoid.reset()
    rng = np.random.default_rng(6)
    world = 7
    state = random_robot_state(humanoid, rng)
    state["position"][2] = 0.6  # below the Humanoid's 0.8 m: fallen
    state["dof_pos"][3] = humanoid.dof_upper[3].item() - 0.001  # a joint at its limit, for the limit cost
    set_robot(humanoid, world, **state)
    feet = set_feet(humanoid, world, rng)
    actions = rng.uniform(-1, 1, 21)
    humanoid.actions[world] = torch.tensor(actions)
    humanoid.joint_f[world, 6:] = humanoid.actions[world] * humanoid.gear  # what apply_actions writes
    constraint = rng.uniform(-30, 30, 21)
    humanoid.constraint_force[world, 6:] = torch.tensor(constraint)
    humanoid.potentials[world] = -60000.0
    humanoid.compute_observations()
    humanoid.compute_reward()
    obs = humanoid.obs_buf[world].double().numpy()

    torso = torso_expectations(state, humanoid.dt)
    gear = np.array(humanoid.gears)
    lower, upper = humanoid.dof_lower.double().numpy(), humanoid.dof_upper.double().numpy()
    scaled_pos = (2 * np.array(state["dof_pos"]) - upper - lower) / (upper - lower)
    wrap = lambda angle: math.atan2(math.sin(angle), math.cos(angle))  # noqa: E731
    expected = np.concatenate(
        [
            [torso["height"]],
            torso["velocity"],
            0.25 * torso["angular_velocity"],
            [wrap(torso["yaw"]), wrap(torso["roll"]), wrap(torso["angle_to_target"]), torso["up"], torso["heading"]],
            scaled_pos,
            0.1 * np.array(state["dof_vel"]),
            0.01 * (actions * gear + constraint),
            0.01 * expected_feet(humanoid, world, *feet),
            actions,
        ]
    )
    assert obs.shape == (108,)
    np.testing.assert_allclose(obs, expected, rtol=1e-4, atol=1e-4)
    # the torso is below the termination height: the death cost, and the episode ends
    assert humanoid.rew_buf[world].item() == -1.0 and humanoid.reset_buf[world].item() == 1

    # the same state standing: the reward, with the costs weighted by each motor's share of the strongest
    state["position"][2] = 1.2
    set_robot(humanoid, world, **state)
    humanoid.potentials[world] = -60000.0
    humanoid.compute_observations()
    humanoid.compute_reward()
    torso = torso_expectations(state, humanoid.dt)
    share = gear / gear.max()
    heading = 0.5 if torso["heading"] > 0.8 else 0.5 * torso["heading"] / 0.8
    up = 0.1 if torso["up"] > 0.93 else 0.0
    near = np.abs(scaled_pos)
    at_limit = ((near > 0.98) * 0.25 * (near - 0.98) / 0.02 * share).sum()
    assert at_limit > 0
    electricity = (np.abs(actions * 0.1 * np.array(state["dof_vel"])) * share).sum()
    progress = torso["potential"] - (-60000.0)
    reward = progress + 2.0 + heading + up - 0.01 * (actions**2).sum() - 0.05 * electricity - at_limit
    assert humanoid.rew_buf[world].item() == pytest.approx(reward, rel=1e-4, abs=1e-3)
    assert humanoid.reset_buf[world].item() == 0


def test_cartpole_observations_reward_and_failures():
    envs = isaacgym_tasks_newton.make("Cartpole", num_envs=10, device="cpu", seed=1)
    envs.reset()
    # cart position and velocity, pole angle and angular velocity; a fast one beyond the clamp of 5
    envs.joint_q[:3] = torch.tensor([[0.5, 0.3], [3.5, 0.0], [0.0, 1.8]])
    envs.joint_qd[:3] = torch.tensor([[1.0, -2.0], [0.0, 0.0], [0.0, 0.0]])
    envs.compute_observations()
    envs.compute_reward()
    assert envs.obs_buf[0].tolist() == pytest.approx([0.5, 1.0, 0.3, -2.0])
    assert envs.rew_buf[0].item() == pytest.approx(1.0 - 0.3**2 - 0.01 * 1.0 - 0.005 * 2.0)
    # beyond 3 m, and the pole past 90 degrees: -2, and the episode ends
    assert envs.rew_buf[1:3].tolist() == [-2.0, -2.0] and envs.reset_buf[:3].tolist() == [0, 1, 1]
    # what a step returns is clamped to [-5, 5], as IsaacGymEnvs' configuration asks; the task's own buffer is not
    envs.joint_qd[4] = torch.tensor([0.0, 50.0])
    obs, _, _, _ = envs.step(torch.zeros((10, 1)))
    assert envs.obs_buf[4, 3].item() > 5.0 and obs["obs"][4, 3].item() == 5.0


def test_a_fall_ends_one_robots_episode_and_restarts_it_alone():
    """Two Ant simulations from the same seed, driven by the same actions; in one, robot 3 is dropped below the
    termination height. It alone gets the death cost and a done; at the next step it starts again from its start
    height with its step count at 0, while every other robot goes on exactly as in the simulation where nothing
    fell. A robot at its time limit ends too, marked as timed out."""
    envs = [isaacgym_tasks_newton.make("Ant", num_envs=10, device="cpu", seed=2) for _ in range(2)]
    generator = torch.Generator().manual_seed(0)
    for task in envs:
        task.reset()
    for _ in range(6):
        actions = 2 * torch.rand((10, 8), generator=generator) - 1
        for task in envs:
            task.step(actions)
    dropped, twin = envs
    dropped.joint_q[3, 2] = 0.15
    dropped.progress_buf[5] = twin.progress_buf[5] = 998  # the last step of robot 5's episode comes next
    actions = 2 * torch.rand((10, 8), generator=generator) - 1
    (obs, rewards, dones, extras), (twin_obs, _, twin_dones, _) = [task.step(actions) for task in envs]
    assert dones.tolist() == [0, 0, 0, 1, 0, 1, 0, 0, 0, 0]
    assert extras["time_outs"].tolist() == [i == 5 for i in range(10)]
    assert rewards[3].item() == -2.0 and obs["obs"][3, 0].item() < 0.31
    others = [i for i in range(10) if i != 3]
    assert torch.equal(obs["obs"][others], twin_obs["obs"][others]) and torch.equal(dones[others], twin_dones[others])

    actions = 2 * torch.rand((10, 8), generator=generator) - 1
    (obs, _, dones, _), (twin_obs, _, _, _) = [task.step(actions) for task in envs]
    assert obs["obs"][3, 0].item() == pytest.approx(0.44)  # the start height: restarted
    assert obs["obs"][5, 0].item() == pytest.approx(0.44)
    assert dropped.progress_buf.tolist() == [8, 8, 8, 0, 8, 0, 8, 8, 8, 8]
    assert torch.equal(obs["obs"][others], twin_obs["obs"][others])


def test_the_same_seed_gives_the_same_numbers():
    def run(seed):
        envs = isaacgym_tasks_newton.make("Humanoid", num_envs=10, device="cpu", seed=seed)
        trace = [envs.reset()["obs"].clone()]
        generator = torch.Generator().manual_seed(0)
        for _ in range(40):  # long enough for humanoids to fall and restart with fresh noise
            obs, rewards, dones, _ = envs.step(2 * torch.rand((10, 21), generator=generator) - 1)
            trace += [obs["obs"].clone(), rewards.clone(), dones.clone()]
        return trace

    first, second, other = run(3), run(3), run(4)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], other[0])
    assert sum(int(dones.sum()) for dones in first[3::3]) > 0  # some fell, and restarted with fresh noise


def test_a_frame_shows_the_robot():
    envs = isaacgym_tasks_newton.make("Ant", num_envs=10, device="cpu", seed=1, render=True)
    envs.reset()
    frame = envs.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    orange = (frame[..., 0] > 150) & (frame[..., 2] < 100)  # the ant's colour against the grey ground and backdrop
    assert orange.mean() > 0.01


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA graph path needs an NVIDIA GPU")
def test_on_a_gpu_the_physics_is_one_cuda_graph_and_agrees_with_the_cpu():
    gpu = isaacgym_tasks_newton.make("Ant", num_envs=64, device="cuda", seed=1)
    cpu = isaacgym_tasks_newton.make("Ant", num_envs=64, device="cpu", seed=1)
    assert gpu.graph is not None and cpu.graph is None
    obs_gpu, obs_cpu = gpu.reset()["obs"], cpu.reset()["obs"]
    assert obs_gpu.device.type == "cuda"
    torch.testing.assert_close(obs_gpu.cpu(), obs_cpu)
    for _ in range(3):
        actions = torch.zeros((64, 8))
        obs_gpu, _, _, _ = gpu.step(actions.cuda())
        obs_cpu, _, _, _ = cpu.step(actions)
    torch.testing.assert_close(obs_gpu["obs"].cpu(), obs_cpu["obs"], rtol=1e-3, atol=1e-3)
