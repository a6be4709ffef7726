"""Ant and Humanoid: run towards a target 1000 m ahead along x. The observations, rewards, terminations and reset
noise carry over the computation of IsaacGymEnvs' ant.py and humanoid.py (NVIDIA, BSD 3-Clause; see LICENSE) and
their settings from its cfg/task/Ant.yaml and Humanoid.yaml; the robots are the nv_ant.xml and nv_humanoid.xml that
ship in Newton's wheel, simulated by MuJoCo Warp. Where this differs from Isaac Gym, the README says how."""

import math
import xml.etree.ElementTree as ElementTree

import newton
import newton.examples
import torch
import warp as wp

from .vec_task import VecTask

UP = 2  # z is up


# ---- rotations of (..., 3) vectors by (..., 4) quaternions stored x, y, z, w ----


def rotate(quat, vec):
    """`vec` turned by `quat`."""
    axis, w = quat[..., :3], quat[..., 3:]
    twice_cross = 2.0 * torch.cross(axis, vec, dim=-1)
    return vec + w * twice_cross + torch.cross(axis, twice_cross, dim=-1)


def rotate_back(quat, vec):
    """`vec` turned by the inverse of `quat`: a world vector in the frame `quat` describes."""
    inverse = torch.cat([-quat[..., :3], quat[..., 3:]], dim=-1)
    return rotate(inverse, vec)


def roll_and_yaw(quat):
    """The rotations about x and z of the x-y-z Euler angles of `quat`, each in [0, 2 pi), as Isaac Gym's helpers
    returned them."""
    x, y, z, w = quat.unbind(-1)
    roll = torch.atan2(2.0 * (w * x + y * z), w * w - x * x - y * y + z * z)
    yaw = torch.atan2(2.0 * (w * z + x * y), w * w + x * x - y * y - z * z)
    return roll % (2 * math.pi), yaw % (2 * math.pi)


def wrap_angle(angle):
    """`angle` brought into [-pi, pi]."""
    return torch.atan2(torch.sin(angle), torch.cos(angle))


def to_unit_range(x, lower, upper):
    """Maps [lower, upper] linearly onto [-1, 1]."""
    return (2.0 * x - upper - lower) / (upper - lower)


def motor_gears(path):
    """{joint name: gear} of the MJCF file's motors, and the names of its hinge joints in file order, which is the
    order of their degrees of freedom."""
    root = ElementTree.parse(path).getroot()
    gears = {motor.get("joint"): float(motor.get("gear", "1")) for motor in root.iter("motor")}
    hinges = [joint.get("name") for joint in root.find("worldbody").iter("joint") if joint.get("type") != "free"]
    return gears, hinges


class Locomotion(VecTask):
    """What the Ant and the Humanoid share: a free-floating robot on a ground plane, motors driven with torques of
    action x gear x power scale, and the heading and progress terms."""

    asset = ""
    start_height = 0.0
    # IsaacGymEnvs' configuration of the task
    power_scale = 1.0
    heading_weight = 0.5
    up_weight = 0.1
    actions_cost = 0.0
    energy_cost = 0.05
    dof_velocity_scale = 0.0
    contact_force_scale = 0.0
    joints_at_limit_cost = 0.0
    death_cost = 0.0
    termination_height = 0.0
    alive_reward = 0.0
    self_collisions = True
    feet = ()  # bodies whose incoming joint wrench stands for Isaac Gym's force sensors
    observed = ("body_parent_f",)

    def build_robot(self):
        robot = newton.ModelBuilder()
        path = newton.examples.get_asset(self.asset)
        robot.add_mjcf(path, ignore_names=["floor"], enable_self_collisions=self.self_collisions, parse_sites=False)
        robot.joint_q[UP] = self.start_height
        gears, hinges = motor_gears(path)
        self.gears = [gears[name] for name in hinges]
        self.body_names = [label.rsplit("/", 1)[-1] for label in robot.body_label]
        return robot

    def add_ground(self, scene):
        ground = newton.ModelBuilder.ShapeConfig(mu=1.0)  # the friction of IsaacGymEnvs' plane
        scene.add_ground_plane(cfg=ground)

    def setup(self):
        dofs = self.num_acts
        lower = wp.to_torch(self.model.joint_limit_lower).view(self.num_envs, -1)
        upper = wp.to_torch(self.model.joint_limit_upper).view(self.num_envs, -1)
        self.dof_lower = lower[0, 6:].clone()
        self.dof_upper = upper[0, 6:].clone()
        # The start pose of the joints: 0 where the range allows it, else the end of the range nearest to 0.
        zero = torch.zeros(dofs, device=self.device)
        self.start_dof_pos = torch.where(
            self.dof_lower > 0, self.dof_lower, torch.where(self.dof_upper < 0, self.dof_upper, zero)
        )
        self.gear = torch.tensor(self.gears, device=self.device)
        self.start_root = torch.tensor([0.0, 0.0, self.start_height, 0.0, 0.0, 0.0, 1.0], device=self.device)
        self.targets = torch.tensor([1000.0, 0.0, 0.0], device=self.device).repeat(self.num_envs, 1)
        start_distance = torch.linalg.norm(self.targets[0, :2] - self.start_root[:2])
        self.potentials = torch.full((self.num_envs,), -start_distance.item() / self.dt, device=self.device)
        self.prev_potentials = self.potentials.clone()
        self.feet_index = [self.body_names.index(name) for name in self.feet]
        self.body_com = wp.to_torch(self.model.body_com).view(self.num_envs, -1, 3)[0].clone()
        self.parent_f = wp.to_torch(self.observables.body_parent_f).view(self.num_envs, -1, 6)

    def apply_actions(self):
        self.joint_f[:, 6:] = self.actions * self.gear * self.power_scale

    def reset_state(self, mask):
        """The robot upright at its start height, at rest; its joints at their start pose plus uniform noise in
        [-0.2, 0.2) rad, clamped to their range, turning at uniform [-0.1, 0.1) rad/s."""
        dofs = self.num_acts
        noise = self.random(-0.2, 0.2, (self.num_envs, dofs))
        dof_pos = torch.clamp(self.start_dof_pos + noise, self.dof_lower, self.dof_upper)
        dof_vel = self.random(-0.1, 0.1, (self.num_envs, dofs))
        chosen = mask[:, None]
        self.joint_q[:, :7] = torch.where(chosen, self.start_root, self.joint_q[:, :7])
        self.joint_q[:, 7:] = torch.where(chosen, dof_pos, self.joint_q[:, 7:])
        self.joint_qd[:, :6] = torch.where(chosen, 0.0, self.joint_qd[:, :6])
        self.joint_qd[:, 6:] = torch.where(chosen, dof_vel, self.joint_qd[:, 6:])
        # the progress term starts from the distance at the start
        to_target = self.targets - self.start_root[:3]
        to_target[:, UP] = 0.0
        start_potential = -torch.linalg.norm(to_target, dim=-1) / self.dt
        self.prev_potentials[:] = torch.where(mask, start_potential, self.prev_potentials)
        self.potentials[:] = torch.where(mask, start_potential, self.potentials)

    def torso_terms(self):
        """The terms every locomotion observation starts with, from the root's state (position, x-y-z-w
        orientation, linear and angular velocity in world axes): height, velocities in the torso's frame, yaw,
        roll, angle to the target, how upright and how much towards the target it faces. Updates the potentials."""
        position = self.joint_q[:, 0:3]
        orientation = self.joint_q[:, 3:7]
        velocity = self.joint_qd[:, 0:3]
        angular_velocity = self.joint_qd[:, 3:6]
        to_target = self.targets - position
        to_target[:, UP] = 0.0
        self.prev_potentials[:] = self.potentials
        self.potentials[:] = -torch.linalg.norm(to_target, dim=-1) / self.dt
        # the start orientation is the identity, so the torso's rotation from it is its orientation
        up_axis = torch.zeros_like(position)
        up_axis[:, UP] = 1.0
        forward_axis = torch.zeros_like(position)
        forward_axis[:, 0] = 1.0
        up_proj = rotate(orientation, up_axis)[:, UP]
        target_dir = to_target / torch.linalg.norm(to_target, dim=-1, keepdim=True).clamp(min=1e-9)
        heading_proj = (rotate(orientation, forward_axis) * target_dir).sum(-1)
        local_velocity = rotate_back(orientation, velocity)
        local_angular_velocity = rotate_back(orientation, angular_velocity)
        roll, yaw = roll_and_yaw(orientation)
        # IsaacGymEnvs measures the direction of the target in the x-z plane (its z where y would be expected);
        # kept as it was, since the policies it trained saw it so
        target_angle = torch.atan2(self.targets[:, 2] - position[:, 2], self.targets[:, 0] - position[:, 0])
        angle_to_target = target_angle - yaw
        height = position[:, UP : UP + 1]
        return height, local_velocity, local_angular_velocity, yaw, roll, angle_to_target, up_proj, heading_proj

    def feet_wrenches(self):
        """(num_envs, feet, 6): force and torque that each foot's joint passes to the foot, in the foot's own
        frame and about its origin, where Isaac Gym's sensors sat."""
        feet = self.body_q[:, self.feet_index]
        origin, orientation = feet[..., :3], feet[..., 3:]
        wrench = self.parent_f[:, self.feet_index]
        force, torque_at_com = wrench[..., :3], wrench[..., 3:]
        com = origin + rotate(orientation, self.body_com[self.feet_index].expand_as(origin))
        torque = torque_at_com + torch.cross(com - origin, force, dim=-1)
        return torch.cat([rotate_back(orientation, force), rotate_back(orientation, torque)], dim=-1)

    def upright_and_heading_reward(self):
        heading_proj = self.obs_buf[:, 11]
        heading = torch.where(heading_proj > 0.8, self.heading_weight, self.heading_weight * heading_proj / 0.8)
        up = torch.where(self.obs_buf[:, 10] > 0.93, self.up_weight, 0.0)
        return heading + up

    def end_fallen_and_timed_out(self, reward):
        """The reward with the death cost where the torso fell below the termination height; the episode ends
        there, and at the time limit."""
        fallen = self.obs_buf[:, 0] < self.termination_height
        self.rew_buf[:] = torch.where(fallen, self.death_cost, reward)
        timed_out = self.progress_buf >= self.max_episode_length - 1
        self.reset_buf[:] = (fallen | timed_out).long()


class Ant(Locomotion):
    """IsaacGymEnvs' Ant: 60 observations, 8 actions."""

    num_obs = 60
    num_acts = 8
    asset = "nv_ant.xml"
    start_height = 0.44
    actions_cost = 0.005
    dof_velocity_scale = 0.2
    contact_force_scale = 0.1
    joints_at_limit_cost = 0.1
    death_cost = -2.0
    termination_height = 0.31
    alive_reward = 0.5
    self_collisions = False  # IsaacGymEnvs made each ant with its self-collisions filtered out
    feet = ("front_left_foot", "front_right_foot", "left_back_foot", "right_back_foot")

    def compute_observations(self):
        height, velocity, angular_velocity, yaw, roll, angle_to_target, up_proj, heading_proj = self.torso_terms()
        dof_pos = self.joint_q[:, 7:]
        dof_vel = self.joint_qd[:, 6:]
        parts = [
            height,  # 0
            velocity,  # 1-3
            angular_velocity,  # 4-6
            yaw[:, None],  # 7
            roll[:, None],  # 8
            angle_to_target[:, None],  # 9
            up_proj[:, None],  # 10
            heading_proj[:, None],  # 11
            to_unit_range(dof_pos, self.dof_lower, self.dof_upper),  # 12-19
            dof_vel * self.dof_velocity_scale,  # 20-27
            self.feet_wrenches().reshape(self.num_envs, 24) * self.contact_force_scale,  # 28-51
            self.actions,  # 52-59
        ]
        self.obs_buf[:] = torch.cat(parts, dim=-1)

    def compute_reward(self):
        obs = self.obs_buf
        actions_cost = (self.actions**2).sum(-1)
        electricity_cost = (self.actions * obs[:, 20:28]).abs().sum(-1)
        at_limit_cost = (obs[:, 12:20] > 0.99).sum(-1)
        progress = self.potentials - self.prev_potentials
        reward = (
            progress
            + self.alive_reward
            + self.upright_and_heading_reward()
            - self.actions_cost * actions_cost
            - self.energy_cost * electricity_cost
            - self.joints_at_limit_cost * at_limit_cost
        )
        self.end_fallen_and_timed_out(reward)


class Humanoid(Locomotion):
    """IsaacGymEnvs' Humanoid: 108 observations, 21 actions."""

    num_obs = 108
    num_acts = 21
    asset = "nv_humanoid.xml"
    start_height = 1.34
    actions_cost = 0.01
    dof_velocity_scale = 0.1
    angular_velocity_scale = 0.25
    contact_force_scale = 0.01
    joints_at_limit_cost = 0.25
    death_cost = -1.0
    termination_height = 0.8
    alive_reward = 2.0
    feet = ("right_foot", "left_foot")
    observed = ("body_parent_f", "qfrc_constraint")

    def solver_options(self):
        # the humanoid's limbs meet each other: room for more contact candidates than the solver's default
        return {"nconmax": 128, "njmax": 256}

    def setup(self):
        super().setup()
        self.constraint_force = wp.to_torch(self.observables.qfrc_constraint).view(self.num_envs, -1)
        self.effort_share = self.gear / self.gear.max()

    def compute_observations(self):
        height, velocity, angular_velocity, yaw, roll, angle_to_target, up_proj, heading_proj = self.torso_terms()
        dof_pos = self.joint_q[:, 7:]
        dof_vel = self.joint_qd[:, 6:]
        # what drives each joint: its motor's torque and the constraints' (limits, contacts) on that degree
        dof_force = self.joint_f[:, 6:] + self.constraint_force[:, 6:]
        parts = [
            height,  # 0
            velocity,  # 1-3
            angular_velocity * self.angular_velocity_scale,  # 4-6
            wrap_angle(yaw)[:, None],  # 7
            wrap_angle(roll)[:, None],  # 8
            wrap_angle(angle_to_target)[:, None],  # 9
            up_proj[:, None],  # 10
            heading_proj[:, None],  # 11
            to_unit_range(dof_pos, self.dof_lower, self.dof_upper),  # 12-32
            dof_vel * self.dof_velocity_scale,  # 33-53
            dof_force * self.contact_force_scale,  # 54-74
            self.feet_wrenches().reshape(self.num_envs, 12) * self.contact_force_scale,  # 75-86
            self.actions,  # 87-107
        ]
        self.obs_buf[:] = torch.cat(parts, dim=-1)

    def compute_reward(self):
        obs = self.obs_buf
        actions_cost = (self.actions**2).sum(-1)
        # the costs of each joint weighted by its motor's share of the strongest one
        near_limit = obs[:, 12:33].abs()
        over = near_limit > 0.98
        at_limit_cost = (over * self.joints_at_limit_cost * (near_limit - 0.98) / 0.02 * self.effort_share).sum(-1)
        electricity_cost = ((self.actions * obs[:, 33:54]).abs() * self.effort_share).sum(-1)
        progress = self.potentials - self.prev_potentials
        reward = (
            progress
            + self.alive_reward
            + self.upright_and_heading_reward()
            - self.actions_cost * actions_cost
            - self.energy_cost * electricity_cost
            - at_limit_cost
        )
        self.end_fallen_and_timed_out(reward)
