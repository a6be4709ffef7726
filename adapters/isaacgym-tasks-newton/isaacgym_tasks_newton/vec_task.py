"""What every task shares: N copies of one robot in N separate Newton worlds, stepped together by the MuJoCo Warp
solver, and the bookkeeping of Isaac Gym's vector tasks around them (clamped actions, a step counter per world,
resets inside the step, observation and reward buffers). Each task fills in the model, the actions' forces, the
reset state, the observations and the rewards."""

import math

import newton
import numpy as np
import torch
import warp as wp
from gymnasium import spaces

# The frame the recorder draws: a small one, since on a CPU each pixel is a ray traced in software
FRAME_WIDTH = 320
FRAME_HEIGHT = 240


class VecTask:
    """A batch of `num_envs` copies of one task on `device` (a torch device or its name).

    `reset()` restarts every copy and returns {"obs": observations}; `step(actions)` takes a (num_envs, num_acts)
    tensor on the device and returns ({"obs": observations}, rewards, resets, extras), all tensors on the device.
    `resets` is 1 where an episode ended at this step (by failure or by the time limit, which
    extras["time_outs"] tells apart). Those copies start again inside the next step, after its physics, so the
    observation that comes with the 1 is the last one of the old episode. The rewards and resets are the task's
    own buffers, which the next step overwrites."""

    num_obs = 0
    num_acts = 0
    max_episode_length = 1000
    # observations and actions are clamped to these bounds, as the task's configuration asked in IsaacGymEnvs
    clip_obs = math.inf
    clip_actions = 1.0
    # one control step of Isaac Gym's configurations (1/60 s), split into this many physics steps
    dt = 0.0166
    substeps = 2
    # what the solver reports besides the new state (SolverMuJoCo.ObservableKind names)
    observed = ()
    metadata = {"render_modes": ["rgb_array"], "video.frames_per_second": 60}

    def __init__(self, num_envs, device, seed, render=False):
        self.num_envs = num_envs
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        wp.init()
        if self.device.type == "cuda" and not wp.is_cuda_available():
            raise RuntimeError(
                "torch sees a GPU and Warp does not: PyPI's warp-lang is built with CUDA 13 and needs an NVIDIA "
                "driver of the R580 series or newer; update the driver, or install Warp's +cu12 wheel from "
                "https://github.com/NVIDIA/warp/releases, or run on the CPU"
            )
        self.wp_device = wp.device_from_torch(self.device)
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.num_obs,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (self.num_acts,), np.float32)

        # One robot, copied into worlds of their own: the copies share the origin but never touch.
        robot = self.build_robot()
        scene = newton.ModelBuilder()
        self.add_ground(scene)
        scene.replicate(robot, num_envs)
        self.model = scene.finalize(device=self.wp_device)
        self.solver = newton.solvers.SolverMuJoCo(self.model, **self.solver_options())
        self.observables = self.solver.observables(set(self.observed)) if self.observed else None
        self.state = self.model.state()
        self.next_state = self.model.state()
        self.control = self.model.control()

        # torch views of the simulation's arrays: the same memory, no copy either way
        self.joint_q = wp.to_torch(self.state.joint_q).view(num_envs, -1)
        self.joint_qd = wp.to_torch(self.state.joint_qd).view(num_envs, -1)
        self.body_q = wp.to_torch(self.state.body_q).view(num_envs, robot.body_count, 7)
        self.joint_f = wp.to_torch(self.control.joint_f).view(num_envs, -1)

        self.obs_buf = torch.zeros((num_envs, self.num_obs), device=self.device)
        self.rew_buf = torch.zeros(num_envs, device=self.device)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.actions = torch.zeros((num_envs, self.num_acts), device=self.device)
        self.extras = {}
        # the noise of every reset comes from here: one seed, the same episodes
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.setup()

        # On a GPU the physics of a step is recorded once as a CUDA graph and replayed: one launch a step instead
        # of hundreds. Warp records on a stream of its own; the replay is ordered after torch's work and before it.
        self.graph = None
        if self.wp_device.is_cuda:
            self.sim_stream = wp.get_stream(self.wp_device)
            with wp.ScopedCapture(device=self.wp_device, stream=self.sim_stream) as capture:
                self.simulate()
            self.graph = capture.graph
        self.camera = None
        if render:
            self.start_camera()

    # ---- what each task defines ----

    def build_robot(self):
        """A newton.ModelBuilder holding one copy of the robot."""
        raise NotImplementedError

    def add_ground(self, scene):
        """Adds what every world stands on (nothing, by default)."""

    def solver_options(self):
        """Keyword arguments for newton.solvers.SolverMuJoCo."""
        return {}

    def setup(self):
        """Reads what the task needs from the finished model (limits, indices)."""

    def apply_actions(self):
        """Writes the forces of self.actions into self.joint_f."""
        raise NotImplementedError

    def reset_state(self, mask):
        """Puts the worlds where `mask` is True in a fresh start state, drawing from self.generator."""
        raise NotImplementedError

    def compute_observations(self):
        raise NotImplementedError

    def compute_reward(self):
        """Fills self.rew_buf, and self.reset_buf with 1 where the episode ends at this step."""
        raise NotImplementedError

    # ---- the vector task ----

    def simulate(self):
        """One control step of physics: `substeps` solver steps, the two states swapped after each, so that the
        result is in self.state again (copied there after an odd number)."""
        for _ in range(self.substeps):
            self.solver.step(
                self.state, self.next_state, self.control, None, self.dt / self.substeps, observables=self.observables
            )
            self.state, self.next_state = self.next_state, self.state
        if self.substeps % 2:
            self.state, self.next_state = self.next_state, self.state
            self.state.assign(self.next_state)

    def run_physics(self):
        if self.graph is None:
            self.simulate()
            return
        torch_stream = wp.stream_from_torch(self.device)
        self.sim_stream.wait_stream(torch_stream)
        wp.capture_launch(self.graph, stream=self.sim_stream)
        torch_stream.wait_stream(self.sim_stream)

    def reset(self):
        """Every world starts a new episode; returns {"obs": their first observations}."""
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.actions.zero_()
        self.reset_state(everyone)
        self.progress_buf.zero_()
        self.reset_buf.zero_()
        self.compute_observations()
        return {"obs": self.obs_buf.clamp(-self.clip_obs, self.clip_obs)}

    def step(self, actions):
        self.actions[:] = actions.clamp(-self.clip_actions, self.clip_actions)
        self.apply_actions()
        self.run_physics()
        # After the physics, as in IsaacGymEnvs: count the step, restart the worlds whose episode ended at the
        # step before, then observe and score. The restart is masked rather than indexed, so that nothing waits
        # for the device to say which worlds ended.
        self.progress_buf += 1
        ended = self.reset_buf.bool()
        self.reset_state(ended)
        self.progress_buf.masked_fill_(ended, 0)
        self.reset_buf.zero_()
        self.compute_observations()
        self.compute_reward()
        timed_out = self.progress_buf >= self.max_episode_length - 1
        self.extras["time_outs"] = timed_out & (self.reset_buf != 0)
        return {"obs": self.obs_buf.clamp(-self.clip_obs, self.clip_obs)}, self.rew_buf, self.reset_buf, self.extras

    def random(self, low, high, shape):
        """Uniform draws in [low, high) from the task's own generator."""
        return low + (high - low) * torch.rand(shape, generator=self.generator, device=self.device)

    # ---- pictures ----

    def start_camera(self):
        """A ray-traced camera (Newton's SensorCamera: Warp kernels, no OpenGL, so it works on any machine) that
        follows world 0's robot."""
        from newton.sensors import SensorCamera

        # a grey backdrop where no ray meets a shape: opaque grey packed in 32 bits, as the signed integer Warp keeps
        grey = int(np.array(0xFF999999, dtype=np.uint32).view(np.int32))
        sky = SensorCamera.ClearData(clear_color=grey)
        self.camera = SensorCamera(self.model, default_clear_data=sky)
        self.camera.create_default_light()
        self.camera_rays = SensorCamera.compute_camera_rays_pinhole(
            FRAME_WIDTH, FRAME_HEIGHT, camera_fov=math.radians(50.0), device=self.wp_device
        )
        self.frame = self.camera.allocate_image_color(1, FRAME_WIDTH, FRAME_HEIGHT)
        self.first_world = wp.array([0], dtype=wp.int32, device=self.wp_device)

    def render(self, mode="rgb_array"):
        """World 0 seen from its side, as a (height, width, 3) uint8 array."""
        if self.camera is None:
            self.start_camera()
        target = self.body_q[0, 0, :3].cpu().numpy().copy()  # a copy: on a CPU the view would write the state
        target[2] = max(float(target[2]), 0.5)  # a fallen robot stays in view with its ground
        eye = target + np.array(self.camera_offset())
        pose = wp.array([look_at(eye, target)], dtype=wp.transformf, device=self.wp_device)
        self.model.bvh_refit_shapes(self.state)
        self.camera.update(self.state, pose, self.camera_rays, color_image=self.frame, world_indices=self.first_world)
        packed = self.frame.numpy()[0]  # RGBA in the bytes of each uint32
        return np.ascontiguousarray(packed.view(np.uint8).reshape(FRAME_HEIGHT, FRAME_WIDTH, 4)[:, :, :3])

    def camera_offset(self):
        """Where the camera sits relative to the robot it follows."""
        return (0.0, -4.0, 1.5)

    def close(self):
        self.graph = None
        self.camera = None


def look_at(eye, target):
    """The transform of a camera at `eye` looking at `target`, z up (the camera looks along its own -z, +y up)."""
    backward = eye - target
    backward = backward / np.linalg.norm(backward)
    right = np.cross([0.0, 0.0, 1.0], backward)
    right = right / np.linalg.norm(right)
    up = np.cross(backward, right)
    rotation = np.stack([right, up, backward], axis=1)  # the camera's axes as columns
    quat = wp.quat_from_matrix(wp.mat33(*rotation.flatten().tolist()))
    return wp.transformf(wp.vec3f(*eye.tolist()), quat)
