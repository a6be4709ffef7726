"""Cartpole: keep a pole upright on a cart that slides along y. The observations, reward, termination and reset
noise carry over the computation of IsaacGymEnvs' cartpole.py (NVIDIA, BSD 3-Clause; see LICENSE) and its
cfg/task/Cartpole.yaml. The model is written here from the sizes and masses of IsaacGymEnvs' cartpole.urdf."""

import math

import newton
import torch

from .vec_task import VecTask

# A cart of 1 kg on a rail (+-4 m), and a pole of 1 kg, 1 m long, hinged 0.12 m beside the cart's centre, its mass
# 0.47 m up. No collisions: nothing here touches anything.
CARTPOLE_MJCF = """
<mujoco model="cartpole">
  <worldbody>
    <body name="cart" pos="0 0 2">
      <joint name="slider" type="slide" axis="0 1 0" limited="true" range="-4 4"/>
      <geom type="box" size="0.1 0.125 0.1" mass="1" contype="0" conaffinity="0"/>
      <body name="pole" pos="0.12 0 0">
        <joint name="hinge" type="hinge" axis="1 0 0" limited="false"/>
        <geom type="box" size="0.02 0.03 0.5" pos="0 0 0.47" mass="1" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


class Cartpole(VecTask):
    """IsaacGymEnvs' Cartpole: 4 observations (cart position and velocity, pole angle and angular velocity), 1
    action (a push of up to 400 N), episodes of at most 500 steps."""

    num_obs = 4
    num_acts = 1
    max_episode_length = 500
    clip_obs = 5.0
    max_push = 400.0
    reset_distance = 3.0

    def build_robot(self):
        robot = newton.ModelBuilder()
        robot.add_mjcf(CARTPOLE_MJCF)
        return robot

    def solver_options(self):
        return {"disable_contacts": True}

    def apply_actions(self):
        self.joint_f[:, 0] = self.actions[:, 0] * self.max_push

    def reset_state(self, mask):
        """Both joints at uniform positions in [-0.1, 0.1) and velocities in [-0.25, 0.25)."""
        positions = 0.2 * (self.random(0.0, 1.0, (self.num_envs, 2)) - 0.5)
        velocities = 0.5 * (self.random(0.0, 1.0, (self.num_envs, 2)) - 0.5)
        self.joint_q[:] = torch.where(mask[:, None], positions, self.joint_q)
        self.joint_qd[:] = torch.where(mask[:, None], velocities, self.joint_qd)

    def compute_observations(self):
        self.obs_buf[:] = torch.stack(
            [self.joint_q[:, 0], self.joint_qd[:, 0], self.joint_q[:, 1], self.joint_qd[:, 1]], dim=-1
        )

    def compute_reward(self):
        cart_pos, cart_vel, pole_angle, pole_vel = self.obs_buf.unbind(-1)
        # upright, with the cart and the pole moving little
        reward = 1.0 - pole_angle * pole_angle - 0.01 * cart_vel.abs() - 0.005 * pole_vel.abs()
        failed = (cart_pos.abs() > self.reset_distance) | (pole_angle.abs() > math.pi / 2)
        self.rew_buf[:] = torch.where(failed, -2.0, reward)
        timed_out = self.progress_buf >= self.max_episode_length - 1
        self.reset_buf[:] = (failed | timed_out).long()

    def camera_offset(self):
        return (4.0, 0.0, 0.5)
