# docs and experiment results can be found at https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_atari_envpool_xla_jaxpy
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

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
    missing = f"{e.name} is missing; pip install -r requirements/requirements-{extra}.txt"
    print(f"{os.path.basename(__file__)}: error: {missing}", file=sys.stderr)
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
    exclude_reset_steps: bool = False
    """leave EnvPool's reset steps out of the update (their action is ignored and their reward is 0)"""

    # to be filled in runtime
    batch_size: tyro.conf.Suppress[int] = 0
    """the batch size (computed in runtime)"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """the number of iterations (computed in runtime)"""


@flax.struct.dataclass
class EpisodeStatistics:
    """Whole games, though an episode ends at every lost life and rewards are clipped: a game sums EnvPool's unclipped
    info["reward"] until info["terminated"] (its last life) or the time limit, and lasts as many steps as were taken
    since the previous game ended, EnvPool's reset steps included. Fixed-shape arrays with one entry per environment,
    so that jitted code can step them."""

    episode_returns: jax.Array  # the score and length of each environment's running game
    episode_lengths: jax.Array
    returned_episode_returns: jax.Array  # the score and length of its last finished game
    returned_episode_lengths: jax.Array

    def step(self, infos, truncations):
        """The statistics after a step, and its infos with the games that ended in it."""
        episode_returns = self.episode_returns + infos["reward"]
        episode_lengths = self.episode_lengths + 1
        ended = jnp.logical_or(infos["terminated"], truncations)
        infos["episode"] = {"r": episode_returns, "l": episode_lengths}
        infos["_episode"] = ended
        stats = EpisodeStatistics(
            episode_returns=jnp.where(ended, 0.0, episode_returns),
            episode_lengths=jnp.where(ended, 0, episode_lengths),
            returned_episode_returns=jnp.where(ended, episode_returns, self.returned_episode_returns),
            returned_episode_lengths=jnp.where(ended, episode_lengths, self.returned_episode_lengths),
        )
        return stats, infos


def no_episodes(num_envs):
    """The statistics before the first step: no game played yet."""
    return EpisodeStatistics(
        episode_returns=jnp.zeros(num_envs, dtype=jnp.float32),
        episode_lengths=jnp.zeros(num_envs, dtype=jnp.int32),
        returned_episode_returns=jnp.zeros(num_envs, dtype=jnp.float32),
        returned_episode_lengths=jnp.zeros(num_envs, dtype=jnp.int32),
    )


def make_env(env_id, num_envs, seed):
    # EnvPool's Atari preprocessing: 30 no-op starts, 4 frames a step, FIRE on reset, 84x84 grayscale, 4 stacked
    envs = envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=seed,  # environment i gets seed + i
    )
    return envs


def finished_episodes(infos):
    """[(return, length)] of the games that ended in this step (set by EpisodeStatistics)."""
    ended = np.flatnonzero(infos["_episode"])
    return list(zip(infos["episode"]["r"][ended].tolist(), infos["episode"]["l"][ended].tolist()))


def layer_init(layer, *args, std=np.sqrt(2), bias_const=0.0, **kwargs):
    return layer(*args, kernel_init=orthogonal(std), bias_init=constant(bias_const), **kwargs)


class Network(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x.transpose(0, 2, 3, 1)  # EnvPool's frames are channels first, Flax's convolutions want last
        x = layer_init(nn.Conv, 32, kernel_size=(8, 8), strides=(4, 4), padding="VALID")(x)
        x = nn.relu(x)
        x = layer_init(nn.Conv, 64, kernel_size=(4, 4), strides=(2, 2), padding="VALID")(x)
        x = nn.relu(x)
        x = layer_init(nn.Conv, 64, kernel_size=(3, 3), strides=(1, 1), padding="VALID")(x)
        x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = layer_init(nn.Dense, 512)(x)
        x = nn.relu(x)
        return x


class Actor(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        return layer_init(nn.Dense, self.action_dim, std=0.01)(x)


class Critic(nn.Module):
    @nn.compact
    def __call__(self, x):
        return layer_init(nn.Dense, 1, std=1)(x)


class AgentParams(NamedTuple):
    network_params: dict
    actor_params: dict
    critic_params: dict


class Agent:
    """The shared trunk and the two heads as three Flax modules, each with its own parameters (AgentParams)."""

    def __init__(self, action_dim):
        self.network = Network()
        self.actor = Actor(action_dim=action_dim)
        self.critic = Critic()

    def init(self, network_key, actor_key, critic_key, x):
        """The parameters of the three modules, each initialised from its own key."""
        network_params = self.network.init(network_key, x)
        hidden = self.network.apply(network_params, x)
        return AgentParams(network_params, self.actor.init(actor_key, hidden), self.critic.init(critic_key, hidden))

    def get_value(self, params, x):
        hidden = self.network.apply(params.network_params, x / 255.0)
        return self.critic.apply(params.critic_params, hidden)[:, 0]

    def get_action_and_value(self, params, x, key, action=None):
        hidden = self.network.apply(params.network_params, x / 255.0)
        logits = self.actor.apply(params.actor_params, hidden)
        if action is None:
            action = jax.random.categorical(key, logits)  # the argmax of the logits plus Gumbel noise
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        # the entropy -sum(p log p), with log p the logits normalised by their log-sum-exp
        logits = logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)
        entropy = -(logits * jax.nn.softmax(logits)).sum(-1)
        return action, logprob, entropy, self.critic.apply(params.critic_params, hidden)[:, 0]


@partial(jax.jit, static_argnums=(5, 6))
def compute_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation over (num_steps, num_envs); returns (advantages, returns). dones[t] is 1 where
    the step before t ended an episode; next_value and next_done belong to the observation after the last step."""
    advantages = jnp.zeros_like(rewards)
    lastgaelam = 0
    num_steps = rewards.shape[0]
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        advantages = advantages.at[t].set(lastgaelam)
    return advantages, advantages + values


def masked_mean(x, valid):
    """The mean of x over the samples where valid is 1, or over all of them where valid is None. EnvPool's reset
    steps, left out with --exclude-reset-steps, stay in the fixed-shape minibatches with valid 0."""
    if valid is None:
        return x.mean()
    return (x * valid).sum() / jnp.maximum(valid.sum(), 1.0)


def policy_loss(newlogprob, oldlogprob, advantages, clip_coef, valid):
    """Clipped surrogate objective (to minimise), with old_approx_kl (k1), approx_kl (k3) and the clipped fraction."""
    logratio = newlogprob - oldlogprob
    ratio = jnp.exp(logratio)
    # calculate approx_kl http://joschu.net/blog/kl-approx.html
    old_approx_kl = masked_mean(-logratio, valid)
    approx_kl = masked_mean((ratio - 1) - logratio, valid)
    clipfrac = masked_mean(jnp.abs(ratio - 1.0) > clip_coef, valid)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * jnp.clip(ratio, 1 - clip_coef, 1 + clip_coef)
    return masked_mean(jnp.maximum(pg_loss1, pg_loss2), valid), old_approx_kl, approx_kl, clipfrac


def value_loss(newvalue, oldvalue, returns, clip_coef, clip_vloss, valid):
    """Half the mean squared error of the value, clipped around the rollout's value when clip_vloss is on."""
    v_loss_unclipped = (newvalue - returns) ** 2
    if not clip_vloss:
        return 0.5 * masked_mean(v_loss_unclipped, valid)
    v_clipped = oldvalue + jnp.clip(newvalue - oldvalue, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return 0.5 * masked_mean(jnp.maximum(v_loss_unclipped, v_loss_clipped), valid)


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


def rollout_step(params, episode_stats, handle, next_obs, next_done, key, agent, step_env):
    """One step of all environments, jitted whole: the policy samples the actions and EnvPool's XLA step plays them.
    Returns the loop's new state, what the step stores (obs, done, action, logprob, value, reward), and its infos."""
    key, action_key = jax.random.split(key)
    action, logprob, _, value = agent.get_action_and_value(params, next_obs, action_key)
    handle, (obs, reward, terminations, truncations, infos) = step_env(handle, action)
    episode_stats, infos = episode_stats.step(infos, truncations)
    done = jnp.logical_or(terminations, truncations).astype(jnp.float32)
    return episode_stats, handle, obs, done, key, (next_obs, next_done, action, logprob, value, reward), infos


def update_minibatch(agent_state, b, mb_inds, agent, clip_coef, clip_vloss, ent_coef, vf_coef, norm_adv):
    """One gradient step on the samples mb_inds of the flattened batch b, jitted whole: the loss, then global-norm
    clipping and Adam, the two links of the optax chain. The means are over the valid samples (see masked_mean)."""
    b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values, b_valid = b
    mb_valid = b_valid if b_valid is None else b_valid[mb_inds]

    def loss_fn(params):
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(params, b_obs[mb_inds], None, b_actions[mb_inds])
        mb_advantages = b_advantages[mb_inds]
        if norm_adv:
            mean = masked_mean(mb_advantages, mb_valid)
            std = jnp.sqrt(masked_mean((mb_advantages - mean) ** 2, mb_valid))
            mb_advantages = (mb_advantages - mean) / (std + 1e-8)
        pg_loss, old_approx_kl, approx_kl, clipfrac = policy_loss(
            newlogprob, b_logprobs[mb_inds], mb_advantages, clip_coef, mb_valid
        )
        v_loss = value_loss(newvalue, b_values[mb_inds], b_returns[mb_inds], clip_coef, clip_vloss, mb_valid)
        entropy_loss = masked_mean(entropy, mb_valid)
        loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
        return loss, (pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)

    (_, info), grads = jax.value_and_grad(loss_fn, has_aux=True)(agent_state.params)
    return agent_state.apply_gradients(grads=grads), info


def evaluate(model_path, env_id, eval_episodes, seed):
    """Plays `eval_episodes` episodes with a saved model; returns their returns."""
    envs = make_env(env_id, 1, seed)
    agent = Agent(envs.single_action_space.n)
    key = jax.random.PRNGKey(seed)
    params = agent.init(key, key, key, np.zeros((1,) + envs.single_observation_space.shape))
    with open(model_path, "rb") as f:
        _, params = flax.serialization.from_bytes([None, params], f.read())  # [the arguments, the parameters]
    handle, _, _, step_env = envs.xla()
    step_fn = jax.jit(partial(rollout_step, agent=agent, step_env=step_env))
    episode_stats = no_episodes(1)
    obs, _ = envs.reset()
    done = jnp.zeros(1)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        episode_stats, handle, obs, done, key, _, infos = step_fn(params, episode_stats, handle, obs, done, key)
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
    if args.upload_model:
        try:
            from cleanrl_utils.huggingface import push_to_hub
        except ModuleNotFoundError as e:
            fail(f"--upload-model needs {e.name}: run `pip install -e .` in a clone of this project")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"

    # env setup; EnvPool resets an ended episode in the next step, which ignores its action and pays nothing
    if envpool.registration.registry.specs.get(args.env_id, [None])[0] != "envpool.atari":
        fail(f"cannot make environment '{args.env_id}': not an EnvPool Atari id such as Breakout-v5; see ppo_atari.py")
    envs = make_env(args.env_id, args.num_envs, args.seed)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        fail(f"{args.env_id} has {envs.single_action_space} actions, not Discrete; see ppo_continuous_action.py")
    # EnvPool's XLA interface: a handle to the environments, and their step as a function that jitted code can call
    handle, _, _, step_env = envs.xla()

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

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    jax.config.update("jax_threefry_partitionable", False)  # the random numbers of JAX 0.4, the reference's
    key = jax.random.PRNGKey(args.seed)
    key, network_key, actor_key, critic_key = jax.random.split(key, 4)

    agent = Agent(envs.single_action_space.n)
    # Adam with epsilon 1e-5 after global-norm gradient clipping; its learning rate a hyperparameter the loop can set
    agent_state = TrainState.create(
        apply_fn=None,
        params=agent.init(network_key, actor_key, critic_key, np.zeros((1,) + envs.single_observation_space.shape)),
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(learning_rate=args.learning_rate, eps=1e-5),
        ),
    )
    # the two jitted functions of the loop, each compiled at its first call
    rollout_step_fn = jax.jit(partial(rollout_step, agent=agent, step_env=step_env))
    loss_settings = dict(
        clip_vloss=args.clip_vloss, ent_coef=args.ent_coef, vf_coef=args.vf_coef, norm_adv=args.norm_adv
    )
    update_minibatch_fn = jax.jit(partial(update_minibatch, agent=agent, clip_coef=args.clip_coef, **loss_settings))

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    episode_stats = no_episodes(args.num_envs)
    next_obs, _ = envs.reset()
    next_done = jnp.zeros(args.num_envs)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            agent_state.opt_state[1].hyperparams["learning_rate"] = jnp.float32(lrnow)  # one type: one compilation

        storage = []
        for step in range(0, args.num_steps):
            global_step += args.num_envs

            # ALGO LOGIC: action logic and the game, in one jitted call
            episode_stats, handle, next_obs, next_done, key, stored, infos = rollout_step_fn(
                agent_state.params, episode_stats, handle, next_obs, next_done, key
            )
            storage.append(stored)

            for episodic_return, episodic_length in finished_episodes(infos):
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                recent_returns.append(episodic_return)
        obs, dones, actions, logprobs, values, rewards = jax.tree.map(lambda *steps: jnp.stack(steps), *storage)

        # bootstrap value if not done
        next_value = agent.get_value(agent_state.params, next_obs)
        advantages, returns = compute_gae(rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda)

        # flatten the batch
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = None  # every sample counts
        if args.exclude_reset_steps:  # EnvPool's reset steps (dones[t] = 1) are no experience of the policy
            b_valid = 1.0 - dones.reshape(-1)  # jitted code needs minibatches of one size: they stay, masked out
        b = (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values, b_valid)

        # Optimizing the policy and value network
        clipfracs = []
        for epoch in range(args.update_epochs):
            key, permutation_key = jax.random.split(key)
            b_inds = jax.random.permutation(permutation_key, args.batch_size)
            for mb_inds in np.array_split(b_inds, args.num_minibatches):
                agent_state, info = update_minibatch_fn(agent_state, b, mb_inds)
                pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac = info
                clipfracs.append(clipfrac)

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = np.asarray(b_values), np.asarray(b_returns)
        if args.exclude_reset_steps:  # the explained variance of the samples the update used
            y_pred, y_true = y_pred[dones.reshape(-1) == 0], y_true[dones.reshape(-1) == 0]
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar(
            "charts/learning_rate", float(agent_state.opt_state[1].hyperparams["learning_rate"]), global_step
        )
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        # the fixed-shape statistics: the average over the environments of each one's last finished game
        returned = jax.device_get(episode_stats)
        writer.add_scalar("charts/avg_episodic_return", np.mean(returned.returned_episode_returns), global_step)
        writer.add_scalar("charts/avg_episodic_length", np.mean(returned.returned_episode_lengths), global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            print(f"{progress} | SPS {sps} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        with open(model_path, "wb") as f:
            f.write(flax.serialization.to_bytes([vars(args), agent_state.params]))
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(model_path, args.env_id, 10, args.seed)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            weights = "flax-serialized parameters of the script's networks"
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__, weights)

    envs.close()
    writer.close()
