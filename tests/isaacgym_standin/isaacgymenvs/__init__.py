"""Stand-in for IsaacGymEnvs (tests only): the part of its interface that cleanrl/ppo_continuous_action_isaacgym.py
uses, over two small batched tasks simulated with torch on the device asked for. The tests put the folder above
this one on PYTHONPATH; the script treats it like the real package.

What it keeps of IsaacGymEnvs:
- `make(seed, task, num_envs, sim_device, rl_device, graphics_device_id, headless, multi_gpu,
  virtual_screen_capture, force_render)` returns a vector task. The task names are the files in `cfg/task`, where
  the real package's configuration keeps one file per task. One simulation per process: a second `make` fails.
- A task works like IsaacGymEnvs' `VecTask`: `reset()` returns `{"obs": tensor}`; `step(actions)` takes a float32
  tensor of actions on `rl_device`, clamps it to [-1, 1] and returns `({"obs": tensor}, rewards, resets, extras)`
  with `extras["time_outs"]`. The rewards and resets are the task's own buffers, which its next step overwrites.
  An environment whose episode ended is reset inside its next step, after the physics, as IsaacGymEnvs' tasks do:
  the observation that comes with the done flag is the last one of the episode.
- `render(mode="rgb_array")` returns a frame only for a task made with `virtual_screen_capture=True` and
  `headless=False` (the frame comes from the viewer), and None otherwise.

What it checks, to catch a script that copies to the host: actions that are not a float32 tensor on `rl_device`
(a NumPy array, say) are refused with an error.

Tasks:
- FixedEpisodes: environment i earns 1 + (i % 3) / 2 at every step of episodes of 5 + i % 7 steps, whatever the
  actions, so a test can predict every return and length. Like ShadowHand and AllegroHand, it reports
  `extras["consecutive_successes"]`.
- Cartpole: the classic cart-pole (Barto, Sutton and Anderson, 1983) with a continuous push, 1 per step until the
  pole falls or the cart leaves the track, at most 200 steps: a task a policy can visibly learn in seconds.
"""

from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces

TASK_CONFIGS = Path(__file__).parent / "cfg" / "task"
made = []  # the tasks made in this process (Isaac Gym allows one simulation per process)


class VecTask:
    metadata = {"render.modes": ["rgb_array"], "video.frames_per_second": 24}
    num_obs = 0
    num_acts = 0

    def __init__(self, seed, num_envs, rl_device, headless, virtual_screen_capture):
        self.num_envs = num_envs
        self.rl_device = torch.device(rl_device)
        self.headless, self.virtual_screen_capture = headless, virtual_screen_capture
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.num_obs,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (self.num_acts,), np.float32)
        self.generator = torch.Generator(device=self.rl_device).manual_seed(seed)
        self.obs_buf = torch.zeros((num_envs, self.num_obs), device=self.rl_device)
        self.rew_buf = torch.zeros(num_envs, device=self.rl_device)
        self.reset_buf = torch.ones(num_envs, dtype=torch.long, device=self.rl_device)  # all reset at the first step
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long, device=self.rl_device)
        self.max_episode_length = torch.zeros(num_envs, dtype=torch.long, device=self.rl_device)
        self.extras = {}
        self.steps = 0

    def reset(self):
        return {"obs": self.obs_buf.clone()}

    def step(self, actions):
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"stand-in VecTask: actions must be a torch.Tensor, got {type(actions).__name__}")
        expected = (self.num_envs, self.num_acts)
        if actions.device != self.rl_device or actions.dtype != torch.float32 or tuple(actions.shape) != expected:
            raise ValueError(
                f"stand-in VecTask: actions must be float32 of shape {expected} on {self.rl_device}, got "
                f"{actions.dtype} of shape {tuple(actions.shape)} on {actions.device}"
            )
        self.pre_physics_step(actions.clamp(-1.0, 1.0))
        # post-physics: count the step, reset the environments whose episode ended at the last step, observe
        self.progress_buf += 1
        env_ids = self.reset_buf.nonzero().flatten()
        if len(env_ids) > 0:
            self.reset_idx(env_ids)
        self.compute_observations()
        self.compute_reward()
        self.extras["time_outs"] = (self.progress_buf >= self.max_episode_length - 1) & (self.reset_buf != 0)
        self.steps += 1
        return {"obs": self.obs_buf.clone()}, self.rew_buf, self.reset_buf, self.extras

    def render(self, mode="rgb_array"):
        if self.headless or not self.virtual_screen_capture or mode != "rgb_array":
            return None
        # a 64 x 64 frame: a bar as long as environment 0's progress through its episode
        frame = np.zeros((64, 64, 3), dtype=np.uint8)
        progress = float(self.progress_buf[0] / self.max_episode_length[0])
        frame[28:36, : max(1, int(64 * progress))] = 255
        return frame


class FixedEpisodes(VecTask):
    num_obs, num_acts = 2, 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        index = torch.arange(self.num_envs, device=self.rl_device)
        self.max_episode_length[:] = 5 + index % 7
        self.step_reward = 1.0 + (index % 3).float() / 2

    def pre_physics_step(self, actions):
        pass

    def reset_idx(self, env_ids):
        self.progress_buf[env_ids] = 0

    def compute_observations(self):
        self.obs_buf[:, 0] = self.progress_buf / self.max_episode_length
        self.obs_buf[:, 1] = self.step_reward

    def compute_reward(self):
        self.rew_buf[:] = self.step_reward
        self.reset_buf[:] = self.progress_buf >= self.max_episode_length - 1
        # like the hand tasks, a running figure of the task's own (a 0-d tensor): here, the share of
        # environments whose episode ends at this step
        self.extras["consecutive_successes"] = self.reset_buf.float().mean()


class Cartpole(VecTask):
    num_obs, num_acts = 4, 1
    gravity, cart_mass, pole_mass, half_length, max_force, dt = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_episode_length[:] = 200
        self.state = torch.zeros((self.num_envs, 4), device=self.rl_device)  # x, x', theta, theta'

    def pre_physics_step(self, actions):
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        total_mass = self.cart_mass + self.pole_mass
        cos, sin = theta.cos(), theta.sin()
        push = (self.max_force * actions[:, 0] + self.pole_mass * self.half_length * theta_dot**2 * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * push) / (
            self.half_length * (4.0 / 3.0 - self.pole_mass * cos**2 / total_mass)
        )
        x_acc = push - self.pole_mass * self.half_length * theta_acc * cos / total_mass
        self.state[:] = torch.stack(
            [
                x + self.dt * x_dot,
                x_dot + self.dt * x_acc,
                theta + self.dt * theta_dot,
                theta_dot + self.dt * theta_acc,
            ],
            dim=1,
        )

    def reset_idx(self, env_ids):
        noise = torch.rand((len(env_ids), 4), generator=self.generator, device=self.rl_device)
        self.state[env_ids] = (noise - 0.5) * 0.1
        self.progress_buf[env_ids] = 0

    def compute_observations(self):
        self.obs_buf[:] = self.state

    def compute_reward(self):
        fallen = (self.state[:, 0].abs() > 2.4) | (self.state[:, 2].abs() > 0.21)
        self.rew_buf[:] = 1.0
        self.reset_buf[:] = fallen | (self.progress_buf >= self.max_episode_length - 1)


def make(
    seed,
    task,
    num_envs,
    sim_device,
    rl_device,
    graphics_device_id=-1,
    headless=False,
    multi_gpu=False,
    virtual_screen_capture=False,
    force_render=True,
    cfg=None,
):
    if not (TASK_CONFIGS / f"{task}.yaml").is_file():
        raise ValueError(f"stand-in isaacgymenvs: no config for task '{task}' in {TASK_CONFIGS}")
    if made:
        raise RuntimeError("stand-in isaacgymenvs: Isaac Gym runs one simulation per process; make() was called twice")
    if multi_gpu or cfg is not None:
        raise NotImplementedError("stand-in isaacgymenvs: multi_gpu and cfg are not part of the stand-in")
    if sim_device != rl_device:
        raise NotImplementedError("stand-in isaacgymenvs: one device for the simulation and the agent")
    env = {"FixedEpisodes": FixedEpisodes, "Cartpole": Cartpole}[task](
        seed, num_envs, rl_device, headless, virtual_screen_capture
    )
    made.append(env)
    return env
