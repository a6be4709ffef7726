# PPO for continuous actions (MuJoCo and dm_control); docs: docs/ppo.md#ppo_continuous_actionpy
import os
import random
import shutil
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
    env_id: str = "HalfCheetah-v4"
    """the id of the environment"""
    total_timesteps: int = 1000000
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    num_steps: int = 2048
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

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


def check_spaces(envs: gym.vector.VectorEnv, env_id: str) -> str | None:
    """Returns why this script cannot train on these spaces, or None when it can."""
    if not isinstance(envs.single_action_space, gym.spaces.Box):
        return (
            f"ppo_continuous_action.py needs a Box action space, but {env_id} has {envs.single_action_space}; "
            "use ppo.py for Discrete actions"
        )
    if not isinstance(envs.single_observation_space, gym.spaces.Box) or len(envs.single_observation_space.shape) != 1:
        return (
            f"ppo_continuous_action.py needs a flat Box observation space, but {env_id} has "
            f"{envs.single_observation_space}; use ppo_atari.py for images"
        )
    return None


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        # dm_control tasks observe a dict of arrays: one flat vector instead
        return gym.wrappers.FlattenObservation(env)

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    """The vector environment, with same-step autoreset: when an episode ends, the returned
    observation is already the first of the next episode, as in the reference (truncation counts as an end).
    copy=False: step() returns its own observation buffer, overwritten by the next step; every caller here
    reads (or copies) it before stepping again."""
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        copy=False,
    )


class EpisodeStatistics:
    """Return and length of the running episode of every sub-environment, kept in numpy for all at once."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def step(self, rewards, dones):
        """Counts one step; returns [(return, length)] of the episodes that `dones` ended (same-step autoreset)."""
        self.returns += rewards
        self.lengths += 1
        if not dones.any():
            return []
        ended = np.flatnonzero(dones)
        finished = list(zip(self.returns[ended].tolist(), self.lengths[ended].tolist()))
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return finished


class RunningMeanStd:
    """Mean and variance of everything seen so far, updated one batch at a time (Chan et al.'s parallel algorithm)."""

    def __init__(self, shape=(), epsilon=1e-4):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = epsilon

    def update(self, x):
        # called every step on one row: plain sums cost half of np.mean and np.var, for the same numbers
        batch_count = x.shape[0]
        batch_mean = x.sum(axis=0) / batch_count
        batch_var = np.square(x - batch_mean).sum(axis=0) / batch_count
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * (batch_count / total)
        m2 = self.var * self.count + batch_var * batch_count + np.square(delta) * (self.count * batch_count / total)
        self.var = m2 / total
        self.count = total

    def state_dict(self):
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state):
        self.mean, self.var, self.count = np.asarray(state["mean"]), np.asarray(state["var"]), float(state["count"])


def normalize_obs(obs, obs_rms, update=True, clip=10.0, epsilon=1e-8):
    """Observation normalisation: running mean and standard deviation, then clipping to [-clip, clip]."""
    if update:
        obs_rms.update(obs)
    return np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + epsilon), -clip, clip).astype(np.float32)


class RewardScaler:
    """Reward scaling: rewards divided by the running standard deviation of the discounted return
    (with the algorithm's gamma), then clipped to [-clip, clip]. The return restarts when an episode ends."""

    def __init__(self, num_envs, gamma, clip=10.0, epsilon=1e-8):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.return_rms = RunningMeanStd()
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon

    def __call__(self, rewards, dones):
        self.returns = self.returns * self.gamma + rewards
        self.return_rms.update(self.returns)
        self.returns[dones] = 0.0
        return np.clip(rewards / np.sqrt(self.return_rms.var + self.epsilon), -self.clip, self.clip)


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
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        action_dim = np.prod(envs.single_action_space.shape)
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, action_dim), std=0.01),
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
        z = (action - action_mean) / action_logstd.exp()
        logprob = -0.5 * z**2 - action_logstd - LOG_SQRT_2PI
        entropy = 0.5 + LOG_SQRT_2PI + action_logstd
        return action, logprob.sum(1), entropy.sum(1), self.critic(x)


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation over a rollout of shape (num_steps, num_envs).

    dones[t] is 1 where obs[t] is the first observation of a new episode (the step before it ended one);
    next_value and next_done belong to the observation after the last step. Returns (advantages, returns).
    """
    # the value and the not-done flag of the observation after each step, for all steps at once
    nextvalues = np.concatenate([values[1:], next_value[None]])
    nextnonterminal = 1.0 - np.concatenate([dones[1:], next_done[None]])
    deltas = rewards + gamma * nextvalues * nextnonterminal - values
    discounts = gamma * gae_lambda * nextnonterminal
    # only the backward recursion itself is a loop over time
    advantages = np.zeros_like(rewards)
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
    """1 - Var[y_true - y_pred] / Var[y_true]; NaN when the targets do not vary."""
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y


def save_model(model_path, agent, obs_rms):
    """Saves everything needed to act as trained: the weights and the observation statistics."""
    obs_stats = {key: torch.as_tensor(value) for key, value in obs_rms.state_dict().items()}
    torch.save({"agent": agent.state_dict(), "obs_rms": obs_stats}, model_path)


def load_model(model_path, envs, device):
    """The agent and the observation statistics saved by `save_model`."""
    checkpoint = torch.load(model_path, map_location=device)
    agent = Agent(envs).to(device)
    agent.load_state_dict(checkpoint["agent"])
    obs_rms = RunningMeanStd(envs.single_observation_space.shape)
    obs_rms.load_state_dict({key: value.cpu().numpy() for key, value in checkpoint["obs_rms"].items()})
    return agent, obs_rms


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video=True, seed=1):
    """Loads a saved model and plays `eval_episodes` episodes with it, normalising observations with the
    saved statistics, frozen; returns the episodes' returns."""
    envs = make_vector_env(env_id, 1, capture_video, run_name)
    agent, obs_rms = load_model(model_path, envs, device)
    agent.eval()
    stats = EpisodeStatistics(1)
    obs, _ = envs.reset(seed=seed)
    episodic_returns = []
    with torch.inference_mode():
        while len(episodic_returns) < eval_episodes:
            actions = agent.get_action(torch.as_tensor(normalize_obs(obs, obs_rms, update=False), device=device))
            actions = np.clip(actions.cpu().numpy(), envs.single_action_space.low, envs.single_action_space.high)
            obs, reward, terminations, truncations, _ = envs.step(actions)
            for episodic_return, _ in stats.step(reward, terminations | truncations):
                print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
                episodic_returns.append(episodic_return)
    envs.close()
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

Trained with `{args.exp_name}.py` (included in this repository) for {args.total_timesteps} steps.
Evaluated over {len(episodic_returns)} episodes: {mean:.2f} +/- {std:.2f}.

To train it again: `python {args.exp_name}.py --env-id {args.env_id} --seed {args.seed}`.
`{args.exp_name}.cleanrl_model` holds the weights (`agent`, a PyTorch state dict of the script's `Agent`) and the
observation normaliser's statistics (`obs_rms`); `load_model` in the script reads both.

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
    problem = check_args(args)
    if problem:
        fail(problem)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"

    # env setup
    if args.env_id.startswith("dm_control/"):
        try:
            import shimmy  # noqa: F401 (importing it registers the dm_control/ ids)
        except ImportError:
            fail("dm_control tasks need shimmy: pip install -r requirements/requirements-dm_control.txt")
    if args.capture_video:
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders headless through EGL
    try:
        envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name)
    except gym.error.DependencyNotInstalled as e:
        fail(f"{e}; install the extra: pip install -r requirements/requirements-mujoco.txt")
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make environment '{args.env_id}': {e} (this script is for MuJoCo and dm_control tasks)")
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

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if device.type == "cpu":
        # tiny networks: one thread beats waking a thread pool for every small op
        torch.set_num_threads(1)

    agent = Agent(envs).to(device)
    # Adam with epsilon 1e-5; the fused kernel updates all parameters in one call
    params = list(agent.parameters())
    optimizer = optim.Adam(params, lr=args.learning_rate, eps=1e-5, fused=True)

    # Rollout storage, in numpy like the environment: torch gets the whole batch once per iteration
    obs = np.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=np.float32)
    actions = np.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=np.float32)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = 0.0
    recent_returns = deque(maxlen=100)
    episode_stats = EpisodeStatistics(args.num_envs)
    obs_rms = RunningMeanStd(envs.single_observation_space.shape)
    reward_scaler = RewardScaler(args.num_envs, args.gamma)
    action_low, action_high = envs.single_action_space.low, envs.single_action_space.high
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = normalize_obs(next_obs, obs_rms)
    next_done = np.zeros(args.num_envs, dtype=np.float32)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        # Rollout: only the action is sampled per step; values and log-probs come in one batch below
        with torch.inference_mode():
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done

                action = agent.get_action(torch.from_numpy(next_obs).to(device)).cpu()
                actions[step] = action.numpy()

                # TRY NOT TO MODIFY: execute the game and log data.
                # (clipped to the valid range for the environment; the rollout keeps the action as sampled)
                next_obs, reward, terminations, truncations, _ = envs.step(
                    np.clip(actions[step], action_low, action_high)
                )
                next_obs = normalize_obs(next_obs, obs_rms)
                ended = terminations | truncations
                rewards[step] = reward_scaler(reward, ended)
                next_done = ended.astype(np.float32)

                for episodic_return, episodic_length in episode_stats.step(reward, ended):
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                    recent_returns.append(episodic_return)

        # The parameters did not change during the rollout, so its values and log-probs are one forward pass
        b_obs = torch.from_numpy(obs.reshape((-1,) + envs.single_observation_space.shape)).to(device)
        b_actions = torch.from_numpy(actions.reshape((-1,) + envs.single_action_space.shape)).to(device)
        with torch.no_grad():
            _, b_logprobs, _, b_values = agent.get_action_and_value(b_obs, b_actions)
            next_value = agent.get_value(torch.from_numpy(next_obs).to(device)).flatten()
        values = b_values.reshape(args.num_steps, args.num_envs).cpu().numpy()

        # bootstrap value if not done
        advantages, returns = compute_gae(
            rewards, values, dones, next_value.cpu().numpy(), next_done, args.gamma, args.gae_lambda
        )

        # flatten the batch
        b_advantages = torch.from_numpy(advantages.reshape(-1)).to(device)
        b_returns = torch.from_numpy(returns.reshape(-1)).to(device)
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

        explained_var = explained_variance(values.reshape(-1), returns.reshape(-1))

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):
            last_print = time.time()
            print(progress_line(global_step, args.total_timesteps, sps, recent_returns), flush=True)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        save_model(model_path, agent, obs_rms)
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(
            model_path,
            args.env_id,
            eval_episodes=10,
            run_name=f"{run_name}-eval",
            device=device,
            capture_video=args.capture_video,
            seed=args.seed,
        )
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        writer.flush()

        if args.upload_model:
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval")

    envs.close()
    writer.close()
