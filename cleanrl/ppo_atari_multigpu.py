# docs and experiment results can be found at https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_atari_multigpupy
import contextlib
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

try:
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):  # a legacy gym's notice on import
        import ale_py
        import cv2
        from stable_baselines3.common import atari_wrappers
except ModuleNotFoundError as e:
    missing = f"{e.name} is missing; run `bash scripts/setup.sh atari` in a clone of this project"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
    sys.exit(2)
gym.register_envs(ale_py)  # the Atari ids, with the game ROMs inside the package


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be enabled by default"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the model into the `runs/{run_name}` folder, then evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to upload the saved model to huggingface (needs --save-model)"""
    hf_entity: str = ""
    """the user or org name of the model repository from the Hugging Face Hub (empty: your own account)"""
    checkpoint_every: int = 0
    """write a checkpoint into the run folder every N iterations (0: never)"""
    resume: str | None = None
    """a run folder (or its checkpoint) to go on with, in that folder and with the same flags"""

    # Algorithm specific arguments
    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    local_num_envs: int = 8
    """the number of parallel game environments in each process"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""
    device_ids: list[int] = field(default_factory=list)
    """the GPU of each process, in rank order (ids may repeat: processes share a GPU); empty: process r uses GPU r"""
    backend: Literal["gloo", "nccl", "mpi"] = "gloo"
    """the torch.distributed backend: gloo (CPUs or GPUs), nccl (GPUs only) or mpi (a PyTorch built with MPI)"""
    distinct_env_seeds: bool = False
    """if toggled, environment i of process r gets seed + r x local_num_envs + i, a seed of its own; off: seed + r + i,
    the reference's, where neighbouring processes share all but one seed"""

    # to be filled in runtime
    world_size: tyro.conf.Suppress[int] = 0
    """the number of processes (computed in runtime)"""
    num_envs: tyro.conf.Suppress[int] = 0
    """the number of parallel game environments of all processes (computed in runtime)"""
    local_batch_size: tyro.conf.Suppress[int] = 0
    """the batch size of one process (computed in runtime)"""
    local_minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size of one process (computed in runtime)"""
    batch_size: tyro.conf.Suppress[int] = 0
    """the batch size (computed in runtime)"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """the number of iterations (computed in runtime)"""


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", frameskip=1)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, frameskip=1)  # MaxAndSkipEnv repeats each action 4 frames (v5 ids: not 16)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = atari_wrappers.NoopResetEnv(env, noop_max=30)
        env = atari_wrappers.MaxAndSkipEnv(env, skip=4)
        env = atari_wrappers.EpisodicLifeEnv(env)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = atari_wrappers.FireResetEnv(env)
        env = atari_wrappers.ClipRewardEnv(env)
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        # cv2's grey (0.299 R + 0.587 G + 0.114 B, rounded) as in Gymnasium 0.x, not 1.x's GrayscaleObservation
        grey = gym.spaces.Box(0, 255, (84, 84), np.uint8)
        env = gym.wrappers.TransformObservation(env, lambda obs: cv2.cvtColor(obs, cv2.COLOR_RGB2GRAY), grey)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


def finished_episodes(infos):
    """[(return, length)] of the episodes that ended in this step (same-step autoreset: under "final_info")."""
    final_info = infos.get("final_info", {})
    if "episode" not in final_info:
        return []
    ended = np.flatnonzero(final_info["_episode"])
    return list(zip(final_info["episode"]["r"][ended].tolist(), final_info["episode"]["l"][ended].tolist()))


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def fail(message):
    """One line on stderr and exit status 2: how every error a user can cause ends, before any training.
    Every process finds the same error; rank 0 alone reports it."""
    if int(os.getenv("RANK", "0")) == 0:
        print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_args(args):
    """What is wrong with the arguments, or None: each of these would crash late or train silently wrong."""
    sizes = ("total_timesteps", "local_num_envs", "num_steps", "num_minibatches", "update_epochs", "learning_rate")
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
    local_batch_size = args.local_num_envs * args.num_steps  # each process splits its own batch into minibatches
    if local_batch_size % args.num_minibatches:
        return (
            f"--num-minibatches {args.num_minibatches} must divide --local-num-envs x --num-steps = {local_batch_size}"
        )
    batch_size = local_batch_size * args.world_size
    if batch_size > args.total_timesteps:
        processes = f"{args.world_size} processes x --local-num-envs x --num-steps = {batch_size}"
        return f"{processes} must be at most --total-timesteps {args.total_timesteps}"
    gpus = range(torch.cuda.device_count() if args.cuda and torch.cuda.is_available() else 0)
    if args.device_ids and (len(args.device_ids) != args.world_size or any(i not in gpus for i in args.device_ids)):
        return f"--device-ids must give each of the {args.world_size} processes one of this run's {len(gpus)} GPUs"
    if (args.backend == "nccl" and not gpus) or (args.backend == "mpi" and not dist.is_mpi_available()):
        return f"--backend {args.backend} is not available here (nccl needs GPUs, mpi an MPI build); use gloo"
    if args.upload_model and not args.save_model:
        return "--upload-model uploads the saved model: add --save-model"


def gather_episodes(episodes, world_size):
    """The finished episodes of all processes, [(global_step, return, length)] in step order, for rank 0 to log."""
    if world_size == 1:
        return episodes
    everyone = [None] * world_size
    dist.all_gather_object(everyone, episodes)
    return sorted(episode for episodes in everyone for episode in episodes)


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video, seed):
    """Plays `eval_episodes` episodes with a saved model; returns their returns."""
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    obs, _ = envs.reset(seed=seed)
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
    # torchrun tells each process its place: RANK among all, LOCAL_RANK on this machine; plain python is a world of one
    rank = int(os.getenv("RANK", "0"))
    local_rank = int(os.getenv("LOCAL_RANK", "0"))
    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
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
    args.num_envs = int(args.local_num_envs * args.world_size)
    args.local_batch_size = int(args.local_num_envs * args.num_steps)
    args.local_minibatch_size = int(args.local_batch_size // args.num_minibatches)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.checkpoint_every or args.resume:  # with --resume: the run it goes on with, its checkpoint checked
        run_name = checkpoint.begin(args, __file__, run_name)

    # env setup; same-step autoreset: an ending step returns the next episode's first observation, as in Gymnasium 0.x
    try:
        if gym.spec(args.env_id).entry_point not in ("ale_py.env:AtariEnv", ale_py.AtariEnv):
            fail(f"{args.env_id} has no ale-py Atari game; this script needs one: use ppo.py instead")
        envs = gym.vector.SyncVectorEnv(
            [make_env(args.env_id, i, args.capture_video and rank == 0, run_name) for i in range(args.local_num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make environment '{args.env_id}': {e}")
    obs_space = envs.single_observation_space
    action_space = envs.single_action_space
    if not isinstance(obs_space, gym.spaces.Box) or not isinstance(action_space, gym.spaces.Discrete):
        has = f"{action_space} actions and {obs_space} observations"
        needs = "Discrete actions and Box observations"
        fail(f"{args.env_id} has {has}; this script needs {needs}: use ppo_continuous_action.py instead")

    writer = None
    if args.track and rank == 0:  # only rank 0 writes: Weights & Biases, TensorBoard, videos and the saved model
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
        )
    if rank == 0:
        writer = SummaryWriter(f"runs/{run_name}")
        writer.add_text(
            "hyperparameters",
            "|param|value|\n|-|-|\n%s" % ("\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])),
        )

    # TRY NOT TO MODIFY: seeding (the same seed in every process first, so that all build the same initial weights)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cuda":  # process r takes GPU device_ids[r], or GPU r (shared round-robin if there are fewer)
        device = torch.device(
            "cuda", args.device_ids[local_rank] if args.device_ids else local_rank % torch.cuda.device_count()
        )
        torch.cuda.set_device(device)
    if args.world_size > 1:
        dist.init_process_group(args.backend)

    agent = Agent(envs).to(device)
    # then a seed of its own in every process, for its actions and its minibatches
    random.seed(args.seed + rank)
    np.random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.local_num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.local_num_envs) + envs.single_action_space.shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.local_num_envs)).to(device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    if args.distinct_env_seeds:
        env_seed = args.seed + rank * args.local_num_envs  # env i of rank r: seed + r x local + i
    else:
        env_seed = args.seed + rank  # env i of rank r: seed + r + i, as in the reference
    next_obs, _ = envs.reset(seed=env_seed)
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.local_num_envs).to(device)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, next_obs, next_done = checkpoint.restore(envs, agent, optimizer)

    for iteration in range(first_iteration, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        episodes = []  # (global_step, return, length) of the episodes this process finished
        for step in range(0, args.num_steps):
            global_step += args.num_envs  # the steps of all processes, which step in lockstep
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(next_done).to(device)

            episodes += [(global_step, *episode) for episode in finished_episodes(infos)]

        for episode_step, episodic_return, episodic_length in gather_episodes(episodes, args.world_size):
            if rank == 0:  # every process's episodes, logged once
                writer.add_scalar("charts/episodic_return", episodic_return, episode_step)
                writer.add_scalar("charts/episodic_length", episodic_length, episode_step)
                recent_returns.append(episodic_return)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(args.local_batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.local_batch_size, args.local_minibatch_size):
                end = start + args.local_minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                    v_loss = 0.5 * v_loss_max.mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()

                if args.world_size > 1:
                    # batch allreduce ops: see https://github.com/entity-neural-network/incubator/pull/220
                    all_grads_list = []
                    for param in agent.parameters():
                        if param.grad is not None:
                            all_grads_list.append(param.grad.view(-1))
                    all_grads = torch.cat(all_grads_list)
                    dist.all_reduce(all_grads, op=dist.ReduceOp.SUM)
                    offset = 0
                    for param in agent.parameters():
                        if param.grad is not None:
                            param.grad.data.copy_(
                                all_grads[offset : offset + param.numel()].view_as(param.grad.data) / args.world_size
                            )
                            offset += param.numel()

                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and args.world_size > 1:  # the processes stop together, on their mean KL
                dist.all_reduce(approx_kl, op=dist.ReduceOp.SUM)
                approx_kl /= args.world_size
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        if rank != 0:  # the other processes log nothing; their checkpoint goes with rank 0's, of the same iteration
            if args.checkpoint_every or args.resume:
                checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done)
            continue

        # TRY NOT TO MODIFY: record rewards for plotting purposes (rank 0's losses, all processes' steps)
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
        if args.checkpoint_every or args.resume:  # every --checkpoint-every iterations, the last one, and on a signal
            checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done)

    if args.save_model and rank == 0:
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

    envs.close()
    if rank == 0:
        writer.close()
    if args.world_size > 1:
        dist.destroy_process_group()
