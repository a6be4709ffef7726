# PPO for continuous actions on Isaac Gym (IsaacGymEnvs tasks); docs: docs/ppo.md#ppo_continuous_action_isaacgympy
import os
import random
import shutil
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
    isaacgymenvs, isaacgym_import_error = None, e

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from tensorboard.compat.proto.summary_pb2 import Summary
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


def fail(message: str):
    """Ends the program with one line on stderr and exit status 2: the way every user error is reported."""
    print(f"{os.path.basename(__file__)}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_args(args: Args) -> str | None:
    """Returns what is wrong with the sizes and coefficients, or None when they are usable."""
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"):
        if getattr(args, name) <= 0:
            return f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}"
    if args.learning_rate <= 0:
        return f"--learning-rate must be positive, got {args.learning_rate}"
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must lie in [0, 1], got {getattr(args, name)}"
    if args.clip_coef <= 0:
        return f"--clip-coef must be positive, got {args.clip_coef}"
    if args.reward_scaler <= 0:
        return f"--reward-scaler must be positive, got {args.reward_scaler}"
    if args.record_video_step_frequency <= 0:
        return f"--record-video-step-frequency must be positive, got {args.record_video_step_frequency}"
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        return (
            f"the batch of --num-envs x --num-steps = {batch_size} does not divide into "
            f"--num-minibatches {args.num_minibatches}; choose a divisor of {batch_size}"
        )
    if args.total_timesteps < batch_size:
        return f"--total-timesteps {args.total_timesteps} is less than one batch ({batch_size}); raise it"
    if args.upload_model and not args.save_model:
        return "--upload-model uploads the saved model: add --save-model"
    return None


def task_names():
    """The tasks `isaacgymenvs.make` knows: IsaacGymEnvs keeps one configuration file per task in cfg/task."""
    return sorted(path.stem for path in (Path(isaacgymenvs.__file__).parent / "cfg" / "task").glob("*.yaml"))


def check_spaces(envs, env_id: str) -> str | None:
    """Returns why this script cannot train on these spaces, or None when it can. IsaacGymEnvs builds its spaces
    with the old `gym` package, which this project does not install, so a Box is recognised by its class name."""
    if type(envs.single_action_space).__name__ != "Box" or len(envs.single_action_space.shape) != 1:
        return (
            f"ppo_continuous_action_isaacgym.py needs a flat Box action space, but {env_id} has "
            f"{envs.single_action_space}"
        )
    if type(envs.single_observation_space).__name__ != "Box" or len(envs.single_observation_space.shape) != 1:
        return (
            f"ppo_continuous_action_isaacgym.py needs a flat Box observation space, but {env_id} has "
            f"{envs.single_observation_space}"
        )
    return None


class RecordVideo:
    """Records 100 steps of the task's viewer every `step_frequency` steps of the vector environment, into
    `video_folder`. Isaac Gym renders into a virtual screen when the task is made with virtual_screen_capture=True."""

    def __init__(self, env, video_folder, step_frequency, video_length=100):
        self.env, self.video_folder = env, video_folder
        self.step_frequency, self.video_length = step_frequency, video_length
        self.num_envs, self.observation_space, self.action_space = env.num_envs, env.observation_space, env.action_space
        self.fps = getattr(env, "metadata", {}).get("video.frames_per_second", 30)
        self.step_id, self.video_start, self.frames = 0, 0, []

    def reset(self):
        return self.env.reset()

    def step(self, actions):
        result = self.env.step(actions)
        if self.frames or self.step_id % self.step_frequency == 0:
            if not self.frames:
                self.video_start = self.step_id
            self.frames.append(self.env.render(mode="rgb_array"))
            if len(self.frames) == self.video_length:
                self.write()
        self.step_id += 1
        return result

    def write(self):
        from moviepy import ImageSequenceClip

        os.makedirs(self.video_folder, exist_ok=True)
        path = f"{self.video_folder}/rl-video-step-{self.video_start}.mp4"
        ImageSequenceClip(self.frames, fps=self.fps).write_videofile(path, logger=None)
        self.frames = []

    def switch_folder(self, video_folder):
        """Ends the video being recorded, if any, and records from the next step on into `video_folder`."""
        if self.frames:
            self.write()
        self.video_folder, self.step_id = video_folder, 0

    def close(self):
        if self.frames:  # the run ended during a recording: keep what there is
            self.write()
        if hasattr(self.env, "close"):  # IsaacGymEnvs' tasks have no close()
            self.env.close()


class ExtractObsWrapper:
    """The view of an Isaac Gym task the agent uses. A task observes a dictionary (`obs`, and `states` for a
    privileged critic); the policy sees `obs`. The spaces are those of one environment, under the names that
    Gymnasium's vector environments give them."""

    def __init__(self, env):
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space

    def reset(self):
        return self.env.reset()["obs"]

    def step(self, actions):
        """A tensor of actions in; (observations, rewards, dones, infos) out, tensors on the task's device."""
        obs, rewards, dones, infos = self.env.step(actions)
        return obs["obs"], rewards, dones, infos

    def close(self):
        if hasattr(self.env, "close"):  # IsaacGymEnvs' tasks have no close()
            self.env.close()


def make_env(env_id, num_envs, seed, device, capture_video, run_name, record_video_step_frequency):
    """The Isaac Gym vector environment: one simulation of `num_envs` copies of the task on `device`, which takes
    a tensor of actions and returns tensors, all on that device. Its episodes restart inside the step after
    the one that ended them. A viewer is opened only to record videos, into a virtual screen."""
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
    return ExtractObsWrapper(envs)


class EpisodeStatistics:
    """Return and length of the running episode of every sub-environment, kept in tensors on the device like
    the environment's, so that counting needs no copy to the host."""

    def __init__(self, num_envs, device):
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.lengths = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def step(self, rewards, dones):
        """Counts one step; returns (returns, lengths) of every sub-environment's episode up to this step.
        The entries where `dones` (bool) is set are the episodes that this step ended; those restart at 0."""
        self.returns += rewards
        self.lengths += 1
        returns, lengths = self.returns.clone(), self.lengths.clone()
        self.returns.masked_fill_(dones, 0.0)
        self.lengths.masked_fill_(dones, 0)
        return returns, lengths


def log_episodes(writer, global_steps, episodic_returns, episodic_lengths):
    """Writes `charts/episodic_return` and `charts/episodic_length`, one point each per finished episode.
    The episodes that ended at the same step share one event: thousands of environments can end thousands of
    episodes in one rollout, and one `add_scalar` call per point costs several times as much."""
    values = {}
    for step, episodic_return, episodic_length in zip(global_steps, episodic_returns, episodic_lengths):
        values.setdefault(step, []).extend(
            (
                Summary.Value(tag="charts/episodic_return", simple_value=episodic_return),
                Summary.Value(tag="charts/episodic_length", simple_value=episodic_length),
            )
        )
    for step, step_values in values.items():
        writer.file_writer.add_summary(Summary(value=step_values), step)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def sample_gaussian(action_mean, action_logstd):
    """The reparameterised sample of a diagonal Gaussian: mean + std * standard normal noise."""
    return action_mean + action_logstd.exp() * torch.randn_like(action_mean)


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = np.array(envs.single_observation_space.shape).prod()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 1), std=1.0),
        )
        action_dim = np.prod(envs.single_action_space.shape)
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, action_dim), std=0.01),
        )
        # state-independent log standard deviation, one per action component
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action(self, x):
        """Sampling only: all the rollout needs per step."""
        return sample_gaussian(self.actor_mean(x), self.actor_logstd)

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        if action is None:
            action = sample_gaussian(action_mean, action_logstd)
        # independent Gaussian components: log-probabilities and entropies add up over the action dimensions
        logprob = -((action - action_mean) ** 2) / (2 * (2 * action_logstd).exp()) - action_logstd - LOG_SQRT_2PI
        entropy = 0.5 + LOG_SQRT_2PI + action_logstd
        return action, logprob.sum(1), entropy.sum(1), self.critic(x)


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation over a rollout of shape (num_steps, num_envs), in tensors on the device.

    dones[t] is 1 where obs[t] is the first observation of a new episode (the step before it ended one);
    next_value and next_done belong to the observation after the last step. Returns (advantages, returns).
    """
    # the value and the not-done flag of the observation after each step, for all steps at once
    nextvalues = torch.cat([values[1:], next_value[None]])
    nextnonterminal = 1.0 - torch.cat([dones[1:], next_done[None]])
    deltas = rewards + gamma * nextvalues * nextnonterminal - values
    discounts = gamma * gae_lambda * nextnonterminal
    # only the backward recursion itself is a loop over time
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0.0
    for t in reversed(range(rewards.shape[0])):
        advantages[t] = lastgaelam = deltas[t] + discounts[t] * lastgaelam
    return advantages, advantages + values


def policy_loss(newlogprob, oldlogprob, advantages, clip_coef):
    """Clipped surrogate objective (to minimise) with its debug statistics:
    (loss, old_approx_kl (k1), approx_kl (k3), fraction of ratios clipped)."""
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    with torch.no_grad():
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return torch.max(pg_loss1, pg_loss2).mean(), old_approx_kl, approx_kl, clipfrac


def value_loss(newvalue, oldvalue, returns, clip_coef, clip_vloss):
    """Half the mean squared error of the value, clipped around the rollout's value when clip_vloss is on."""
    v_loss_unclipped = (newvalue - returns) ** 2
    if not clip_vloss:
        return 0.5 * v_loss_unclipped.mean()
    v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()


def explained_variance(y_pred, y_true):
    """1 - Var[y_true - y_pred] / Var[y_true]; NaN when the targets do not vary. A 0-d tensor on the device."""
    var_y = torch.var(y_true, correction=0)
    return torch.where(var_y == 0, torch.nan, 1 - torch.var(y_true - y_pred, correction=0) / var_y)


def evaluate(model_path, envs, next_obs, eval_episodes, device):
    """Loads a saved model and plays `eval_episodes` episodes with it; returns their returns.

    Isaac Gym runs one simulation per process, so the evaluation plays in the training environments, from
    `next_obs`, their current observation. The episodes under way when it starts were begun by the training
    policy and do not count. The episodes that count are the next whole ones of environments 0, 1, ... (as many
    environments as episodes, where there are that many), not the first to end anywhere, which would favour
    short episodes.
    """
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    agent.eval()
    num_counted = min(envs.num_envs, eval_episodes)
    wanted = [eval_episodes // num_counted + (i < eval_episodes % num_counted) for i in range(num_counted)]
    stats = EpisodeStatistics(envs.num_envs, device)
    started = torch.zeros(envs.num_envs, dtype=torch.bool, device=device)  # began an episode during evaluation
    obs = next_obs
    episodic_returns = []
    with torch.no_grad():
        while sum(wanted) > 0:
            obs, reward, done, _ = envs.step(agent.get_action(obs))
            ended = done.bool()
            returns, _ = stats.step(reward, ended)
            # one look at the host per step: evaluation is short, and its counting reads easier in Python
            for i in (ended & started)[:num_counted].nonzero().flatten().tolist():
                if wanted[i] > 0:
                    wanted[i] -= 1
                    episodic_returns.append(returns[i].item())
                    print(f"eval_episode={len(episodic_returns) - 1}, episodic_return={episodic_returns[-1]}")
            started |= ended
    return episodic_returns


def hub_repo_id(hf_entity, env_id, exp_name, seed):
    return f"{hf_entity}/{env_id}-{exp_name}-seed{seed}"


def stage_hub_folder(folder, args, episodic_returns, run_dir, video_dir):
    """Writes what the Hub repository holds into `folder`: the model, the TensorBoard logs,
    this script, a model card and the last evaluation video."""
    folder = Path(folder)
    shutil.copytree(run_dir, folder, dirs_exist_ok=True)
    shutil.copy(__file__, folder / f"{args.exp_name}.py")
    videos = sorted(Path(video_dir).glob("*.mp4"), key=os.path.getmtime) if Path(video_dir).is_dir() else []
    if videos:
        shutil.copy(videos[-1], folder / "replay.mp4")
    mean, std = np.mean(episodic_returns), np.std(episodic_returns)
    hyperparameters = "\n".join(f"    {key}: {value!r}," for key, value in vars(args).items())
    (folder / "README.md").write_text(
        f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- ppo
- isaacgym
library_name: cleanrl
model-index:
- name: PPO
  results:
  - task:
      type: reinforcement-learning
      name: reinforcement-learning
    dataset:
      name: {args.env_id}
      type: {args.env_id}
    metrics:
    - type: mean_reward
      value: {mean:.2f} +/- {std:.2f}
      name: mean_reward
      verified: false
---

# PPO agent playing {args.env_id}

Trained with `{args.exp_name}.py` (included in this repository) on the IsaacGymEnvs task {args.env_id} for
{args.total_timesteps} steps. Evaluated over {len(episodic_returns)} episodes: {mean:.2f} +/- {std:.2f}.

To train it again: `python {args.exp_name}.py --env-id {args.env_id} --seed {args.seed}` (needs Isaac Gym).
The weights are `{args.exp_name}.cleanrl_model` (a PyTorch state dict of the script's `Agent`).

## Hyperparameters
```python
{{
{hyperparameters}
}}
```
"""
    )
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def push_to_hub(args, episodic_returns, run_dir, video_dir):
    """Creates (or reuses) the model repository on the Hugging Face Hub and uploads the run to it."""
    import tempfile

    from huggingface_hub import HfApi

    api = HfApi()
    hf_entity = args.hf_entity or api.whoami()["name"]
    repo_id = hub_repo_id(hf_entity, args.env_id, args.exp_name, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        stage_hub_folder(folder, args, episodic_returns, run_dir, video_dir)
        api.create_repo(repo_id=repo_id, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message=f"{args.exp_name} on {args.env_id}")
    print(f"Model pushed to https://huggingface.co/{repo_id}")
    return repo_id


def progress_line(global_step, total_timesteps, sps, recent_returns):
    """One plain line of progress, readable on a terminal and in a log file alike."""
    left = (total_timesteps - global_step) / max(sps, 1)
    ret = f"{np.mean(recent_returns):.1f} (last {len(recent_returns)})" if recent_returns else "n/a"
    return (
        f"[{100 * global_step / total_timesteps:3.0f}%] step {global_step}/{total_timesteps} "
        f"| SPS {sps} | episodic return {ret} | left {int(left // 60)}m{int(left % 60):02d}s"
    )


if __name__ == "__main__":
    args = tyro.cli(Args)
    if isaacgymenvs is None:
        fail(
            f"cannot import Isaac Gym ({' '.join(str(isaacgym_import_error).split())}). It is not on PyPI: "
            "download Isaac Gym Preview 4 from https://developer.nvidia.com/isaac-gym and run `pip install -e python/` "
            "in its folder (its bindings are for Python 3.6 to 3.8), then run `pip install -e .` in a clone of "
            "https://github.com/isaac-sim/IsaacGymEnvs"
        )
    problem = check_args(args)
    if problem:
        fail(problem)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"

    # the device comes before the environment: Isaac Gym simulates on it, and its tensors stay there
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    if args.env_id not in task_names():
        fail(f"IsaacGymEnvs has no task '{args.env_id}'; its tasks are {', '.join(task_names())}")
    envs = make_env(
        args.env_id, args.num_envs, args.seed, device, args.capture_video, run_name, args.record_video_step_frequency
    )
    problem = check_spaces(envs, args.env_id)
    if problem:
        envs.close()
        fail(problem)

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
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    if device.type == "cpu":
        # a CPU run is for trying the script out on small numbers of environments: one thread is enough
        torch.set_num_threads(1)

    agent = Agent(envs).to(device)
    # Adam with epsilon 1e-5; the fused kernel updates all parameters in one call
    params = list(agent.parameters())
    optimizer = optim.Adam(params, lr=args.learning_rate, eps=1e-5, fused=True)

    # Rollout storage, on the device like the environment's tensors: nothing goes to the host during the rollout
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    # the return and length of every environment's episode so far after each step, read where an episode ended
    episode_returns = torch.zeros((args.num_steps, args.num_envs), dtype=torch.float64, device=device)
    episode_lengths = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = 0.0
    recent_returns = deque(maxlen=100)
    episode_stats = EpisodeStatistics(args.num_envs, device)
    next_obs = envs.reset()
    next_done = torch.zeros(args.num_envs, device=device)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        # Rollout: only the action is sampled per step; values and log-probs come in one batch below.
        # (no_grad, not inference_mode: a task keeps tensors made in one step to update in place in a later one,
        # which inference tensors forbid outside inference mode)
        with torch.no_grad():
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done

                action = agent.get_action(next_obs)
                actions[step] = action

                # TRY NOT TO MODIFY: execute the game and log data.
                # (the task clamps the actions to its range itself; the rollout keeps the action as sampled.
                # The reward and done tensors are the task's own buffers, which its next step overwrites:
                # everything kept of them is copied before stepping again)
                next_obs, reward, done, infos = envs.step(action)
                rewards[step] = reward * args.reward_scaler
                next_done = done.float()
                episode_returns[step], episode_lengths[step] = episode_stats.step(reward, done.bool())

        # The episodes that ended during the rollout, found in one look at all of it rather than one per step:
        # the rollout's only copy to the host
        ended_step, ended_env = torch.cat([dones[1:], next_done[None]]).nonzero(as_tuple=True)
        ended_global_steps = (global_step - (args.num_steps - 1 - ended_step) * args.num_envs).tolist()
        ended_returns = episode_returns[ended_step, ended_env].tolist()
        ended_lengths = episode_lengths[ended_step, ended_env].tolist()

        # The parameters did not change during the rollout, so its values and log-probs are one forward pass
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        with torch.no_grad():
            _, b_logprobs, _, b_values = agent.get_action_and_value(b_obs, b_actions)
            next_value = agent.get_value(next_obs).flatten()
        values = b_values.reshape(args.num_steps, args.num_envs)

        # bootstrap value if not done
        advantages, returns = compute_gae(rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda)

        # flatten the batch
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = b_values.flatten()

        # Optimizing the policy and value network
        clipfracs = []  # one 0-d tensor per minibatch, read once after the update
        for epoch in range(args.update_epochs):
            # shuffle the whole batch once per epoch, so each minibatch below is a slice, not a gather
            b_inds = torch.randperm(args.batch_size, device=device)
            e_obs, e_actions, e_logprobs, e_advantages, e_returns, e_values = (
                t[b_inds] for t in (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values)
            )
            for start in range(0, args.batch_size, args.minibatch_size):
                mb = slice(start, start + args.minibatch_size)

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(e_obs[mb], e_actions[mb])

                mb_advantages = e_advantages[mb]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss, old_approx_kl, approx_kl, clipfrac = policy_loss(
                    newlogprob, e_logprobs[mb], mb_advantages, args.clip_coef
                )
                clipfracs.append(clipfrac)
                v_loss = value_loss(newvalue.view(-1), e_values[mb], e_returns[mb], args.clip_coef, args.clip_vloss)
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm, foreach=True)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        explained_var = explained_variance(b_values, b_returns)

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        log_episodes(writer, ended_global_steps, ended_returns, ended_lengths)
        recent_returns.extend(ended_returns)
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var.item(), global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if "consecutive_successes" in infos:  # ShadowHand and AllegroHand: goals reached in a row, on average
            writer.add_scalar("charts/consecutive_successes", infos["consecutive_successes"].item(), global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):
            last_print = time.time()
            print(progress_line(global_step, args.total_timesteps, sps, recent_returns), flush=True)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save(agent.state_dict(), model_path)
        print(f"model saved to {model_path}")

        if args.capture_video:
            envs.env.switch_folder(f"videos/{run_name}-eval")  # evaluation plays on, in the training environments
        episodic_returns = evaluate(model_path, envs, next_obs, eval_episodes=10, device=device)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        writer.flush()

        if args.upload_model:
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval")

    envs.close()
    writer.close()
