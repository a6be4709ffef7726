# PPO for Atari games on EnvPool's C++ vector environment; docs: docs/ppo.md#ppo_atari_envpoolpy
import os
import random
import shutil
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
from torch.utils.tensorboard import SummaryWriter

try:
    import envpool
except ModuleNotFoundError as e:
    print(
        f"{os.path.basename(__file__)}: error: {e.name} is not installed; install the EnvPool extra with "
        "`pip install -c requirements/constraints.txt -r requirements/requirements-envpool.txt`",
        file=sys.stderr,
    )
    sys.exit(2)


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
    env_id: str = "Breakout-v5"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel game environments"""
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


def check_env_id(env_id: str) -> str | None:
    """Returns why this script cannot train on `env_id`, or None when it is one of EnvPool's Atari games.
    Checked on EnvPool's registry, before any environment is made."""
    specs = envpool.registration.registry.specs
    if env_id not in specs:
        return (
            f"cannot make environment '{env_id}': EnvPool has no such id "
            "(its Atari ids look like Breakout-v5 or Pong-v5; use ppo_atari.py for BreakoutNoFrameskip-v4)"
        )
    if specs[env_id][0] != "envpool.atari":
        return (
            f"{os.path.basename(__file__)} needs one of EnvPool's Atari games, but {env_id} is not one; "
            "use ppo.py for classic control and ppo_continuous_action.py for Box actions"
        )
    return None


def make_env(env_id, num_envs, seed, capture_video=False):
    """The vector environment: EnvPool steps `num_envs` copies of the game in C++ threads, with its own Atari
    preprocessing (30 no-op starts, 4 frames per step max-pooled over the last two, a lost life ends an episode,
    FIRE on reset, rewards clipped to their sign, 84x84 grayscale frames, 4 stacked). Environment i is seeded
    with seed + i. With `capture_video` it can also render environment 0 in full colour."""
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=num_envs,  # synchronous: every step returns all environments, in order
        episodic_life=True,
        reward_clip=True,
        seed=seed,
        render_mode="rgb_array" if capture_video else None,
    )


def ended_games(truncations, infos):
    """Which sub-environments ended a whole game in this step: the last life was lost (EnvPool's
    info["terminated"]; `terminations` is also set by every lost life) or the time limit cut the game short."""
    return infos["terminated"].astype(bool) | truncations


class EpisodeStatistics:
    """Score and length of the game each sub-environment is playing, over all its lives, kept in numpy for all at once.

    The agent's rewards are clipped and its episodes end with every lost life, so the statistics are counted from
    what EnvPool reports beside them: info["reward"] is the unclipped reward, and a game ends with its last life or
    with a truncation (the counters restart either way). EnvPool resets a sub-environment in the step after its
    episode ended; that step ignores the action and pays nothing, and is not counted in the length (EnvPool's own
    elapsed_step skips it too).
    """

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.resetting = np.zeros(num_envs, dtype=bool)  # this step is EnvPool's reset step

    def step(self, raw_rewards, dones, game_overs):
        """Counts one step; `dones` ended the agent's episodes (lives), `game_overs` ended games.
        Returns [(return, length)] of the games that ended in this step."""
        self.returns += raw_rewards
        self.lengths += ~self.resetting
        self.resetting = np.array(dones, dtype=bool)
        if not game_overs.any():
            return []
        ended = np.flatnonzero(game_overs)
        finished = list(zip(self.returns[ended].tolist(), self.lengths[ended].tolist()))
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return finished


class GameRecorder:
    """Videos of environment 0's games, taken on the schedule of Gymnasium's RecordVideo (games 0, 1, 8, 27, ...,
    then every 1000th): EnvPool does not go through Gymnasium's wrappers, so its full-colour frames are collected
    here, one per step (15 per second of play), and written as mp4 when the game ends."""

    def __init__(self, envs, video_folder):
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video

        self.envs, self.video_folder = envs, video_folder
        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.game = 0
        self.frames = []

    def step(self, game_over):
        """Call after reset() and after every step, with whether environment 0's game ended in that step."""
        if self.schedule(self.game):
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:
                self.save_video(
                    self.frames, self.video_folder, episode_trigger=lambda _: True, episode_index=self.game, fps=15
                )
            self.game += 1
            self.frames = []


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def sample_categorical(logits):
    """Gumbel-max: the argmax of the logits plus standard Gumbel noise (-log of Exp(1) noise)
    is a sample of the softmax distribution, in three cheap ops."""
    return (logits - torch.empty_like(logits).exponential_().log_()).argmax(dim=-1)


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        # the Nature-DQN trunk, shared by the policy and the value: stacked 84x84 frames in, 512 features out
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(envs.single_observation_space.shape[0], 32, 8, stride=4)),
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

    def get_action(self, x):
        """Sampling only: all the evaluation needs per step."""
        return sample_categorical(self.actor(self.network(x / 255.0)))

    def get_action_and_value(self, x, action=None):
        # x holds uint8 pixels, as stored: scaled to [0, 1] on the way in
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        if action is None:
            action = sample_categorical(logits)
        # log-probabilities of all actions: the chosen one's and the entropy both come from them
        logprobs = logits.log_softmax(dim=-1)
        logprob = logprobs.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        entropy = -(logprobs.exp() * logprobs).sum(-1)
        return action, logprob, entropy, self.critic(hidden)


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation over a rollout of shape (num_steps, num_envs).

    dones[t] is 1 where the step before t ended an episode: with EnvPool, obs[t] is then that episode's last
    observation and step t is the reset step, left out of the update. next_value and next_done belong to the
    observation after the last step. Returns (advantages, returns).
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


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video=True, seed=1):
    """Loads a saved model and plays `eval_episodes` episodes with it; returns their returns."""
    envs = make_env(env_id, 1, seed, capture_video)
    agent = Agent(envs).to(device)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    agent.eval()
    stats = EpisodeStatistics(1)
    recorder = GameRecorder(envs, f"videos/{run_name}") if capture_video else None
    obs, _ = envs.reset()
    if recorder:
        recorder.step(False)
    episodic_returns = []
    with torch.inference_mode():
        # an evaluation episode is a whole game, over all its lives
        while len(episodic_returns) < eval_episodes:
            actions = agent.get_action(torch.as_tensor(obs, device=device))
            obs, _, terminations, truncations, infos = envs.step(actions.cpu().numpy())
            game_overs = ended_games(truncations, infos)
            for episodic_return, _ in stats.step(infos["reward"], terminations | truncations, game_overs):
                print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
                episodic_returns.append(episodic_return)
            if recorder:
                recorder.step(game_overs[0])
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
    problem = check_args(args)
    if problem:
        fail(problem)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"

    # env setup
    problem = check_env_id(args.env_id)
    if problem:
        fail(problem)
    envs = make_env(args.env_id, args.num_envs, args.seed, args.capture_video)

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
    # unlike ppo.py's tiny networks, a CNN has enough work per op to share: PyTorch's default thread count stays
    # (all cores, or OMP_NUM_THREADS)

    # channels-last weights: the convolutions run in the layout the CPU (and GPU) kernels prefer
    agent = Agent(envs).to(device, memory_format=torch.channels_last)
    # Adam with epsilon 1e-5; the fused kernel updates all parameters in one call
    params = list(agent.parameters())
    optimizer = optim.Adam(params, lr=args.learning_rate, eps=1e-5, fused=True)

    # Rollout storage, in numpy like the environment: torch gets the whole batch once per iteration;
    # the frames stay uint8 (8 x 128 x 4x84x84 bytes: 29 MB, a quarter of float32)
    obs = np.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=np.uint8)
    actions = np.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=np.int64)
    logprobs = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    values = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = 0.0
    recent_returns = deque(maxlen=100)
    episode_stats = EpisodeStatistics(args.num_envs)
    recorder = GameRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    next_obs, _ = envs.reset()
    next_done = np.zeros(args.num_envs, dtype=np.float32)
    if recorder:
        recorder.step(False)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        # Rollout: the policy and the value share the trunk, so the value and the log-prob come with the action
        # from the one forward pass per step (a batched pass after the rollout, as in ppo.py, would run it twice)
        with torch.inference_mode():
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done

                action, logprob, _, value = agent.get_action_and_value(torch.from_numpy(next_obs).to(device))
                action = action.cpu()
                actions[step] = action.numpy()
                logprobs[step] = logprob.cpu().numpy()
                values[step] = value.flatten().cpu().numpy()

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
                rewards[step] = reward
                next_done = (terminations | truncations).astype(np.float32)

                game_overs = ended_games(truncations, infos)
                for episodic_return, episodic_length in episode_stats.step(
                    infos["reward"], terminations | truncations, game_overs
                ):
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                    recent_returns.append(episodic_return)
                if recorder:
                    recorder.step(game_overs[0])

            next_value = agent.get_value(torch.from_numpy(next_obs).to(device)).flatten()

        # bootstrap value if not done
        advantages, returns = compute_gae(
            rewards, values, dones, next_value.cpu().numpy(), next_done, args.gamma, args.gae_lambda
        )

        # flatten the batch
        b_obs = torch.from_numpy(obs.reshape((-1,) + envs.single_observation_space.shape)).to(device)
        b_actions = torch.from_numpy(actions.reshape((-1,) + envs.single_action_space.shape)).to(device)
        b_logprobs = torch.from_numpy(logprobs.reshape(-1)).to(device)
        b_advantages = torch.from_numpy(advantages.reshape(-1)).to(device)
        b_returns = torch.from_numpy(returns.reshape(-1)).to(device)
        b_values = torch.from_numpy(values.reshape(-1)).to(device)
        # EnvPool's reset steps leave the batch: their observation is the last of an ended episode, and EnvPool
        # ignored their action and paid nothing for it, so they are no experience of the policy's
        valid = dones.reshape(-1) == 0
        b_valid_inds = torch.from_numpy(np.flatnonzero(valid)).to(device)
        num_valid = len(b_valid_inds)
        # minibatch boundaries: num_minibatches slices of (nearly) equal size
        edges = [num_valid * i // args.num_minibatches for i in range(args.num_minibatches + 1)]

        # Optimizing the policy and value network
        clipfracs = []  # one 0-d tensor per minibatch, read once after the update
        for epoch in range(args.update_epochs):
            # shuffle the whole batch once per epoch, so each minibatch below is a slice, not a gather
            b_inds = b_valid_inds[torch.randperm(num_valid, device=device)]
            e_obs, e_actions, e_logprobs, e_advantages, e_returns, e_values = (
                t[b_inds] for t in (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values)
            )
            for start, end in zip(edges[:-1], edges[1:]):
                mb = slice(start, end)

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

        explained_var = explained_variance(values.reshape(-1)[valid], returns.reshape(-1)[valid])

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
        torch.save(agent.state_dict(), model_path)
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
