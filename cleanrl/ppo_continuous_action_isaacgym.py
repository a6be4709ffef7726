# docs and experiment results can be found at https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_continuous_action_isaacgympy
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

# Isaac Gym refuses to load once torch is loaded, so it is imported before anything that loads torch
try:
    import isaacgym  # noqa: F401
    import isaacgymenvs
except (ImportError, RuntimeError) as e:  # RuntimeError: an Isaac Gym without bindings for this Python
    isaacgymenvs = None
    isaacgym_import_error = e

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.normal import Normal
from torch.utils.tensorboard import SummaryWriter


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
    env_id: str = "Ant"
    """the id of the environment (an IsaacGymEnvs task, such as Ant, Humanoid, Cartpole or ShadowHand)"""
    total_timesteps: int = 30000000
    """total timesteps of the experiments"""
    learning_rate: float = 0.0026
    """the learning rate of the optimizer"""
    num_envs: int = 4096
    """the number of parallel game environments"""
    num_steps: int = 16
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = False
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 2
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = False
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 2.0
    """coefficient of the value function"""
    max_grad_norm: float = 1.0
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""
    reward_scaler: float = 1.0
    """the factor the rewards are multiplied by for training (the logged returns are the task's own)"""
    record_video_step_frequency: int = 1464
    """with --capture-video, a video of 100 steps starts every this many steps of the vector environment"""

    # to be filled in runtime
    batch_size: tyro.conf.Suppress[int] = 0
    """the batch size (computed in runtime)"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """the number of iterations (computed in runtime)"""


class RecordVideo:
    """Records `video_length` steps of the task's viewer every `step_frequency` steps of the vector environment into
    `video_folder`. Isaac Gym renders into a virtual screen when the task is made with virtual_screen_capture=True."""

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
    """The view of an Isaac Gym task the agent uses: the `obs` entry of its observations, the spaces of one environment
    (named as in Gymnasium's vector environments), and in infos["r"] and infos["l"] the return and length so far of
    every environment's episode, in tensors on the task's device (where `dones` is set: the episode it ended)."""

    def __init__(self, env, device):
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.episode_returns = torch.zeros(env.num_envs, dtype=torch.float64, device=device)
        self.episode_lengths = torch.zeros(env.num_envs, dtype=torch.int64, device=device)

    def reset(self):
        return self.env.reset()["obs"]

    def step(self, actions):
        obs, rewards, dones, infos = self.env.step(actions)
        infos["r"] = self.episode_returns + rewards
        infos["l"] = self.episode_lengths + 1
        self.episode_returns = infos["r"] * (1 - dones)
        self.episode_lengths = infos["l"] * (1 - dones)
        return obs["obs"], rewards, dones, infos

    def close(self):
        if hasattr(self.env, "close"):  # IsaacGymEnvs' tasks have no close()
            self.env.close()


def make_env(env_id, num_envs, seed, device, capture_video, run_name, record_video_step_frequency):
    """The Isaac Gym vector environment: one simulation of `num_envs` copies of the task, taking and returning tensors
    on `device`; an episode restarts inside the step after the one that ended it. A viewer opens only for videos."""
    sim_device = "cuda:0" if device.type == "cuda" else "cpu"
    envs = isaacgymenvs.make(
        seed=seed,
        task=env_id,
        num_envs=num_envs,
        sim_device=sim_device,
        rl_device=sim_device,
        graphics_device_id=0 if device.type == "cuda" or capture_video else -1,
        headless=not capture_video,
        multi_gpu=False,
        virtual_screen_capture=capture_video,
        force_render=False,
    )
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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, np.prod(envs.single_action_space.shape)), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, np.prod(envs.single_action_space.shape)))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


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


def evaluate(model_path, envs, next_obs, eval_episodes, device):
    """Plays `eval_episodes` episodes with a saved model; returns their returns. Isaac Gym runs one simulation per
    process, hence these arguments and not an environment id to make: this plays on in the training environments,
    from `next_obs`, and counts the next whole episodes of environments 0, 1, ... (not those under way, nor the first
    to end anywhere, which would favour short ones)."""
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    # the episodes each environment plays for the count: 10 over 4 environments are 3, 3, 2, 2; over 4096, 1 for 10
    wanted = -((torch.arange(envs.num_envs, device=device) - eval_episodes) // envs.num_envs)
    started = torch.zeros(envs.num_envs, dtype=torch.bool, device=device)  # began an episode during evaluation
    obs = next_obs
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(obs)
        obs, _, dones, infos = envs.step(actions)
        ended = dones.bool()
        counted = ended & started & (wanted > 0)  # before `started` takes in this step's ends
        started = started | ended
        wanted -= counted.long()
        for episodic_return in infos["r"][counted].tolist():
            print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
            episodic_returns.append(episodic_return)
    return episodic_returns[:eval_episodes]


if __name__ == "__main__":
    args = tyro.cli(Args)
    if isaacgymenvs is None:
        fail(
            f"cannot import Isaac Gym ({' '.join(str(isaacgym_import_error).split())}). It is not on PyPI: download "
            "Isaac Gym Preview 4 from https://developer.nvidia.com/isaac-gym, `pip install -e python/` in its folder "
            "(Python 3.6 to 3.8), then `pip install -e .` in a clone of https://github.com/isaac-sim/IsaacGymEnvs"
        )
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
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.checkpoint_every or args.resume:  # with --resume: the run it goes on with, its checkpoint checked
        run_name = checkpoint.begin(args, __file__, run_name)

    # TRY NOT TO MODIFY: seeding (before the task is made, as in the reference: its making may draw from torch)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    # env setup; the device comes first: Isaac Gym simulates on it, and its tensors stay there
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    task_configs = Path(isaacgymenvs.__file__).parent / "cfg" / "task"
    tasks = sorted(path.stem for path in task_configs.glob("*.yaml"))
    if args.env_id not in tasks:  # IsaacGymEnvs keeps one configuration file per task
        fail(f"IsaacGymEnvs has no task '{args.env_id}'; its tasks are {', '.join(tasks)}")
    envs = make_env(
        args.env_id, args.num_envs, args.seed, device, args.capture_video, run_name, args.record_video_step_frequency
    )
    if type(envs.single_action_space).__name__ != "Box" or len(envs.single_observation_space.shape) != 1:  # gym spaces
        has = f"{envs.single_action_space} actions and {envs.single_observation_space} observations"
        needs = "Box actions and flat observations"
        fail(f"{args.env_id} has {has}; this script needs {needs}: use a task with both instead")

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
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n%s" % ("\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])),
    )

    torch.distributions.Distribution.set_default_validate_args(False)  # no argument checks in every Normal

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    episode_returns = torch.zeros((args.num_steps, args.num_envs), dtype=torch.float64).to(device)
    episode_lengths = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64).to(device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    next_obs = envs.reset()
    next_done = torch.zeros(args.num_envs).to(device)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, next_obs, next_done = checkpoint.restore(envs, agent, optimizer)

    for iteration in range(first_iteration, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            # (the task's reward and done tensors are its own buffers, which its next step overwrites: copied here)
            next_obs, reward, next_done, infos = envs.step(action)
            rewards[step] = reward * args.reward_scaler
            next_done = next_done.float()
            episode_returns[step] = infos["r"]
            episode_lengths[step] = infos["l"]

        episodes = finished_episodes_of_rollout(dones, next_done, episode_returns, episode_lengths, global_step)
        for ended_at, episodic_return, episodic_length in episodes:
            writer.add_scalar("charts/episodic_return", episodic_return, ended_at)
            writer.add_scalar("charts/episodic_length", episodic_length, ended_at)
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
        clipfracs = []
        for epoch in range(args.update_epochs):
            b_inds = torch.randperm(args.batch_size, device=device)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
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
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # TRY NOT TO MODIFY: record rewards for plotting purposes
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
        if "consecutive_successes" in infos:  # ShadowHand and AllegroHand: goals reached in a row, on average
            writer.add_scalar("charts/consecutive_successes", infos["consecutive_successes"].item(), global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
        if args.checkpoint_every or args.resume:  # every --checkpoint-every iterations, the last one, and on a signal
            checkpoint.save(iteration, global_step, start_time, writer, envs, agent, optimizer, next_obs, next_done)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save(agent.state_dict(), model_path)
        print(f"model saved to {model_path}")

        if args.capture_video:  # evaluation plays on in the training environments: its videos from its first step
            envs.env.close()
            envs.env.video_folder = f"videos/{run_name}-eval"
            envs.env.step_id = 0
        episodic_returns = evaluate(model_path, envs, next_obs, 10, device)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            if args.capture_video:
                envs.env.close()  # writes the evaluation's last video before the upload
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__)

    envs.close()
    writer.close()
