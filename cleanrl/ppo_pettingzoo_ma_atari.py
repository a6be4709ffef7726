# Self-play PPO, one network for all players of PettingZoo's Atari; explained in docs/ppo.md#ppo_pettingzoo_ma_ataripy
# Follows CleanRL's ppo_pettingzoo_ma_atari.py (MIT licence, (c) 2019 CleanRL developers); see CREDITS.md
import os
import random
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
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

try:
    import ale_py.roms
    import pettingzoo.atari.base_atari_env  # PettingZoo's Atari games, on multi-agent-ale-py's emulator
    import supersuit as ss
except ModuleNotFoundError as e:
    missing = f"{e.name} is missing; run `bash scripts/setup.sh pettingzoo` in a clone of this project"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
    sys.exit(2)
ROM_DIR = os.path.dirname(ale_py.roms.__file__)  # the game ROMs come from ale-py: multi-agent-ale-py ships none


@dataclass
class Args:
    exp_name: str = Path(__file__).stem
    """name of the experiment, part of the run's folder name (the script's file name by default)"""
    seed: int = 1
    """seed for Python, NumPy, torch and the games (game i gets seed + i, shared by its players)"""
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
    env_id: str = "pong_v3"
    """PettingZoo Atari game to learn, its name without the `atari/` (pong_v3, boxing_v2, warlords_v3, ...)"""
    total_timesteps: int = 20000000
    """environment steps to train for, summed over all environments"""
    learning_rate: float = 2.5e-4
    """Adam's step size (where it starts, with --anneal-lr)"""
    num_envs: int = 16
    """environments stepped side by side, one per player of a game: 16 is eight games of two players"""
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

    # computed from the flags above once they are parsed
    batch_size: tyro.conf.Suppress[int] = 0
    """transitions per rollout: num_envs x num_steps"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """transitions per gradient step: batch_size / num_minibatches"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """rollouts in the run, each followed by an update: total_timesteps / batch_size"""


class SelfPlayVectorEnv(gym.vector.VectorWrapper):  # SuperSuit's players, in the shape Gymnasium's wrappers expect
    def step(self, actions):
        obs, rewards, terminations, truncations, _ = self.env.step(actions)  # SuperSuit's infos: a list
        return obs, rewards, terminations, truncations, {}  # a dict; the list held only the final observations

    def render(self):
        return (self.env.render(),) * self.num_envs  # game 0's screen, the same for all of its players


def make_env(env_id, num_envs, capture_video, run_name):
    env = pettingzoo.make("parallel", f"atari/{env_id}", auto_rom_install_path=ROM_DIR, render_mode="rgb_array")
    env = ss.max_observation_v0(env, 2)  # each pixel the brighter of the last 2 frames
    env = ss.frame_skip_v0(env, 4)  # an action lasts 4 frames
    env = ss.color_reduction_v0(env, mode="B")  # a single channel, the blue one
    env = ss.resize_v1(env, x_size=84, y_size=84)
    env = ss.frame_stack_v1(env, 4)  # the last 4 frames: motion can be seen
    env = ss.agent_indicator_v0(env, type_only=False)  # then one plane per player, which says who is playing
    env = ss.pettingzoo_env_to_vec_env_v1(env)  # every player a sub-environment
    num_envs = env.num_envs if num_envs is None else num_envs  # None: one game
    if num_envs % env.num_envs:
        raise ValueError(f"--num-envs must be a multiple of {env.num_envs}, the players of a game")
    envs = ss.concat_vec_envs_v1(env, num_envs // env.num_envs, num_cpus=0, base_class="gymnasium")
    envs.single_observation_space = envs.observation_space
    envs.single_action_space = envs.action_space
    envs.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "render_fps": 15}  # 60 frames/s, 4 a step
    envs = SelfPlayVectorEnv(envs)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)  # puts each episode's return and length in `infos`
    if capture_video:  # game 0, all of whose players share its screen
        envs = gym.wrappers.vector.RecordVideo(envs, f"videos/{run_name}", record_first_only=True)
    envs.num_players = env.num_envs  # sub-environment i plays player i % num_players of its game
    return envs


def finished_episodes_by_env(infos):
    """[(sub-environment, return, length)] of the episodes that ended in this step, from the vector statistics."""
    ended = np.flatnonzero(infos.get("_episode", ()))
    return [(i, infos["episode"]["r"][i].item(), infos["episode"]["l"][i].item()) for i in ended.tolist()]


def layer_init(layer, std=np.sqrt(2), bias=0.0):
    """Orthogonal weights scaled by `std`, constant biases: PPO's usual start, which matters for how it learns."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """The Nature DQN's convolution layers read the frames and the players' planes; actor and critic: a layer each."""

    def __init__(self, envs):
        super().__init__()
        features = 512
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(envs.single_observation_space.shape[-1], 32, kernel_size=8, stride=4)),
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
        scaled = obs / 255.0  # see get_action_and_value
        return self.critic(self.network(scaled.permute((0, 3, 1, 2))))

    def get_action_and_value(self, obs, action=None):
        """Samples an action (or takes the one given, to score it again) and returns it with its log-probability,
        the policy's entropy and the critic's value."""
        scaled = obs / 255.0  # pixels scaled to [0, 1]; the indicator planes' 255 to 1
        hidden = self.network(scaled.permute((0, 3, 1, 2)))  # SuperSuit's channels come last, torch's first
        logits = self.actor(hidden)
        policy = Categorical(logits=logits)
        if action is None:
            action = policy.sample()
        return action, policy.log_prob(action), policy.entropy(), self.critic(hidden)


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
    if args.resume_changed_code and not args.resume:
        return "--resume-changed-code goes with --resume: give the run folder to go on with"


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video, seed):
    """Plays `eval_episodes` games of a saved model against itself; returns player 0's returns."""
    envs = make_env(env_id, None, capture_video, run_name)  # one game
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    obs, _ = envs.reset(seed=seed)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.Tensor(obs).to(device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        for _, episodic_return, _ in finished_episodes_by_env(infos)[:1]:  # player 0's: a game ends for all at once
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

    try:
        envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name)  # all players, stepped in turn
    except (pettingzoo.env_registry.exceptions.PettingZooRegistryError, ValueError) as e:
        fail(f"cannot make environment '{args.env_id}': {e}")
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

    # One seed for every random number: Python's, NumPy's (minibatch order) and torch's (weights, sampled actions).
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    use_cuda = args.cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

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

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_lengths = deque(maxlen=100)  # self-play's returns cancel out: how long the games last shows progress
    # `obs` is what the agent acts on next; `done` says whether it opens a new episode
    obs, _ = envs.reset(seed=args.seed)
    obs = torch.Tensor(obs).to(device)
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

            obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            # a time limit ends an episode as a termination does
            done = np.logical_or(terminations, truncations)
            reward = np.clip(reward, -1, 1)  # the reward's sign, to learn from; the statistics keep the game's score
            rollout_rewards[step] = torch.tensor(reward).to(device).view(-1)
            obs = torch.Tensor(obs).to(device)
            done = torch.Tensor(done).to(device)

            for index, episodic_return, episodic_length in finished_episodes_by_env(infos):
                for tag in ("", f"-player{index % envs.num_players}"):  # all players' tags, then this player's own
                    writer.add_scalar(f"charts/episodic_return{tag}", episodic_return, global_step)
                    writer.add_scalar(f"charts/episodic_length{tag}", episodic_length, global_step)
                recent_lengths.append(episodic_length)

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
        order = np.arange(args.batch_size)
        clip_fractions = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(order)
            for start in range(0, args.batch_size, args.minibatch_size):
                stop = start + args.minibatch_size
                minibatch = order[start:stop]

                # the policy as it is now, on the actions the rollout took
                _, new_logprob, entropy, new_value = agent.get_action_and_value(
                    batch_obs[minibatch], batch_actions.long()[minibatch]
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
            recent = f"{np.mean(recent_lengths):.1f}" if recent_lengths else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic length {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
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
