# PPO in JAX on Atari games that EnvPool steps inside jitted code; explained in docs/ppo.md#ppo_atari_envpool_xla_jaxpy
# Follows CleanRL's ppo_atari_envpool_xla_jax.py (MIT licence, (c) 2019 CleanRL developers); see CREDITS.md
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
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
    missing = f"{e.name} is missing; run `bash scripts/setup.sh {extra}` in a clone of this project"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
    sys.exit(2)

# The reference's settings for XLA on a GPU, read when JAX first computes: preallocate at most 60% of the GPU's memory
# (the default, 75%, ran out in some runs); the last two are TensorFlow's names for deterministic kernels
os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.6"
os.environ["TF_XLA_FLAGS"] = "--xla_gpu_autotune_level=2 --xla_gpu_deterministic_reductions"
os.environ["TF_CUDNN DETERMINISTIC"] = "1"


@dataclass
class Args:
    exp_name: str = Path(__file__).stem
    """name of the experiment, part of the run's folder name (the script's file name by default)"""
    seed: int = 1
    """seed for Python, NumPy, JAX's random keys and the environments (environment i gets seed + i)"""
    track: bool = False
    """also log the run to Weights & Biases"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run goes to"""
    wandb_entity: str | None = None
    """Weights & Biases team or user that owns the project (None: your default)"""
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
    clip_vloss: bool = False  # off: the reference's default said on, but its loss never clipped
    """clip the value function's change too, as the PPO paper's code does"""
    ent_coef: float = 0.01
    """weight of the entropy bonus, which keeps the policy exploring"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.5
    """largest gradient norm allowed; larger gradients are scaled down to it"""

    # computed from the flags above once they are parsed
    batch_size: tyro.conf.Suppress[int] = 0
    """transitions per rollout: num_envs x num_steps"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """transitions per gradient step: batch_size / num_minibatches"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """rollouts in the run, each followed by an update: total_timesteps / batch_size"""


def make_env(env_id, num_envs, seed):
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
    )
    return envs


def finished_episodes(episodes, global_step):
    """[(step, return, length)] of the games that ended in a rollout: episodes holds the EpisodeStatistics after each
    of its steps, stacked (a game's length is 0 after the step that ends it); global_step is its last step's."""
    num_steps, num_envs = episodes.episode_lengths.shape
    finished = []
    for step, env in zip(*np.nonzero(episodes.episode_lengths == 0)):
        episode_step = global_step - (num_steps - 1 - step) * num_envs
        episodic_return = episodes.returned_episode_returns[step, env].item()
        finished.append((episode_step, episodic_return, episodes.returned_episode_lengths[step, env].item()))
    return finished


def layer_init(std=np.sqrt(2), bias=0.0):
    """Orthogonal weights scaled by `std`, constant biases: PPO's usual start, which matters for how it learns."""
    return dict(kernel_init=orthogonal(std), bias_init=constant(bias))


class Network(nn.Module):
    """One convolutional network reads the 4 stacked frames (the Nature DQN's layers); the actor and the critic are
    two linear heads on its 512 features."""

    @nn.compact
    def __call__(self, obs):
        hidden = jnp.transpose(obs, (0, 2, 3, 1))  # Flax's convolutions want the 4 frames last
        hidden = hidden / 255.0  # pixels scaled to [0, 1]
        hidden = nn.Conv(32, kernel_size=(8, 8), strides=(4, 4), padding="VALID", **layer_init())(hidden)
        hidden = nn.relu(hidden)
        hidden = nn.Conv(64, kernel_size=(4, 4), strides=(2, 2), padding="VALID", **layer_init())(hidden)
        hidden = nn.relu(hidden)
        hidden = nn.Conv(64, kernel_size=(3, 3), strides=(1, 1), padding="VALID", **layer_init())(hidden)
        hidden = nn.relu(hidden)
        hidden = hidden.reshape((hidden.shape[0], -1))  # 7 x 7 pixels of 64 maps
        hidden = nn.Dense(512, **layer_init())(hidden)
        return nn.relu(hidden)


class Critic(nn.Module):
    @nn.compact
    def __call__(self, hidden):
        return nn.Dense(1, **layer_init(std=1))(hidden)


class Actor(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, hidden):
        # a small last layer: every action starts about equally likely
        return nn.Dense(self.action_dim, **layer_init(std=0.01))(hidden)


@flax.struct.dataclass
class AgentParams:
    """The three modules' parameters, which the optimizer updates as one tree."""

    network_params: flax.core.FrozenDict
    actor_params: flax.core.FrozenDict
    critic_params: flax.core.FrozenDict

    def __contains__(self, key):  # Flax 0.12's TrainState looks for an "overwrite_with_gradient" entry: there is none
        return False


@flax.struct.dataclass
class Storage:
    """The rollout's arrays, indexed [step, environment]: what the policy saw and did, and GAE's results."""

    obs: jnp.array
    actions: jnp.array
    logprobs: jnp.array
    dones: jnp.array
    values: jnp.array
    advantages: jnp.array
    returns: jnp.array
    rewards: jnp.array


@flax.struct.dataclass
class EpisodeStatistics:
    """Whole games, counted inside XLA: the return and length of each environment's game under way, and of its last
    finished one."""

    episode_returns: jnp.array
    episode_lengths: jnp.array
    returned_episode_returns: jnp.array
    returned_episode_lengths: jnp.array


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
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        return f"--num-minibatches {args.num_minibatches} must divide --num-envs x --num-steps = {batch_size}"
    if batch_size > args.total_timesteps:
        return f"--num-envs x --num-steps = {batch_size} must be at most --total-timesteps {args.total_timesteps}"
    if args.upload_model and not args.save_model:
        return "--upload-model uploads the saved model: add --save-model"
    if args.resume_changed_code and not args.resume:
        return "--resume-changed-code goes with --resume: give the run folder to go on with"


# no run_name, device or capture_video: JAX places its arrays itself, and the script records no video
def evaluate(model_path, env_id, eval_episodes, seed):
    """Plays `eval_episodes` whole games with a saved model; returns their returns."""
    envs = make_env(env_id, 1, seed)
    network = Network()
    actor = Actor(action_dim=envs.single_action_space.n)
    critic = Critic()
    obs, _ = envs.reset()
    key = jax.random.PRNGKey(seed)
    network_params = network.init(key, obs)
    hidden = network.apply(network_params, obs)
    params = [network_params, actor.init(key, hidden), critic.init(key, hidden)]  # the saved ones' shapes
    with open(model_path, "rb") as f:
        _, (network_params, actor_params, _) = flax.serialization.from_bytes([None, params], f.read())
    get_logits = jax.jit(lambda obs: actor.apply(actor_params, network.apply(network_params, obs)))
    episodic_returns = []
    episodic_return = 0.0
    while len(episodic_returns) < eval_episodes:
        key, subkey = jax.random.split(key)
        action = jax.random.categorical(subkey, get_logits(obs))
        obs, _, _, truncated, info = envs.step(np.asarray(action))
        episodic_return += info["reward"][0]
        if info["terminated"][0] or truncated[0]:  # the game's last life, or its time limit
            print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
            episodic_returns.append(episodic_return)
            episodic_return = 0.0
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
    envs = make_env(args.env_id, args.num_envs, args.seed)
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

    # One seed for every random number: Python's, NumPy's and JAX's keys (weights, sampled actions, minibatch order).
    random.seed(args.seed)
    np.random.seed(args.seed)
    jax.config.update("jax_threefry_partitionable", False)  # JAX 0.4's random numbers, the reference's
    key = jax.random.PRNGKey(args.seed)
    key, network_key, actor_key, critic_key = jax.random.split(key, 4)

    # EnvPool's step as an XLA operation, which jitted code calls: the rollout runs as one compiled program. The games'
    # statistics are JAX arrays, updated in that program.
    episode_stats = EpisodeStatistics(
        episode_returns=jnp.zeros(args.num_envs, dtype=jnp.float32),
        episode_lengths=jnp.zeros(args.num_envs, dtype=jnp.int32),
        returned_episode_returns=jnp.zeros(args.num_envs, dtype=jnp.float32),
        returned_episode_lengths=jnp.zeros(args.num_envs, dtype=jnp.int32),
    )
    handle, _, _, step_env = envs.xla()

    def step_env_wrappeed(episode_stats, handle, action):
        """One step of every environment, and its games' statistics: a game sums EnvPool's unclipped
        info["reward"] until info["terminated"] (its last life) or the time limit."""
        handle, (obs, reward, terminated, truncated, info) = step_env(handle, action)
        done = terminated | truncated  # a time limit ends an episode as a termination does
        new_return = episode_stats.episode_returns + info["reward"]
        new_length = episode_stats.episode_lengths + 1
        game_over = info["terminated"] + truncated
        episode_stats = episode_stats.replace(
            episode_returns=new_return * (1 - info["terminated"]) * (1 - truncated),
            episode_lengths=new_length * (1 - info["terminated"]) * (1 - truncated),
            # the last finished game's, replaced only when another one ends
            returned_episode_returns=jnp.where(game_over, new_return, episode_stats.returned_episode_returns),
            returned_episode_lengths=jnp.where(game_over, new_length, episode_stats.returned_episode_lengths),
        )
        return episode_stats, handle, (obs, reward, done, info)

    def linear_schedule(count):
        """The learning rate after `count` gradient steps: from --learning-rate in the first iteration down towards 0
        in the last, one step down per iteration (num_minibatches x update_epochs gradient steps)."""
        remaining = 1.0 - (count // (args.num_minibatches * args.update_epochs)) / args.num_iterations
        return args.learning_rate * remaining

    network = Network()
    actor = Actor(action_dim=action_space.n)
    critic = Critic()
    example = np.array([obs_space.sample()])  # only its shape matters to the initial weights
    network_params = network.init(network_key, example)
    hidden = network.apply(network_params, example)
    agent_state = TrainState.create(
        apply_fn=None,
        params=AgentParams(network_params, actor.init(actor_key, hidden), critic.init(critic_key, hidden)),
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(
                learning_rate=linear_schedule if args.anneal_lr else args.learning_rate, eps=1e-5
            ),
        ),
    )
    network.apply = jax.jit(network.apply)
    actor.apply = jax.jit(actor.apply)
    critic.apply = jax.jit(critic.apply)

    # What one rollout collects, step by step and environment by environment.
    steps_by_envs = (args.num_steps, args.num_envs)
    storage = Storage(
        obs=jnp.zeros(steps_by_envs + obs_space.shape),
        actions=jnp.zeros(steps_by_envs + action_space.shape, dtype=jnp.int32),
        logprobs=jnp.zeros(steps_by_envs),
        dones=jnp.zeros(steps_by_envs),
        values=jnp.zeros(steps_by_envs),
        advantages=jnp.zeros(steps_by_envs),
        returns=jnp.zeros(steps_by_envs),
        rewards=jnp.zeros(steps_by_envs),
    )

    @jax.jit
    def get_action_and_value(agent_state, obs, done, storage, step, key):
        """Samples every environment's action and stores it at `step`, with `obs`, `done`, its log-probability and
        the critic's value."""
        hidden = network.apply(agent_state.params.network_params, obs)
        logits = actor.apply(agent_state.params.actor_params, hidden)
        # a categorical sample: the action whose logit plus Gumbel noise, -log(-log(u)), is largest
        key, subkey = jax.random.split(key)
        u = jax.random.uniform(subkey, shape=logits.shape)
        action = jnp.argmax(logits - jnp.log(-jnp.log(u)), axis=1)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        value = critic.apply(agent_state.params.critic_params, hidden)
        storage = storage.replace(
            obs=storage.obs.at[step].set(obs),
            dones=storage.dones.at[step].set(done),
            actions=storage.actions.at[step].set(action),
            logprobs=storage.logprobs.at[step].set(logprob),
            values=storage.values.at[step].set(value.squeeze()),
        )
        return storage, action, key

    @jax.jit
    def get_logprob_entropy_value(params, obs, action):
        """The policy as `params` has it on the actions given: their log-probabilities, the entropy, the value."""
        hidden = network.apply(params.network_params, obs)
        logits = actor.apply(params.actor_params, hidden)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        # the entropy from the log-probabilities (the logits less their log-sum-exp), kept finite where one is -inf
        log_p = logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)
        log_p = log_p.clip(min=jnp.finfo(log_p.dtype).min)
        entropy = -(log_p * jax.nn.softmax(log_p)).sum(-1)
        value = critic.apply(params.critic_params, hidden).squeeze()
        return logprob, entropy, value

    @jax.jit
    def compute_gae(agent_state, obs, done, storage):
        """Generalized advantage estimation, from the last step back to the first. Each step's TD error compares
        the reward plus the discounted value of the next observation with the value of this one; the advantage
        sums those errors discounted by gamma x lambda, and an episode's end cuts the sum and the next value."""
        storage = storage.replace(advantages=storage.advantages.at[:].set(0.0))
        hidden = network.apply(agent_state.params.network_params, obs)
        next_value = critic.apply(agent_state.params.critic_params, hidden).squeeze()
        gae = 0  # the advantage of the step after t
        for t in reversed(range(args.num_steps)):
            if t == args.num_steps - 1:
                not_done = 1.0 - done
                value_after = next_value
            else:
                not_done = 1.0 - storage.dones[t + 1]
                value_after = storage.values[t + 1]
            td_error = storage.rewards[t] + args.gamma * value_after * not_done - storage.values[t]
            gae = td_error + args.gamma * args.gae_lambda * not_done * gae
            storage = storage.replace(advantages=storage.advantages.at[t].set(gae))
        # what the critic should have said: the value it gave plus how much better things went
        storage = storage.replace(returns=storage.advantages + storage.values)
        return storage

    @jax.jit
    def update_ppo(agent_state, storage, key):
        """update_epochs passes over the batch, each in shuffled minibatches, one gradient step per minibatch; returns
        the new state, the last minibatch's losses and the key."""
        # The rollout as one batch of num_steps x num_envs transitions.
        batch_obs = storage.obs.reshape((-1,) + obs_space.shape)
        batch_logprobs = storage.logprobs.reshape(-1)
        batch_actions = storage.actions.reshape((-1,) + action_space.shape)
        batch_advantages = storage.advantages.reshape(-1)
        batch_returns = storage.returns.reshape(-1)
        batch_values = storage.values.reshape(-1)

        def ppo_loss(params, obs, actions, logprobs, adv, target, old_value):
            """The loss of one minibatch, and what is logged of it."""
            # the policy as it is now, on the actions the rollout took
            new_logprob, entropy, new_value = get_logprob_entropy_value(params, obs, actions)
            log_ratio = new_logprob - logprobs
            ratio = jnp.exp(log_ratio)  # new probability / probability when acting

            # two estimates of the KL divergence from the acting policy (http://joschu.net/blog/kl-approx.html)
            old_approx_kl = (-log_ratio).mean()
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clip_fraction = (jnp.abs(ratio - 1.0) > args.clip_coef).mean()

            if args.norm_adv:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)

            # Clipped surrogate objective, negated into a loss: the pessimistic one of the plain and the
            # clipped ratio times the advantage, so that no step gains by pushing the ratio past 1 +- clip_coef.
            surrogate = -adv * ratio
            clipped_surrogate = -adv * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
            policy_loss = jnp.maximum(surrogate, clipped_surrogate).mean()

            # Value loss: squared error to the returns, with the change from the rollout's value clipped alike.
            if args.clip_vloss:
                error = (new_value - target) ** 2
                value_clipped = old_value + jnp.clip(new_value - old_value, -args.clip_coef, args.clip_coef)
                error_clipped = (value_clipped - target) ** 2
                worse = jnp.maximum(error, error_clipped)
                value_loss = 0.5 * worse.mean()
            else:
                value_loss = 0.5 * ((new_value - target) ** 2).mean()

            entropy_bonus = entropy.mean()
            loss = policy_loss - args.ent_coef * entropy_bonus + value_loss * args.vf_coef
            approx_kl = jax.lax.stop_gradient(approx_kl)
            return loss, (policy_loss, value_loss, entropy_bonus, approx_kl, old_approx_kl, clip_fraction)

        loss_and_grads = jax.value_and_grad(ppo_loss, has_aux=True)
        for epoch in range(args.update_epochs):
            key, subkey = jax.random.split(key)
            order = jax.random.permutation(subkey, args.batch_size, independent=True)
            for start in range(0, args.batch_size, args.minibatch_size):
                stop = start + args.minibatch_size
                minibatch = order[start:stop]
                (loss, logged), grads = loss_and_grads(
                    agent_state.params,
                    batch_obs[minibatch],
                    batch_actions[minibatch],
                    batch_logprobs[minibatch],
                    batch_advantages[minibatch],
                    batch_returns[minibatch],
                    batch_values[minibatch],
                )
                agent_state = agent_state.apply_gradients(grads=grads)  # clips the gradient's norm, then Adam's step
        policy_loss, value_loss, entropy_bonus, approx_kl, old_approx_kl, clip_fraction = logged
        return agent_state, loss, policy_loss, value_loss, entropy_bonus, approx_kl, key, old_approx_kl, clip_fraction

    @jax.jit
    def rollout(agent_state, episode_stats, obs, done, storage, key, handle, global_step):
        """Rollout: the current policy plays num_steps steps in every environment. Also returns the games'
        statistics after each step, stacked, for finished_episodes."""
        episodes = []
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            storage, action, key = get_action_and_value(agent_state, obs, done, storage, step, key)
            episode_stats, handle, (obs, reward, done, _) = step_env_wrappeed(episode_stats, handle, action)
            storage = storage.replace(rewards=storage.rewards.at[step].set(reward))
            episodes.append(episode_stats)
        episodes = jax.tree.map(lambda *stats: jnp.stack(stats), *episodes)
        return agent_state, episode_stats, obs, done, storage, key, handle, global_step, episodes

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    # `obs` is what the agent acts on next; `done` says whether it opens a new episode
    obs, _ = envs.reset()  # EnvPool seeded the games when it made them
    done = np.zeros(args.num_envs)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, obs, agent_state, key, episode_stats = checkpoint.restore_jax(
            envs, agent_state, key, episode_stats
        )

    # the learning rate needs no setting here: linear_schedule gives the optimizer the iteration's rate
    for iteration in range(first_iteration, args.num_iterations + 1):
        iteration_start = time.time()
        agent_state, episode_stats, obs, done, storage, key, handle, global_step, episodes = rollout(
            agent_state, episode_stats, obs, done, storage, key, handle, global_step
        )
        for episode_step, episodic_return, episodic_length in finished_episodes(jax.device_get(episodes), global_step):
            writer.add_scalar("charts/episodic_return", episodic_return, episode_step)
            writer.add_scalar("charts/episodic_length", episodic_length, episode_step)
            recent_returns.append(episodic_return)

        storage = compute_gae(agent_state, obs, done, storage)

        agent_state, loss, policy_loss, value_loss, entropy_bonus, approx_kl, key, old_approx_kl, clip_fraction = (
            update_ppo(agent_state, storage, key)
        )

        # how much of the returns' variance the critic's values explained before the update (1: all of it)
        predicted = np.asarray(storage.values).reshape(-1)
        actual = np.asarray(storage.returns).reshape(-1)
        actual_variance = np.var(actual)
        explained_var = np.nan if actual_variance == 0 else 1 - np.var(actual - predicted) / actual_variance

        # The iteration's figures, from its last minibatch (the KL, the losses, the clip fraction), and the mean over
        # the environments of the return and length of their last finished games.
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar(
            "charts/avg_episodic_return", np.mean(jax.device_get(episode_stats.returned_episode_returns)), global_step
        )
        writer.add_scalar(
            "charts/avg_episodic_length", np.mean(jax.device_get(episode_stats.returned_episode_lengths)), global_step
        )
        writer.add_scalar(
            "charts/learning_rate", agent_state.opt_state[1].hyperparams["learning_rate"].item(), global_step
        )
        writer.add_scalar("losses/value_loss", value_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", policy_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_bonus.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", clip_fraction.item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("losses/loss", loss.item(), global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        update_sps = int(args.batch_size / (time.time() - iteration_start))  # this iteration's alone
        writer.add_scalar("charts/SPS_update", update_sps, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
        if args.checkpoint_every or args.resume:  # every --checkpoint-every iterations, the last one, and on a signal
            checkpoint.save_jax(iteration, global_step, start_time, writer, envs, agent_state, key, episode_stats)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        trained = [agent_state.params.network_params, agent_state.params.actor_params, agent_state.params.critic_params]
        with open(model_path, "wb") as f:  # the arguments, then the three modules' parameters
            f.write(flax.serialization.to_bytes([vars(args), trained]))
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(model_path, args.env_id, 10, args.seed)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            weights = "flax-serialized parameters of the script's networks"
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__, weights)

    if args.checkpoint_every or args.resume:  # finished once the model is saved, evaluated and uploaded
        checkpoint.finish()

    envs.close()
    writer.close()
