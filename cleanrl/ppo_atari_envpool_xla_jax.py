# PPO for Atari in JAX, stepping EnvPool inside jitted code; docs: docs/ppo.md#ppo_atari_envpool_xla_jaxpy
import os
import random
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tyro
from torch.utils.tensorboard import SummaryWriter

try:
    import envpool
    import flax
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.linen.initializers import constant, orthogonal
    from flax.training.train_state import TrainState
except ModuleNotFoundError as e:
    extra = "envpool" if e.name == "envpool" else "jax"
    print(
        f"{os.path.basename(__file__)}: error: {e.name} is not installed; install the EnvPool and JAX extras with "
        "`pip install -c requirements/constraints.txt -r requirements/requirements-envpool.txt "
        f"-r requirements/requirements-jax.txt` (missing: the {extra} extra)",
        file=sys.stderr,
    )
    sys.exit(2)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
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
    clip_vloss: bool = False
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


def make_env(env_id, num_envs, seed):
    """The vector environment: EnvPool steps `num_envs` copies of the game in C++ threads, with its own Atari
    preprocessing (30 no-op starts, 4 frames per step max-pooled over the last two, a lost life ends an episode,
    FIRE on reset, rewards clipped to their sign, 84x84 grayscale frames, 4 stacked). Environment i is seeded
    with seed + i. Its xla() method gives the step as a function that jitted code can call."""
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=num_envs,  # synchronous: every step returns all environments, in order
        episodic_life=True,
        reward_clip=True,
        seed=seed,
    )


@flax.struct.dataclass
class EpisodeStatistics:
    """Score and length of the game each sub-environment is playing, over all its lives, in fixed-shape arrays
    that stay inside jitted code.

    The agent's rewards are clipped and its episodes end with every lost life, so the statistics are counted from
    what EnvPool reports beside them: info["reward"] is the unclipped reward, and a game ends with its last life
    (info["terminated"]) or with a truncation (the counters restart either way). EnvPool resets a sub-environment
    in the step after its episode ended; that step ignores the action and pays nothing, and is not counted in the
    length (EnvPool's own elapsed_step skips it too).
    """

    returns: jax.Array  # the running game of each environment
    lengths: jax.Array
    resetting: jax.Array  # this step is EnvPool's reset step
    last_returns: jax.Array  # the last finished game of each environment
    last_lengths: jax.Array
    games: jax.Array  # how many games each environment has finished

    @classmethod
    def zeros(cls, num_envs):
        return cls(
            returns=jnp.zeros(num_envs, jnp.float32),
            lengths=jnp.zeros(num_envs, jnp.int32),
            resetting=jnp.zeros(num_envs, bool),
            last_returns=jnp.zeros(num_envs, jnp.float32),
            last_lengths=jnp.zeros(num_envs, jnp.int32),
            games=jnp.zeros(num_envs, jnp.int32),
        )

    def step(self, raw_rewards, dones, game_overs):
        """Counts one step; `dones` ended the agent's episodes (lives), `game_overs` ended games. Returns the new
        statistics and the return and length of every environment's game, final where `game_overs` is set."""
        returns = self.returns + raw_rewards
        lengths = self.lengths + (~self.resetting).astype(jnp.int32)
        stats = self.replace(
            returns=jnp.where(game_overs, 0.0, returns),
            lengths=jnp.where(game_overs, 0, lengths),
            resetting=dones,
            last_returns=jnp.where(game_overs, returns, self.last_returns),
            last_lengths=jnp.where(game_overs, lengths, self.last_lengths),
            games=self.games + game_overs,
        )
        return stats, returns, lengths


class Network(nn.Module):
    """The Nature-DQN trunk, shared by the policy and the value: stacked 84x84 frames in, 512 features out."""

    @nn.compact
    def __call__(self, x):
        # x holds uint8 pixels, channels first as EnvPool gives them: scaled to [0, 1], then channels last for Flax
        x = jnp.transpose(x / 255.0, (0, 2, 3, 1))
        x = nn.Conv(32, (8, 8), (4, 4), padding="VALID", kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        x = nn.relu(x)
        x = nn.Conv(64, (4, 4), (2, 2), padding="VALID", kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        x = nn.relu(x)
        x = nn.Conv(64, (3, 3), (1, 1), padding="VALID", kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(512, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        return nn.relu(x)


class Agent(nn.Module):
    action_dim: int

    def setup(self):
        self.network = Network()
        self.actor = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))
        self.critic = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))

    def __call__(self, x):
        """The policy's logits and the value, from one pass through the shared trunk."""
        hidden = self.network(x)
        return self.actor(hidden), self.critic(hidden)[:, 0]

    def get_value(self, x):
        return self.critic(self.network(x))[:, 0]


def get_action_and_value(agent, params, x, key, action=None):
    """Samples an action (when none is given) and returns it with its log-probability, the entropy and the value."""
    logits, value = agent.apply(params, x)
    if action is None:
        action = jax.random.categorical(key, logits)  # Gumbel-max sampling, inside jit
    # log-probabilities of all actions: the chosen one's and the entropy both come from them
    logprobs = jax.nn.log_softmax(logits)
    logprob = jnp.take_along_axis(logprobs, action[:, None], axis=-1)[:, 0]
    entropy = -(jnp.exp(logprobs) * logprobs).sum(-1)
    return action, logprob, entropy, value


class Transition(NamedTuple):
    """What one step of all environments leaves in the rollout (each field has num_envs rows; stacked over steps)."""

    obs: jax.Array
    dones: jax.Array
    actions: jax.Array
    logprobs: jax.Array
    values: jax.Array
    rewards: jax.Array
    game_overs: jax.Array  # for the logs: which games ended in this step, with their return and length
    game_returns: jax.Array
    game_lengths: jax.Array


def rollout_step(params, episode_stats, handle, next_obs, next_done, key, agent, step_env):
    """One step of all environments, all inside jit: the policy samples the actions and EnvPool's XLA step plays
    them. Returns the new state of the loop and the step's Transition."""
    key, action_key = jax.random.split(key)
    action, logprob, _, value = get_action_and_value(agent, params, next_obs, action_key)
    handle, (obs, reward, terminations, truncations, info) = step_env(handle, action.astype(jnp.int32))
    dones = terminations | truncations
    # a game ends with its last life (EnvPool's info["terminated"]; `terminations` is set by every lost life)
    # or when the time limit cuts it short
    game_overs = (info["terminated"] == 1) | truncations
    episode_stats, game_returns, game_lengths = episode_stats.step(info["reward"], dones, game_overs)
    transition = Transition(next_obs, next_done, action, logprob, value, reward, game_overs, game_returns, game_lengths)
    return episode_stats, handle, obs, dones.astype(jnp.float32), key, transition


def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation over a rollout of shape (num_steps, num_envs).

    dones[t] is 1 where the step before t ended an episode: with EnvPool, obs[t] is then that episode's last
    observation and step t is the reset step, left out of the update. next_value and next_done belong to the
    observation after the last step. Returns (advantages, returns).
    """
    # the value and the not-done flag of the observation after each step, for all steps at once
    nextvalues = jnp.concatenate([values[1:], next_value[None]])
    nextnonterminal = 1.0 - jnp.concatenate([dones[1:], next_done[None]])
    deltas = rewards + gamma * nextvalues * nextnonterminal - values
    discounts = gamma * gae_lambda * nextnonterminal
    # only the backward recursion itself is a loop over time (unrolled when jitted: one copy per step)
    advantages = [None] * rewards.shape[0]
    lastgaelam = jnp.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        advantages[t] = lastgaelam = deltas[t] + discounts[t] * lastgaelam
    advantages = jnp.stack(advantages)
    return advantages, advantages + values


def compute_advantages(params, batch, next_obs, next_done, agent, gamma, gae_lambda):
    """The value of the observation after the rollout, then compute_gae; jitted as one function."""
    next_value = agent.apply(params, next_obs, method=Agent.get_value)
    return compute_gae(batch.rewards, batch.values, batch.dones, next_value, next_done, gamma, gae_lambda)


def masked_mean(x, mask):
    """The mean of x over the entries where mask is 1 (the batch keeps its shape inside jit)."""
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


class Minibatch(NamedTuple):
    obs: jax.Array
    actions: jax.Array
    logprobs: jax.Array
    advantages: jax.Array
    returns: jax.Array
    values: jax.Array
    valid: jax.Array  # 0 for EnvPool's reset steps, which take no part in the losses


class LossInfo(NamedTuple):
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    old_approx_kl: jax.Array
    approx_kl: jax.Array
    clipfrac: jax.Array


def ppo_loss(params, agent, mb, clip_coef, clip_vloss, ent_coef, vf_coef, norm_adv):
    """The PPO loss of a minibatch (to minimise) and its debug statistics, as means over its valid samples."""
    _, newlogprob, entropy, newvalue = get_action_and_value(agent, params, mb.obs, None, mb.actions)
    w = mb.valid
    logratio = newlogprob - mb.logprobs
    ratio = jnp.exp(logratio)

    advantages = mb.advantages
    if norm_adv:
        mean = masked_mean(advantages, w)
        std = jnp.sqrt((w * (advantages - mean) ** 2).sum() / jnp.maximum(w.sum() - 1.0, 1.0))  # unbiased
        advantages = (advantages - mean) / (std + 1e-8)

    # clipped surrogate objective
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * jnp.clip(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = masked_mean(jnp.maximum(pg_loss1, pg_loss2), w)

    # half the mean squared error of the value, clipped around the rollout's value when clip_vloss is on
    v_loss_unclipped = (newvalue - mb.returns) ** 2
    if clip_vloss:
        v_clipped = mb.values + jnp.clip(newvalue - mb.values, -clip_coef, clip_coef)
        v_loss_unclipped = jnp.maximum(v_loss_unclipped, (v_clipped - mb.returns) ** 2)
    v_loss = 0.5 * masked_mean(v_loss_unclipped, w)

    entropy_loss = masked_mean(entropy, w)
    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
    info = LossInfo(
        pg_loss,
        v_loss,
        entropy_loss,
        jax.lax.stop_gradient(masked_mean(-logratio, w)),
        jax.lax.stop_gradient(masked_mean((ratio - 1) - logratio, w)),
        jax.lax.stop_gradient(masked_mean((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32), w)),
    )
    return loss, info


def update(
    agent_state,
    batch,
    advantages,
    returns,
    key,
    learning_rate,
    agent,
    update_epochs,
    num_minibatches,
    target_kl,
    loss_kwargs,
):
    """The update epochs over the rollout, jitted as one function; the Python loops over epochs and minibatches
    are unrolled into it. Returns the new state, the LossInfo of the last minibatch (its clipfrac: the mean over all
    minibatches) and the key."""
    # the annealed learning rate goes into the optimizer state that optax.inject_hyperparams keeps for it
    agent_state = agent_state.replace(
        opt_state=optax.tree_utils.tree_set(agent_state.opt_state, learning_rate=learning_rate)
    )
    # flatten the batch
    b = Minibatch(batch.obs, batch.actions, batch.logprobs, advantages, returns, batch.values, 1.0 - batch.dones)
    b = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), b)
    batch_size = b.actions.shape[0]
    minibatch_size = batch_size // num_minibatches
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def run_epoch(agent_state, epoch_key):
        # shuffle the whole batch once per epoch, so each minibatch below is a slice
        permutation = jax.random.permutation(epoch_key, batch_size)
        shuffled = jax.tree.map(lambda x: x[permutation], b)
        clipfracs = []
        for start in range(0, batch_size, minibatch_size):
            mb = jax.tree.map(lambda x: x[start : start + minibatch_size], shuffled)
            (_, info), grads = grad_fn(agent_state.params, agent, mb, **loss_kwargs)
            # global-norm clipping and Adam are the two links of the optax chain
            agent_state = agent_state.apply_gradients(grads=grads)
            clipfracs.append(info.clipfrac)
        return agent_state, info, jnp.stack(clipfracs).sum()

    clipfrac_sum, num_run, stop = 0.0, 0, jnp.bool_(False)
    for epoch in range(update_epochs):
        key, epoch_key = jax.random.split(key)
        if target_kl is None or epoch == 0:
            agent_state, info, epoch_clipfrac = run_epoch(agent_state, epoch_key)
            epoch_run = 1
        else:
            # early stopping inside jit: the later epochs still exist in the program, but leave everything as it is
            agent_state, info, epoch_clipfrac, epoch_run = jax.lax.cond(
                stop,
                lambda s, i, k: (s, i, jnp.float32(0.0), jnp.int32(0)),
                lambda s, i, k: (*run_epoch(s, k), jnp.int32(1)),
                agent_state,
                info,
                epoch_key,
            )
        clipfrac_sum, num_run = clipfrac_sum + epoch_clipfrac, num_run + epoch_run
        if target_kl is not None:
            stop = stop | (info.approx_kl > target_kl)
    info = info._replace(clipfrac=clipfrac_sum / (num_run * num_minibatches))
    return agent_state, info, key


def explained_variance(y_pred, y_true):
    """1 - Var[y_true - y_pred] / Var[y_true]; NaN when the targets do not vary."""
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y


def save_model(path, args, params):
    """Writes the arguments and the Flax parameters, the two things needed to act as trained, in one file."""
    with open(path, "wb") as f:
        f.write(flax.serialization.to_bytes([vars(args), params]))


def load_model(path, agent, obs_shape):
    """Reads what save_model wrote: (the arguments as a dict, the parameters checked against the Agent's)."""
    with open(path, "rb") as f:
        saved_args, saved_params = flax.serialization.msgpack_restore(f.read()).values()
    template = agent.init(jax.random.PRNGKey(0), np.zeros((1, *obs_shape), np.uint8))
    return saved_args, flax.serialization.from_state_dict(template, saved_params)


def evaluate(model_path, env_id, eval_episodes, seed=1):
    """Loads a saved model and plays `eval_episodes` episodes with it; returns their returns."""
    envs = make_env(env_id, 1, seed)
    agent = Agent(action_dim=envs.single_action_space.n)
    _, params = load_model(model_path, agent, envs.single_observation_space.shape)
    handle, _, _, step_env = envs.xla()
    step = jax.jit(partial(rollout_step, agent=agent, step_env=step_env))
    episode_stats = EpisodeStatistics.zeros(1)
    next_obs, _ = envs.reset()
    next_done = jnp.zeros(1)
    key = jax.random.PRNGKey(seed)
    episodic_returns = []
    # an evaluation episode is a whole game, over all its lives
    while len(episodic_returns) < eval_episodes:
        episode_stats, handle, next_obs, next_done, key, transition = step(
            params, episode_stats, handle, next_obs, next_done, key
        )
        if transition.game_overs[0]:
            episodic_return = float(transition.game_returns[0])
            print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
            episodic_returns.append(episodic_return)
    envs.close()
    return episodic_returns


def hub_repo_id(hf_entity, env_id, exp_name, seed):
    return f"{hf_entity}/{env_id}-{exp_name}-seed{seed}"


def stage_hub_folder(folder, args, episodic_returns, run_dir, video_dir):
    """Writes what the Hub repository holds into `folder`: the model, the TensorBoard logs,
    this script, a model card and the last evaluation video (where there is one)."""
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
The model is `{args.exp_name}.cleanrl_model`: `flax.serialization.to_bytes([args, params])`, the arguments as a
dict and the Flax parameters of the script's `Agent` (its `load_model` reads it back).

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
    envs = make_env(args.env_id, args.num_envs, args.seed)
    # the XLA interface: a handle to the environments, and their step as a function jitted code can call
    handle, recv, send, step_env = envs.xla()

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
    key = jax.random.PRNGKey(args.seed)
    key, init_key = jax.random.split(key)

    agent = Agent(action_dim=envs.single_action_space.n)
    next_obs, _ = envs.reset()
    # global-norm gradient clipping, then Adam with epsilon 1e-5 and its learning rate injected as a
    # hyperparameter, so each iteration can set the annealed rate
    agent_state = TrainState.create(
        apply_fn=agent.apply,
        params=agent.init(init_key, next_obs),
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(learning_rate=args.learning_rate, eps=1e-5),
        ),
    )

    # the three jitted functions; the settings they are built for are fixed, so each compiles once
    rollout_step_fn = jax.jit(partial(rollout_step, agent=agent, step_env=step_env))
    advantages_fn = jax.jit(partial(compute_advantages, agent=agent, gamma=args.gamma, gae_lambda=args.gae_lambda))
    update_fn = jax.jit(
        partial(
            update,
            agent=agent,
            update_epochs=args.update_epochs,
            num_minibatches=args.num_minibatches,
            target_kl=args.target_kl,
            loss_kwargs=dict(
                clip_coef=args.clip_coef,
                clip_vloss=args.clip_vloss,
                ent_coef=args.ent_coef,
                vf_coef=args.vf_coef,
                norm_adv=args.norm_adv,
            ),
        )
    )

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = 0.0
    recent_returns = deque(maxlen=100)
    episode_stats = EpisodeStatistics.zeros(args.num_envs)
    next_done = jnp.zeros(args.num_envs, jnp.float32)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        lrnow = args.learning_rate
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate

        # Rollout: one jitted call per step samples the actions and steps the environments, without leaving XLA
        transitions = []
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            episode_stats, handle, next_obs, next_done, key, transition = rollout_step_fn(
                agent_state.params, episode_stats, handle, next_obs, next_done, key
            )
            transitions.append(transition)
        batch = jax.tree.map(lambda *steps: jnp.stack(steps), *transitions)

        # bootstrap value if not done
        advantages, returns = advantages_fn(agent_state.params, batch, next_obs, next_done)

        # Optimizing the policy and value network
        agent_state, info, key = update_fn(agent_state, batch, advantages, returns, key, jnp.float32(lrnow))

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        # the finished games, read back from the rollout once per iteration: each at the step it ended
        game_overs, game_returns, game_lengths, dones, values, returns, info, stats = jax.device_get(
            (
                batch.game_overs,
                batch.game_returns,
                batch.game_lengths,
                batch.dones,
                batch.values,
                returns,
                info,
                episode_stats,
            )
        )
        iteration_start = global_step - args.batch_size
        for step, env in zip(*np.nonzero(game_overs)):
            step_of_game = iteration_start + (step + 1) * args.num_envs
            writer.add_scalar("charts/episodic_return", game_returns[step, env], step_of_game)
            writer.add_scalar("charts/episodic_length", game_lengths[step, env], step_of_game)
            recent_returns.append(float(game_returns[step, env]))
        if stats.games.any():
            # the fixed-shape summary: the last finished game of each environment that has finished one
            writer.add_scalar("charts/avg_episodic_return", stats.last_returns[stats.games > 0].mean(), global_step)
            writer.add_scalar("charts/avg_episodic_length", stats.last_lengths[stats.games > 0].mean(), global_step)
        valid = dones.reshape(-1) == 0
        explained_var = explained_variance(values.reshape(-1)[valid], returns.reshape(-1)[valid])

        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", lrnow, global_step)
        writer.add_scalar("losses/value_loss", info.value_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", info.policy_loss.item(), global_step)
        writer.add_scalar("losses/entropy", info.entropy.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", info.old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", info.approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", info.clipfrac.item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if iteration == 1:
            # the first iteration includes compiling the three jitted functions
            first_iteration_seconds = time.time() - start_time
            writer.add_scalar("charts/first_iteration_seconds", first_iteration_seconds, global_step)
            print(f"first iteration, compilation included: {first_iteration_seconds:.1f} s", flush=True)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):
            last_print = time.time()
            print(progress_line(global_step, args.total_timesteps, sps, recent_returns), flush=True)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        save_model(model_path, args, agent_state.params)
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(model_path, args.env_id, eval_episodes=10, seed=args.seed)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        writer.flush()

        if args.upload_model:
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval")

    envs.close()
    writer.close()
