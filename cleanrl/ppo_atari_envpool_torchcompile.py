# ppo_atari_envpool.py, compiled by torch.compile; explained in docs/ppo.md#ppo_atari_envpool_torchcompilepy
# Follows CleanRL's ppo_atari_envpool.py (MIT licence, (c) 2019 CleanRL developers)
# and the design of LeanRL's _torchcompile scripts (MIT licence, (c) 2024 LeanRL developers); see CREDITS.md
import logging
import os
import random
import shutil
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

try:
    import envpool
except ModuleNotFoundError as e:
    missing = f"{e.name} is missing; run `bash scripts/setup.sh envpool` in a clone of this project"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
    sys.exit(2)


@dataclass
class Args:
    exp_name: str = Path(__file__).stem
    """name of the experiment, part of the run's folder name (the script's file name by default)"""
    seed: int = 1
    """seed for Python, NumPy, torch and the environments (environment i gets seed + i)"""
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
    """record videos of environment 0's episodes into videos/"""
    save_model: bool = False
    """save the trained weights into runs/{run_name}/, then play 10 evaluation episodes with them"""
    compile: bool = True
    """compile the acting step, GAE and the whole minibatch update with torch.compile (--no-compile: run eagerly)"""
    cudagraphs: bool = False
    """on a GPU, also replay the compiled steps as CUDA graphs, which saves launching each small kernel"""
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
    env_id: str = "Breakout-v5"
    """EnvPool id of the Atari game to learn"""
    total_timesteps: int = 10000000
    """environment steps to train for, summed over all environments"""
    learning_rate: float = 2.5e-4
    """Adam's step size (where it starts, with --anneal-lr)"""
    num_envs: int = 8
    """environments stepped side by side, each collecting its share of every rollout"""
    num_steps: int = 128
    """steps each environment takes per rollout; a rollout is num_envs x num_steps transitions"""
    anneal_lr: bool = True
    """decrease the learning rate linearly to zero over the run"""
    gamma: float = 0.99
    """discount: how much a reward one step later is worth"""
    gae_lambda: float = 0.95
    """GAE's lambda: 0 trusts the value function's one-step estimate, 1 the whole sum of rewards"""
    num_minibatches: int = 4
    """parts each rollout is split into for the gradient steps of one epoch"""
    update_epochs: int = 4
    """passes over each rollout during its update"""
    norm_adv: bool = True
    """rescale each minibatch's advantages to mean 0 and standard deviation 1"""
    clip_coef: float = 0.1
    """how far the probability ratio may move from 1 before the objective stops rewarding it"""
    clip_vloss: bool = True
    """clip the value function's change too, as the PPO paper's code does"""
    ent_coef: float = 0.01
    """weight of the entropy bonus, which keeps the policy exploring"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.5
    """largest gradient norm allowed; larger gradients are scaled down to it"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL divergence passes this (None: never)"""
    exclude_reset_steps: bool = False
    """leave EnvPool's reset steps out of the update (their action is ignored and their reward is 0)"""

    # computed from the flags above once they are parsed
    batch_size: tyro.conf.Suppress[int] = 0
    """transitions per rollout: num_envs x num_steps"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """transitions per gradient step: batch_size / num_minibatches"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """rollouts in the run, each followed by an update: total_timesteps / batch_size"""


class RecordEpisodeStatistics(gym.vector.VectorWrapper):
    """Whole games, though an episode ends at every lost life and rewards are clipped: a game sums EnvPool's unclipped
    info["reward"] until info["terminated"] (its last life) or the time limit, and lasts as many steps as were taken
    since the previous game ended, EnvPool's reset steps included."""

    def reset(self, **kwargs):
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        return super().reset(**kwargs)

    def step(self, actions):
        obs, rewards, terminations, truncations, infos = super().step(actions)
        self.episode_returns += infos["reward"]
        self.episode_lengths += 1
        # a time limit ends the game's statistics too (the reference's would run on into the next game's)
        ended = np.logical_or(infos["terminated"], truncations)
        infos["episode"] = {"r": self.episode_returns.copy(), "l": self.episode_lengths.copy()}
        infos["_episode"] = ended
        self.episode_returns[ended] = 0
        self.episode_lengths[ended] = 0
        return obs, rewards, terminations, truncations, infos


class RecordVideo(gym.vector.VectorWrapper):
    """Videos of environment 0's whole games, on Gymnasium's RecordVideo schedule (games 0, 1, 8, 27, ...), 15 fps."""

    def __init__(self, envs, video_folder):
        super().__init__(envs)
        self.video_folder = video_folder
        self.game = 0
        self.frames = []

    def step(self, actions):
        obs, rewards, terminations, truncations, infos = super().step(actions)
        if capped_cubic_video_schedule(self.game):
            self.frames.append(self.env.render()[0])
        if infos["terminated"][0] or truncations[0]:
            save_video(self.frames, self.video_folder, episode_index=self.game, fps=15)
            self.game += 1
            self.frames = []
        return obs, rewards, terminations, truncations, infos


def make_env(env_id, num_envs, seed, capture_video, run_name):
    """The vector of `num_envs` games: EnvPool makes them all, with the usual Atari preprocessing done in C++ (up to 30
    idle frames at the start, an action lasts 4 frames and the last two are maxed, FIRE to start, 84 x 84 grey, the
    last 4 frames stacked)."""
    envs = envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        episodic_life=True,  # a lost life ends the agent's episode (the game goes on)
        reward_clip=True,  # learn from the reward's sign, the same scale in every game
        seed=seed,  # environment i gets seed + i
        render_mode="rgb_array" if capture_video else None,
    )
    envs = RecordEpisodeStatistics(envs)  # puts each game's return and length in `info`
    if capture_video:
        envs = RecordVideo(envs, f"videos/{run_name}")
    return envs


def finished_episodes(infos):
    """[(return, length)] of the games that ended in this step (set by RecordEpisodeStatistics)."""
    ended = np.flatnonzero(infos["_episode"])
    return list(zip(infos["episode"]["r"][ended].tolist(), infos["episode"]["l"][ended].tolist()))


def layer_init(layer, std=np.sqrt(2), bias=0.0):
    """Orthogonal weights scaled by `std`, constant biases: PPO's usual start, which matters for how it learns."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """One convolutional network reads the 4 stacked frames (the Nature DQN's layers); the actor and the critic are
    two linear heads on its 512 features."""

    def __init__(self, envs):
        super().__init__()
        features = 512
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, kernel_size=8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, kernel_size=4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, kernel_size=3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, features)),  # 64 maps of 7 x 7 pixels
            nn.ReLU(),
        )
        # a small last layer: every action starts about equally likely
        self.actor = layer_init(nn.Linear(features, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(features, 1), std=1)

    def get_value(self, obs):
        return self.critic(self.network(obs / 255.0))

    def get_action_and_value(self, obs, action=None):
        """Samples an action (or takes the one given, to score it again) and returns it with its log-probability,
        the policy's entropy and the critic's value."""
        hidden = self.network(obs / 255.0)  # pixels scaled to [0, 1]
        logits = self.actor(hidden)
        policy = Categorical(logits=logits)
        if action is None:
            action = policy.sample()
        return action, policy.log_prob(action), policy.entropy(), self.critic(hidden)


def estimate_advantages(next_value, done, rollout_rewards, rollout_dones, rollout_values):
    """GAE as the parent script computes it, in a function that torch.compile can turn into a few fused kernels."""
    advantages = torch.zeros_like(rollout_rewards)
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
    return advantages, returns


def update(agent, optimizer, obs, actions, logprobs, advantages, returns, values):
    """The parent script's gradient step on one minibatch, in a function of its own for torch.compile to compile: the
    losses, their backward pass, the gradient clipping and Adam's step. Returns the figures the script logs."""
    # the policy as it is now, on the actions the rollout took
    _, new_logprob, entropy, new_value = agent.get_action_and_value(obs, actions)
    log_ratio = new_logprob - logprobs
    ratio = log_ratio.exp()  # new probability / probability when acting

    with torch.no_grad():
        # two estimates of the KL divergence from the acting policy (http://joschu.net/blog/kl-approx.html)
        old_approx_kl = (-log_ratio).mean()
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipped = (ratio - 1.0).abs() > args.clip_coef
        clip_fraction = clipped.float().mean()

    adv = advantages
    if args.norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)

    # Clipped surrogate objective, negated into a loss: the pessimistic one of the plain and the
    # clipped ratio times the advantage, so that no step gains by pushing the ratio past 1 +- clip_coef.
    surrogate = -adv * ratio
    clipped_surrogate = -adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    policy_loss = torch.max(surrogate, clipped_surrogate).mean()

    # Value loss: squared error to the returns, with the change from the rollout's value clipped alike.
    new_value = new_value.view(-1)
    target = returns
    if args.clip_vloss:
        old_value = values
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
    return policy_loss.detach(), value_loss.detach(), entropy_bonus.detach(), old_approx_kl, approx_kl, clip_fraction


class Compiled:
    """`fn` compiled by torch.compile, on CUDA graphs with --cudagraphs. torch.compile compiles a function when it is
    first called: the wall time of each first call is added up in Compiled.seconds, the run's compile time."""

    seconds = 0.0

    def __init__(self, fn, cudagraphs):
        self.fn = torch.compile(fn, mode="reduce-overhead" if cudagraphs else None)
        self.cudagraphs = cudagraphs
        self.called = False

    def __call__(self, *inputs):
        if self.cudagraphs:  # what the graphs returned before is copied or read by now: their memory may be reused
            torch.compiler.cudagraph_mark_step_begin()
        if self.called:
            return self.fn(*inputs)
        start = time.time()
        # Slurm sends its stop signal to every process of the run, the C++ compiler's too, which it would kill. The
        # processes that compiling starts inherit the signals held here, so they finish; the run then stops after
        # its iteration as at any other time.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGUSR1, signal.SIGTERM))
        outputs = self.fn(*inputs)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        Compiled.seconds += time.time() - start
        self.called = True
        return outputs


def fail(message):
    """One line on stderr and exit status 2: how every error a user can cause ends, before any training."""
    print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_args(args):
    """What is wrong with the arguments, or None: each of these would crash late or train silently wrong."""
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "learning_rate")
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
    if args.cudagraphs and not args.compile:
        return "--cudagraphs replays what torch.compile compiled: leave out --no-compile"
    if args.cudagraphs and not (args.cuda and torch.cuda.is_available()):
        return "--cudagraphs needs a CUDA GPU (and --cuda): leave it out on this machine"
    compiler = os.environ.get("CXX", "g++")
    if args.compile and not (args.cuda and torch.cuda.is_available()) and not shutil.which(compiler):
        missing = f"torch.compile needs a C++ compiler for CPU kernels, and {compiler} is not found"
        return f"{missing}: install one (or set CXX) or add --no-compile"
    if args.resume_changed_code and not args.resume:
        return "--resume-changed-code goes with --resume: give the run folder to go on with"


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video, seed):
    """Plays `eval_episodes` episodes with a saved model; returns their returns."""
    envs = make_env(env_id, 1, seed, capture_video, run_name)
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    obs, _ = envs.reset()
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.Tensor(obs).to(device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        for episodic_return, _ in finished_episodes(infos):
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

    # The environments, stepped side by side in EnvPool's threads. Its autoreset comes a step late: the step after
    # an episode ends is a reset step, which ignores its action, pays nothing and returns the next episode's start.
    if envpool.registration.registry.specs.get(args.env_id, [None])[0] != "envpool.atari":
        fail(f"{args.env_id} has no EnvPool Atari game; this script needs one: use ppo_atari.py instead")
    envs = make_env(args.env_id, args.num_envs, args.seed, args.capture_video, run_name)
    obs_space = envs.single_observation_space
    action_space = envs.single_action_space
    if not isinstance(obs_space, gym.spaces.Box) or not isinstance(action_space, gym.spaces.Discrete):
        has = f"{action_space} actions and {obs_space} observations"
        needs = "Discrete actions and Box observations"
        fail(f"{args.env_id} has {has}; this script needs {needs}: use ppo_continuous_action.py instead")

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

    # One seed for every random number: Python's, NumPy's (minibatch order) and torch's (weights, sampled actions).
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    use_cuda = args.cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

    agent = Agent(envs).to(device)
    # the learning rate as a tensor, changed in place: a compiled Adam step then reads it instead of being
    # compiled anew for every value that --anneal-lr gives it
    optimizer = optim.Adam(agent.parameters(), lr=torch.tensor(args.learning_rate, device=device), eps=1e-5)
    torch._logging.set_logs(dynamo=logging.ERROR)  # torch.compile's notes on what it leaves out: not for the user
    policy_step = agent.get_action_and_value
    if args.compile:  # compiled on their first calls, in the first iteration
        policy_step = Compiled(agent.get_action_and_value, args.cudagraphs)
        estimate_advantages = Compiled(estimate_advantages, False)
        update = Compiled(update, args.cudagraphs)

    # What one rollout collects, step by step and environment by environment.
    steps_by_envs = (args.num_steps, args.num_envs)
    rollout_obs = torch.zeros(steps_by_envs + obs_space.shape).to(device)
    rollout_actions = torch.zeros(steps_by_envs + action_space.shape).to(device)
    rollout_logprobs = torch.zeros(steps_by_envs).to(device)
    rollout_rewards = torch.zeros(steps_by_envs).to(device)
    rollout_dones = torch.zeros(steps_by_envs).to(device)
    rollout_values = torch.zeros(steps_by_envs).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    # `obs` is what the agent acts on next; `done` says whether it opens a new episode
    obs, _ = envs.reset()  # EnvPool seeded the games when it made them
    obs = torch.Tensor(obs).to(device)
    done = torch.zeros(args.num_envs).to(device)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)

    for iteration in range(first_iteration, args.num_iterations + 1):
        if args.anneal_lr:  # from --learning-rate at the first iteration down towards 0 at the last
            remaining = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"].fill_(remaining * args.learning_rate)

        # Rollout: the current policy plays num_steps steps in every environment.
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            rollout_obs[step] = obs
            rollout_dones[step] = done

            with torch.no_grad():  # acting needs no gradients
                action, logprob, _, value = policy_step(obs)
                rollout_values[step] = value.flatten()
            rollout_actions[step] = action
            rollout_logprobs[step] = logprob

            obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            # a time limit ends an episode as a termination does
            done = np.logical_or(terminations, truncations)
            rollout_rewards[step] = torch.tensor(reward).to(device).view(-1)
            obs = torch.Tensor(obs).to(device)
            done = torch.Tensor(done).to(device)

            for episodic_return, episodic_length in finished_episodes(infos):
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                recent_returns.append(episodic_return)

        # Generalized advantage estimation, from the last step back to the first. Each step's TD error compares
        # the reward plus the discounted value of the next observation with the value of this one; the advantage
        # sums those errors discounted by gamma x lambda, and an episode's end cuts the sum and the next value.
        with torch.no_grad():
            next_value = agent.get_value(obs).reshape(1, -1)
            advantages, returns = estimate_advantages(next_value, done, rollout_rewards, rollout_dones, rollout_values)

        # The rollout as one batch of num_steps x num_envs transitions.
        batch_obs = rollout_obs.reshape((-1,) + obs_space.shape)
        batch_logprobs = rollout_logprobs.reshape(-1)
        batch_actions = rollout_actions.reshape((-1,) + action_space.shape)
        batch_advantages = advantages.reshape(-1)
        batch_returns = returns.reshape(-1)
        batch_values = rollout_values.reshape(-1)

        # Update: update_epochs passes over the batch, each in shuffled minibatches, one gradient step per minibatch.
        order = np.arange(args.batch_size)
        if args.exclude_reset_steps:  # a reset step's action had no effect: it teaches the policy nothing
            order = np.flatnonzero(rollout_dones.reshape(-1).cpu().numpy() == 0)
        clip_fractions = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(order)
            for start in range(0, args.batch_size, args.minibatch_size):
                stop = start + args.minibatch_size
                minibatch = order[start:stop]
                if args.exclude_reset_steps:  # fewer transitions than a batch: as many minibatches, of even sizes
                    minibatch = np.array_split(order, args.num_minibatches)[start // args.minibatch_size]

                figures_of_step = update(
                    agent,
                    optimizer,
                    batch_obs[minibatch],
                    batch_actions.long()[minibatch],
                    batch_logprobs[minibatch],
                    batch_advantages[minibatch],
                    batch_returns[minibatch],
                    batch_values[minibatch],
                )
                policy_loss, value_loss, entropy_bonus, old_approx_kl, approx_kl, clip_fraction = figures_of_step
                clip_fractions.append(clip_fraction.item())

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        # how much of the returns' variance the critic's values explained before the update (1: all of it)
        predicted = batch_values.cpu().numpy()
        actual = batch_returns.cpu().numpy()
        if args.exclude_reset_steps:  # over the transitions the update learned from
            predicted = predicted[np.sort(order)]
            actual = actual[np.sort(order)]
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
        writer.add_scalar("charts/compile_seconds", Compiled.seconds, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            speed = f"SPS {sps} (compiled in {Compiled.seconds:.0f}s)"
            print(f"{progress} | {speed} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
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
