# PPO on Isaac Gym's tasks, thousands of robots simulated by Newton; see docs/ppo.md#ppo_continuous_action_isaacgympy
# Follows CleanRL's ppo_continuous_action_isaacgym.py (MIT licence, (c) 2019 CleanRL developers); see CREDITS.md
# CleanRL built that script on NVIDIA's IsaacGymEnvs (BSD 3-clause licence, (c) 2018-2022 NVIDIA Corporation)
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.normal import Normal
from torch.utils.tensorboard import SummaryWriter

try:
    import isaacgym_tasks_newton  # IsaacGymEnvs' tasks with Isaac Gym's interface, simulated by Newton
except ModuleNotFoundError as e:
    missing = f"{e.name} is missing; run `bash scripts/setup.sh newton` in a clone of this project"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
    sys.exit(2)


@dataclass
class Args:
    exp_name: str = Path(__file__).stem
    """name of the experiment, part of the run's folder name (the script's file name by default)"""
    seed: int = 1
    """seed for Python, NumPy, torch and the simulation"""
    torch_deterministic: bool = True
    """ask cuDNN for deterministic kernels (`torch.backends.cudnn.deterministic`)"""
    cuda: bool = True
    """train on the GPU when one is available (--no-cuda keeps to the CPU)"""
    track: bool = False
    """also log the run to Weights & Biases"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run goes to"""
    wandb_entity: str | None = None
    """Weights & Biases team or user that owns the project (None: your default)"""
    capture_video: bool = False
    """record videos of environment 0 into videos/ (see --record-video-step-frequency)"""
    save_model: bool = False
    """save the trained weights into runs/{run_name}/, then play 10 evaluation episodes with them"""
    upload_model: bool = False
    """push the saved model to the Hugging Face Hub (needs --save-model)"""
    hf_entity: str = ""
    """Hugging Face user or organisation to push to (empty: the account you are logged in with)"""
    checkpoint_every: int = 0
    """write a checkpoint into the run folder every N iterations (0: never)"""
    resume: str | None = None
    """a run folder (or its checkpoint) to go on with, in that folder; flags left out take the run's own values"""
    resume_changed_code: bool = False
    """with --resume, go on although the code changed since the checkpoint: its learner, fresh environments"""

    # What PPO does, and how much of it
    env_id: str = "Ant"
    """task to learn: Ant, Humanoid or Cartpole (IsaacGymEnvs' tasks, simulated by Newton)"""
    total_timesteps: int = 30000000
    """environment steps to train for, summed over all environments"""
    learning_rate: float = 0.0026
    """Adam's step size (where it starts, with --anneal-lr)"""
    num_envs: int = 4096
    """environments stepped side by side, each collecting its share of every rollout"""
    num_steps: int = 16
    """steps each environment takes per rollout; a rollout is num_envs x num_steps transitions"""
    anneal_lr: bool = False
    """decrease the learning rate linearly to zero over the run"""
    gamma: float = 0.99
    """discount: how much a reward one step later is worth"""
    gae_lambda: float = 0.95
    """GAE's lambda: 0 trusts the value function's one-step estimate, 1 the whole sum of rewards"""
    num_minibatches: int = 2
    """parts each rollout is split into for the gradient steps of one epoch"""
    update_epochs: int = 4
    """passes over each rollout during its update"""
    norm_adv: bool = True
    """rescale each minibatch's advantages to mean 0 and standard deviation 1"""
    clip_coef: float = 0.2
    """how far the probability ratio may move from 1 before the objective stops rewarding it"""
    clip_vloss: bool = False
    """clip the value function's change too, as the PPO paper's code does"""
    ent_coef: float = 0.0
    """weight of the entropy bonus, which keeps the policy exploring"""
    vf_coef: float = 2.0
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 1.0
    """largest gradient norm allowed; larger gradients are scaled down to it"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL divergence passes this (None: never)"""
    reward_scaler: float = 1.0
    """factor the rewards are multiplied by for training (the logged returns stay the task's own)"""
    record_video_step_frequency: int = 1464
    """with --capture-video, a video of 100 steps starts every this many steps of the simulation"""

    # computed from the flags above once they are parsed
    batch_size: tyro.conf.Suppress[int] = 0
    """transitions per rollout: num_envs x num_steps"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """transitions per gradient step: batch_size / num_minibatches"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """rollouts in the run, each followed by an update: total_timesteps / batch_size"""


class RecordVideo:
    """Records `video_length` steps of environment 0 every `step_frequency` steps of the vector environment into
    `video_folder`. The task draws its frames with a ray-traced camera, which needs neither a display nor OpenGL."""

    def __init__(self, env, video_folder, step_frequency, video_length=100):
        self.env = env
        self.video_folder = video_folder
        self.step_frequency = step_frequency
        self.video_length = video_length
        self.num_envs = env.num_envs
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.step_id = 0
        self.frames = []

    def reset(self):
        return self.env.reset()

    def step(self, actions):
        result = self.env.step(actions)
        if self.frames or self.step_id % self.step_frequency == 0:
            self.frames.append(self.env.render(mode="rgb_array"))
        self.step_id += 1
        if len(self.frames) == self.video_length:
            self.close()
        return result

    def close(self):  # writes the video being recorded, if any
        if self.frames:
            from moviepy import ImageSequenceClip

            os.makedirs(self.video_folder, exist_ok=True)
            fps = getattr(self.env, "metadata", {}).get("video.frames_per_second", 30)
            path = f"{self.video_folder}/rl-video-step-{self.step_id - len(self.frames)}.mp4"
            ImageSequenceClip(self.frames, fps=fps).write_videofile(path, logger=None)
            self.frames = []


class RecordEpisodeStatisticsTorch:
    """The view of a task the agent uses: the `obs` entry of its observations, the spaces of one environment
    (named as in Gymnasium's vector environments), and in infos["r"] and infos["l"] the return (float32) and length
    (int32) so far of every environment's episode, on the task's device (where `dones` is set: the episode it ended)."""

    def __init__(self, env, device):
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.episode_returns = torch.zeros(env.num_envs, dtype=torch.float32, device=device)
        self.episode_lengths = torch.zeros(env.num_envs, dtype=torch.int32, device=device)

    def reset(self):
        return self.env.reset()["obs"]

    def step(self, actions):
        obs, rewards, dones, infos = self.env.step(actions)
        self.episode_returns += rewards
        self.episode_lengths += 1
        infos["r"] = self.episode_returns.clone()  # the caller's own copy: the counters go on below
        infos["l"] = self.episode_lengths.clone()
        self.episode_returns *= 1 - dones  # an episode that ended starts again from 0
        self.episode_lengths *= 1 - dones
        return obs["obs"], rewards, dones, infos

    def close(self):
        self.env.close()


def make_env(env_id, num_envs, seed, device, capture_video, run_name, record_video_step_frequency):
    """The vector environment: one Newton simulation of `num_envs` copies of the task, taking and returning tensors
    on `device`; an episode restarts inside the step after the one that ended it. A camera is made only for videos."""
    envs = isaacgym_tasks_newton.make(env_id, num_envs=num_envs, device=device, seed=seed, render=capture_video)
    if capture_video:
        envs = RecordVideo(envs, f"videos/{run_name}", record_video_step_frequency)
    return RecordEpisodeStatisticsTorch(envs, device)


def finished_episodes_of_rollout(dones, next_done, episode_returns, episode_lengths, global_step):
    """[(global step, return, length)] of the episodes that ended in a rollout of shape (num_steps, num_envs), read
    in one look at all of it: the rollout's only copy to the host. dones[t] is 1 where obs[t] starts a new episode."""
    num_steps, num_envs = dones.shape
    ended_step, ended_env = torch.cat([dones[1:], next_done[None]]).nonzero(as_tuple=True)
    ended_global_steps = (global_step - (num_steps - 1 - ended_step) * num_envs).tolist()
    ended_returns = episode_returns[ended_step, ended_env]
    ended_lengths = episode_lengths[ended_step, ended_env]
    return list(zip(ended_global_steps, ended_returns.tolist(), ended_lengths.tolist()))


def layer_init(layer, std=np.sqrt(2), bias=0.0):
    """Orthogonal weights scaled by `std`, constant biases: PPO's usual start, which matters for how it learns."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """Two separate networks over the same observation: the critic estimates its value, the actor gives the mean
    of a Gaussian over the actions, whose log standard deviations are parameters of their own."""

    def __init__(self, envs):
        super().__init__()
        obs_size = np.array(envs.single_observation_space.shape).prod()
        hidden = 256
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        action_size = np.prod(envs.single_action_space.shape)
        # a small last layer: every mean starts near 0
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, action_size), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_size))  # one per action, whatever the state

    def get_value(self, obs):
        return self.critic(obs)

    def get_action_and_value(self, obs, action=None):
        """Samples an action (or takes the one given, to score it again) and returns it with its log-probability,
        the policy's entropy and the critic's value."""
        mean = self.actor_mean(obs)
        logstd = self.actor_logstd.expand_as(mean)
        std = torch.exp(logstd)
        policy = Normal(mean, std)
        if action is None:
            action = policy.sample()
        # the action's dimensions are independent: their log-probabilities and entropies add up
        return action, policy.log_prob(action).sum(1), policy.entropy().sum(1), self.critic(obs)


def fail(message):
    """One line on stderr and exit status 2: how every error a user can cause ends, before any training."""
    print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_args(args):
    """What is wrong with the arguments, or None: each of these would crash late or train silently wrong."""
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "learning_rate")
    sizes += ("reward_scaler", "record_video_step_frequency")
    bad = [f"--{name.replace('_', '-')}" for name in sizes if getattr(args, name) <= 0]
    if bad:
        return f"{', '.join(bad)} must be positive"
    if not 0 <= args.gamma <= 1:
        return f"--gamma must lie in [0, 1], got {args.gamma}"
    if not 0 <= args.gae_lambda <= 1:
        return f"--gae-lambda must lie in [0, 1], got {args.gae_lambda}"
    if args.clip_coef < 0:
        return f"--clip-coef must be at least 0, got {args.clip_coef}"
    if args.target_kl is not None and args.target_kl <= 0:
        return f"--target-kl must be positive (leave it out for no early stopping), got {args.target_kl}"
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        return f"--num-minibatches {args.num_minibatches} must divide --num-envs x --num-steps = {batch_size}"
    if batch_size > args.total_timesteps:
        return f"--num-envs x --num-steps = {batch_size} must be at most --total-timesteps {args.total_timesteps}"
    if args.upload_model and not args.save_model:
        return "--upload-model uploads the saved model: add --save-model"
    if args.resume_changed_code and not args.resume:
        return "--resume-changed-code goes with --resume: give the run folder to go on with"


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video, seed):
    """Plays `eval_episodes` episodes with a saved model, the first episode of each of as many fresh copies of the
    task (the first ten to end among fewer copies would favour short ones); returns their returns."""
    # one video, from the first step: no task's episode is longer than 1000 steps
    envs = make_env(env_id, eval_episodes, seed, device, capture_video, run_name, 1000)
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    obs = envs.reset()
    counted = torch.zeros(eval_episodes, dtype=torch.bool, device=device)  # copies whose episode has ended
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(obs)
        obs, _, dones, infos = envs.step(actions)
        ended = dones.bool() & ~counted
        counted = counted | ended
        for episodic_return in infos["r"][ended].tolist():
            print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
            episodic_returns.append(episodic_return)
    envs.close()
    return episodic_returns[:eval_episodes]


if __name__ == "__main__":
    args = tyro.cli(Args)
    problem = check_args(args)
    if problem:
        fail(problem)
    try:  # what is not training comes from this project's cleanrl_utils, imported only when asked for
        if args.upload_model:
            from cleanrl_utils.huggingface import push_to_hub
        if args.checkpoint_every or args.resume:
            from cleanrl_utils import checkpoint
    except ModuleNotFoundError as e:
        fail(f"{e.name} is missing: run `pip install -e .` in a clone of this project")
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.checkpoint_every or args.resume:  # with --resume: the run it goes on with, its checkpoint checked
        run_name = checkpoint.begin(args, __file__, run_name)

    # The environments: one Newton simulation on the device, which keeps its tensors there. An unknown task stops
    # here, before anything is written.
    tasks = isaacgym_tasks_newton.tasks()
    if args.env_id not in tasks:
        fail(f"there is no task '{args.env_id}'; the tasks are {', '.join(tasks)}")
    # One seed for every random number: Python's, NumPy's and torch's (weights, sampled actions, minibatch order).
    # The task draws its resets from a generator of its own, which it seeds with the same seed when it is made.
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    use_cuda = args.cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    envs = make_env(
        args.env_id, args.num_envs, args.seed, device, args.capture_video, run_name, args.record_video_step_frequency
    )
    obs_space = envs.single_observation_space
    action_space = envs.single_action_space

    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
        )
    writer = SummaryWriter(f"runs/{run_name}")
    table = "\n".join(f"|{name}|{value}|" for name, value in vars(args).items())
    writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # What one rollout collects, step by step and environment by environment.
    steps_by_envs = (args.num_steps, args.num_envs)
    rollout_obs = torch.zeros(steps_by_envs + obs_space.shape).to(device)
    rollout_actions = torch.zeros(steps_by_envs + action_space.shape).to(device)
    rollout_logprobs = torch.zeros(steps_by_envs).to(device)
    rollout_rewards = torch.zeros(steps_by_envs).to(device)
    rollout_dones = torch.zeros(steps_by_envs).to(device)
    rollout_values = torch.zeros(steps_by_envs).to(device)
    # each step's episode statistics, read once the rollout is over
    rollout_episode_returns = torch.zeros(steps_by_envs).to(device)
    rollout_episode_lengths = torch.zeros(steps_by_envs, dtype=torch.int32).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    # `obs` is what the agent acts on next; `done` says whether it opens a new episode
    obs = envs.reset()  # the task was seeded when it was made
    done = torch.zeros(args.num_envs).to(device)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)

    for iteration in range(first_iteration, args.num_iterations + 1):
        if args.anneal_lr:  # from --learning-rate at the first iteration down towards 0 at the last
            remaining = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = remaining * args.learning_rate

        # Rollout: the current policy plays num_steps steps in every environment.
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            rollout_obs[step] = obs
            rollout_dones[step] = done

            with torch.no_grad():  # acting needs no gradients
                action, logprob, _, value = agent.get_action_and_value(obs)
                rollout_values[step] = value.flatten()
            rollout_actions[step] = action
            rollout_logprobs[step] = logprob

            # tensors on the device both ways; the task's reward and done are its own buffers, which its next step
            # overwrites: copied here (a time limit ends an episode as a termination does)
            obs, reward, done, infos = envs.step(action)
            rollout_rewards[step] = reward * args.reward_scaler
            done = done.float()
            rollout_episode_returns[step] = infos["r"]
            rollout_episode_lengths[step] = infos["l"]

        # the episodes that ended in the rollout, read from the device at once
        episodes = finished_episodes_of_rollout(
            rollout_dones, done, rollout_episode_returns, rollout_episode_lengths, global_step
        )
        for ended_at, episodic_return, episodic_length in episodes:
            writer.add_scalar("charts/episodic_return", episodic_return, ended_at)
            writer.add_scalar("charts/episodic_length", episodic_length, ended_at)
            recent_returns.append(episodic_return)

        # Generalized advantage estimation, from the last step back to the first. Each step's TD error compares
        # the reward plus the discounted value of the next observation with the value of this one; the advantage
        # sums those errors discounted by gamma x lambda, and an episode's end cuts the sum and the next value.
        with torch.no_grad():
            next_value = agent.get_value(obs).reshape(1, -1)
            advantages = torch.zeros_like(rollout_rewards).to(device)
            gae = 0  # the advantage of the step after t
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    not_done = 1.0 - done
                    value_after = next_value
                else:
                    not_done = 1.0 - rollout_dones[t + 1]
                    value_after = rollout_values[t + 1]
                td_error = rollout_rewards[t] + args.gamma * value_after * not_done - rollout_values[t]
                gae = td_error + args.gamma * args.gae_lambda * not_done * gae
                advantages[t] = gae
            # what the critic should have said: the value it gave plus how much better things went
            returns = advantages + rollout_values

        # The rollout as one batch of num_steps x num_envs transitions.
        batch_obs = rollout_obs.reshape((-1,) + obs_space.shape)
        batch_logprobs = rollout_logprobs.reshape(-1)
        batch_actions = rollout_actions.reshape((-1,) + action_space.shape)
        batch_advantages = advantages.reshape(-1)
        batch_returns = returns.reshape(-1)
        batch_values = rollout_values.reshape(-1)

        # Update: update_epochs passes over the batch, each in shuffled minibatches, one gradient step per minibatch.
        clip_fractions = []
        for epoch in range(args.update_epochs):
            order = torch.randperm(args.batch_size, device=device)
            for start in range(0, args.batch_size, args.minibatch_size):
                stop = start + args.minibatch_size
                minibatch = order[start:stop]

                # the policy as it is now, on the actions the rollout took
                _, new_logprob, entropy, new_value = agent.get_action_and_value(
                    batch_obs[minibatch], batch_actions[minibatch]
                )
                log_ratio = new_logprob - batch_logprobs[minibatch]
                ratio = log_ratio.exp()  # new probability / probability when acting

                with torch.no_grad():
                    # two estimates of the KL divergence from the acting policy (http://joschu.net/blog/kl-approx.html)
                    old_approx_kl = (-log_ratio).mean()
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clipped = (ratio - 1.0).abs() > args.clip_coef
                    clip_fractions.append(clipped.float().mean().item())

                adv = batch_advantages[minibatch]
                if args.norm_adv:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)

                # Clipped surrogate objective, negated into a loss: the pessimistic one of the plain and the
                # clipped ratio times the advantage, so that no step gains by pushing the ratio past 1 +- clip_coef.
                surrogate = -adv * ratio
                clipped_surrogate = -adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                policy_loss = torch.max(surrogate, clipped_surrogate).mean()

                # Value loss: squared error to the returns, with the change from the rollout's value clipped alike.
                new_value = new_value.view(-1)
                target = batch_returns[minibatch]
                if args.clip_vloss:
                    old_value = batch_values[minibatch]
                    error = (new_value - target) ** 2
                    value_clipped = old_value + torch.clamp(new_value - old_value, -args.clip_coef, args.clip_coef)
                    error_clipped = (value_clipped - target) ** 2
                    worse = torch.max(error, error_clipped)
                    value_loss = 0.5 * worse.mean()
                else:
                    value_loss = 0.5 * ((new_value - target) ** 2).mean()

                entropy_bonus = entropy.mean()
                loss = policy_loss - args.ent_coef * entropy_bonus + value_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        # how much of the returns' variance the critic's values explained before the update (1: all of it)
        predicted = batch_values.cpu().numpy()
        actual = batch_returns.cpu().numpy()
        actual_variance = np.var(actual)
        explained_var = np.nan if actual_variance == 0 else 1 - np.var(actual - predicted) / actual_variance

        # The iteration's figures, from its last minibatch (the KL, the losses) or from all of them (clip fraction).
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", value_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", policy_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_bonus.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clip_fractions), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
        if args.checkpoint_every or args.resume:  # every --checkpoint-every iterations, the last one, and on a signal
            checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, obs, done)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save(agent.state_dict(), model_path)
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(
            model_path, args.env_id, 10, f"{run_name}-eval", device, args.capture_video, args.seed
        )
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__)

    if args.checkpoint_every or args.resume:  # finished once the model is saved, evaluated and uploaded
        checkpoint.finish()

    envs.close()
    writer.close()
