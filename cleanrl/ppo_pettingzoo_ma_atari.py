# PPO self-play on PettingZoo Atari games, one network for all players; docs: docs/ppo.md#ppo_pettingzoo_ma_ataripy
import os
import random
import shutil
import sys
import time
import warnings
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

try:
    import ale_py.roms
    import multi_agent_ale_py  # noqa: F401  (the emulator PettingZoo's Atari games run on)
    import pettingzoo
    import supersuit as ss
    from pettingzoo.env_registry.exceptions import PettingZooRegistryError
except ModuleNotFoundError as e:
    print(
        f"{os.path.basename(__file__)}: error: {e.name} is not installed; install the PettingZoo extra with "
        "`pip install -c requirements/constraints.txt -r requirements/requirements-pettingzoo.txt`",
        file=sys.stderr,
    )
    sys.exit(2)

# multi-agent-ale-py ships no game ROMs, and AutoROM would download them: PettingZoo loads those that ale-py carries
ROM_DIR = os.path.dirname(ale_py.roms.__file__)


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
    env_id: str = "pong_v3"
    """the id of the environment (a PettingZoo Atari game: pong_v3, surround_v2, tennis_v3, ...)"""
    total_timesteps: int = 20000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 16
    """the number of parallel game environments, counted in players: 16 is eight two-player games"""
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


def make_game(env_id, render_mode=None):
    """One game of `env_id` as a PettingZoo parallel environment, with the ROMs of ale-py (nothing is downloaded)."""
    return pettingzoo.make("parallel", f"atari/{env_id}", auto_rom_install_path=ROM_DIR, render_mode=render_mode)


def count_players(env_id):
    """How many players a game of `env_id` has; each is one sub-environment of the vector environment."""
    game = make_game(env_id)
    num_players = len(game.possible_agents)
    game.close()
    return num_players


def check_env_id(env_id: str, num_envs: int) -> str | None:
    """Returns why this script cannot train on `env_id` with `num_envs` players, or None when it can.
    Checked on PettingZoo's registry and one game, before any work."""
    try:
        pettingzoo.spec("parallel", f"atari/{env_id}")
    except PettingZooRegistryError:
        games = [f"{s.name}_v{s.version}" for s in pettingzoo.parallel_registry.values() if s.namespace == "atari"]
        return f"unknown PettingZoo Atari game '{env_id}'; choose one of {', '.join(games)}"
    num_players = count_players(env_id)
    if num_envs % num_players != 0:
        return (
            f"{env_id} has {num_players} players, and every player of a game is one environment: "
            f"--num-envs {num_envs} must be a multiple of {num_players}"
        )
    return None


class SelfPlayVectorEnv(gym.vector.VectorEnv):
    """SuperSuit's vector environment of players, with the interface of a Gymnasium 1.x vector environment.

    SuperSuit turns every player of every game into one sub-environment and restarts a game in the step that ends
    it (same-step autoreset), but keeps the older vector conventions: its `observation_space` and `action_space`
    are those of one player, its flags are uint8 and its infos a list. Here they become the single and batched
    spaces, booleans, and an empty info dict (SuperSuit's infos hold only the final observation, which is not used:
    truncation ends an episode as termination does).
    """

    def __init__(self, envs):
        self.envs = envs
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.observation_space
        self.single_action_space = envs.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.render_mode = envs.render_mode
        # an agent step is 4 emulator frames (of PettingZoo's 60 per second)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "render_fps": 15}

    def reset(self, *, seed=None, options=None):
        # SuperSuit seeds game i with seed + i; both players of a game share it
        obs, _ = self.envs.reset(seed=seed, options=options)
        return obs, {}

    def step(self, actions):
        obs, rewards, terminations, truncations, _ = self.envs.step(actions)
        return obs, rewards, terminations.astype(bool), truncations.astype(bool), {}

    def render(self):
        # SuperSuit renders the screen of game 0, which all its players share: one frame per sub-environment
        frame = self.envs.render()
        return None if frame is None else (frame,) * self.num_envs

    def close_extras(self, **kwargs):
        self.envs.close()


def make_vector_env(env_id, num_envs, capture_video, run_name):
    """`num_envs` players, in games of `env_id` with the Atari preprocessing, as one vector environment; with
    capture_video, game 0 is recorded to videos/{run_name}."""
    env = make_game(env_id, render_mode="rgb_array" if capture_video else None)
    # the maximum of the last two frames (Atari draws some objects every other frame), of every 4th frame: each
    # action repeats for 4 frames, the rewards summed
    env = ss.max_observation_v0(env, 2)
    env = ss.frame_skip_v0(env, 4)
    env = ss.color_reduction_v0(env, mode="full")  # grayscale (luminance)
    env = ss.resize_v1(env, x_size=84, y_size=84)
    env = ss.frame_stack_v1(env, 4)
    # one constant plane per player, set in the observation of that player: the one network knows which side it plays
    env = ss.agent_indicator_v0(env, type_only=False)
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    num_players = env.num_envs
    if num_envs % num_players != 0:
        raise ValueError(f"{num_envs} environments do not divide into games of {num_players} players")
    # copies of the game, stepped one after the other in this process
    envs = SelfPlayVectorEnv(ss.concat_vec_envs_v1(env, num_envs // num_players, num_cpus=0, base_class="gymnasium"))
    if capture_video:
        with warnings.catch_warnings():
            # the wrapper warns that same-step autoreset keeps a game's last frame out of the video: true, and expected
            warnings.filterwarnings("ignore", message=".*autoreset mode is same-step")
            envs = gym.wrappers.vector.RecordVideo(envs, f"videos/{run_name}", record_first_only=True)
    return envs


class EpisodeStatistics:
    """Return and length of the running episode of every sub-environment (here: every player), in numpy for all."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def step(self, rewards, dones):
        """Counts one step; returns [(sub-environment, return, length)] of the episodes that `dones` ended
        (same-step autoreset)."""
        self.returns += rewards
        self.lengths += 1
        if not dones.any():
            return []
        ended = np.flatnonzero(dones)
        finished = list(zip(ended.tolist(), self.returns[ended].tolist(), self.lengths[ended].tolist()))
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return finished


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
        space = envs.single_observation_space
        channels = space.shape[-1]
        # The channels are the 4 stacked frames, then one indicator plane per player, all ones in the observations
        # of that player; "one" is what SuperSuit writes there: the space's maximum, 255 for these uint8 frames in
        # SuperSuit 3.11 (1 in the older version the reference used). Each channel is divided by its own maximum,
        # so the frames reach the network in [0, 1] and the indicator planes as exactly 0 or 1, as in the reference.
        channel_max = space.high.reshape(-1, channels).max(axis=0).astype(np.float32)
        self.register_buffer("obs_scale", torch.from_numpy(1.0 / channel_max), persistent=False)
        # the Nature-DQN trunk, shared by the policy and the value: stacked 84x84 frames and indicators in, 512 out
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(channels, 32, 8, stride=4)),
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

    def preprocess(self, x):
        """uint8 observations, height x width x channels as SuperSuit gives them, to the network's input: each channel
        scaled by its maximum, channels first (a view, already in the channels-last layout the weights use)."""
        return (x * self.obs_scale).permute(0, 3, 1, 2)

    def get_value(self, x):
        return self.critic(self.network(self.preprocess(x)))

    def get_action(self, x):
        """Sampling only: all the evaluation needs per step."""
        return sample_categorical(self.actor(self.network(self.preprocess(x))))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(self.preprocess(x))
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


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video=True, seed=1):
    """Loads a saved model and lets it play `eval_episodes` games against itself;
    returns [(return of player 0, length)] of each game."""
    num_players = count_players(env_id)
    envs = make_vector_env(env_id, num_players, capture_video, run_name)
    agent = Agent(envs).to(device, memory_format=torch.channels_last)
    agent.load_state_dict(torch.load(model_path, map_location=device))
    agent.eval()
    stats = EpisodeStatistics(num_players)
    obs, _ = envs.reset(seed=seed)
    episodes = []
    with torch.inference_mode():
        while len(episodes) < eval_episodes:
            actions = agent.get_action(torch.as_tensor(obs, device=device))
            obs, reward, terminations, truncations, _ = envs.step(actions.cpu().numpy())
            for player, episodic_return, episodic_length in stats.step(reward, terminations | truncations):
                if player == 0:
                    print(f"eval_episode={len(episodes)}, episodic_return={episodic_return}, length={episodic_length}")
                    episodes.append((episodic_return, episodic_length))
    envs.close()
    return episodes


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


def progress_line(global_step, total_timesteps, sps, recent_lengths):
    """One plain line of progress, readable on a terminal and in a log file alike. In self-play the returns of the
    two sides cancel out, so the line shows the episode length, the measure of progress here."""
    left = (total_timesteps - global_step) / max(sps, 1)
    length = f"{np.mean(recent_lengths):.1f} (last {len(recent_lengths)})" if recent_lengths else "n/a"
    return (
        f"[{100 * global_step / total_timesteps:3.0f}%] step {global_step}/{total_timesteps} "
        f"| SPS {sps} | episodic length {length} | left {int(left // 60)}m{int(left % 60):02d}s"
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
    problem = check_env_id(args.env_id, args.num_envs)
    if problem:
        fail(problem)
    envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name)
    num_players = count_players(args.env_id)  # sub-environment i is player i % num_players of its game

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
    # the frames stay uint8 (16 x 128 x 84x84x6 bytes: 87 MB, a quarter of float32)
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
    recent_lengths = deque(maxlen=100)
    episode_stats = EpisodeStatistics(args.num_envs)
    next_obs, _ = envs.reset(seed=args.seed)
    next_done = np.zeros(args.num_envs, dtype=np.float32)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        # Rollout: the policy and the value share the trunk, so the value and the log-prob come with the action
        # from the one forward pass per step (a batched pass after the rollout, as in ppo.py, would run it twice);
        # every player of every game acts with the same network
        with torch.inference_mode():
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done

                action, logprob, _, value = agent.get_action_and_value(torch.from_numpy(next_obs).to(device))
                actions[step] = action.cpu().numpy()
                logprobs[step] = logprob.cpu().numpy()
                values[step] = value.flatten().cpu().numpy()

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, terminations, truncations, _ = envs.step(actions[step])
                # the agent learns from rewards clipped to [-1, 1]; the statistics count the game's own score
                rewards[step] = np.clip(reward, -1.0, 1.0)
                ended = terminations | truncations
                next_done = ended.astype(np.float32)

                for env_idx, episodic_return, episodic_length in episode_stats.step(reward, ended):
                    player = env_idx % num_players
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                    writer.add_scalar(f"charts/episodic_return-player{player}", episodic_return, global_step)
                    writer.add_scalar(f"charts/episodic_length-player{player}", episodic_length, global_step)
                    if player == 0:
                        recent_lengths.append(episodic_length)

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
            print(progress_line(global_step, args.total_timesteps, sps, recent_lengths), flush=True)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save(agent.state_dict(), model_path)
        print(f"model saved to {model_path}")

        episodes = evaluate(
            model_path,
            args.env_id,
            eval_episodes=10,
            run_name=f"{run_name}-eval",
            device=device,
            capture_video=args.capture_video,
            seed=args.seed,
        )
        for idx, (episodic_return, episodic_length) in enumerate(episodes):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
            writer.add_scalar("eval/episodic_length", episodic_length, idx)
        writer.flush()

        if args.upload_model:
            episodic_returns = [episodic_return for episodic_return, _ in episodes]
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval")

    envs.close()
    writer.close()
