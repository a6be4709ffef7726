# docs and experiment results can be found at https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_atari_envpool_xla_jaxpy
import os
import random
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

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

# Fix weird OOM https://github.com/google/jax/discussions/6332#discussioncomment-1279991
os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.6"
# Fix CUDNN non-determinisim; https://github.com/google/jax/issues/4823#issuecomment-952835771
os.environ["TF_XLA_FLAGS"] = "--xla_gpu_autotune_level=2 --xla_gpu_deterministic_reductions"
os.environ["TF_CUDNN DETERMINISTIC"] = "1"


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
    checkpoint_every: int = 0
    """write a checkpoint into the run folder every N iterations (0: never)"""
    resume: str | None = None
    """a run folder (or its checkpoint) to go on with, in that folder and with the same flags"""

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
    clip_vloss: bool = False  # off: the reference's loss never clipped, whatever its default said
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""

    # to be filled in runtime
    batch_size: tyro.conf.Suppress[int] = 0
    """the batch size (computed in runtime)"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """the number of iterations (computed in runtime)"""


def make_env(env_id, seed, num_envs):
    def thunk():
        envs = envpool.make(
            env_id,
            env_type="gymnasium",
            num_envs=num_envs,
            episodic_life=True,
            reward_clip=True,
            seed=seed,
        )
        return envs

    return thunk


class Network(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = jnp.transpose(x, (0, 2, 3, 1))
        x = x / (255.0)
        x = nn.Conv(
            32,
            kernel_size=(8, 8),
            strides=(4, 4),
            padding="VALID",
            kernel_init=orthogonal(np.sqrt(2)),
            bias_init=constant(0.0),
        )(x)
        x = nn.relu(x)
        x = nn.Conv(
            64,
            kernel_size=(4, 4),
            strides=(2, 2),
            padding="VALID",
            kernel_init=orthogonal(np.sqrt(2)),
            bias_init=constant(0.0),
        )(x)
        x = nn.relu(x)
        x = nn.Conv(
            64,
            kernel_size=(3, 3),
            strides=(1, 1),
            padding="VALID",
            kernel_init=orthogonal(np.sqrt(2)),
            bias_init=constant(0.0),
        )(x)
        x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(512, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        x = nn.relu(x)
        return x


class Critic(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1, kernel_init=orthogonal(1), bias_init=constant(0.0))(x)


class Actor(nn.Module):
    action_dim: Sequence[int]

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(x)


@flax.struct.dataclass
class AgentParams:
    network_params: flax.core.FrozenDict
    actor_params: flax.core.FrozenDict
    critic_params: flax.core.FrozenDict

    def __contains__(self, key):  # flax 0.12's TrainState asks whether "overwrite_with_gradient" is a parameter
        return False


@flax.struct.dataclass
class Storage:
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
    episode_returns: jnp.array
    episode_lengths: jnp.array
    returned_episode_returns: jnp.array
    returned_episode_lengths: jnp.array


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
    if envpool.registration.registry.specs.get(args.env_id, [None])[0] != "envpool.atari":
        needs = "this script needs an EnvPool Atari id such as Breakout-v5"
        return f"{args.env_id} has no EnvPool Atari game; {needs}: use ppo_atari.py instead"


# no run_name, device or capture_video: JAX places its arrays itself, and the script records no video
def evaluate(model_path, env_id, eval_episodes, seed):
    """Plays `eval_episodes` whole games with a saved model; returns their returns."""
    envs = make_env(env_id, seed, 1)()
    network = Network()
    actor = Actor(action_dim=envs.single_action_space.n)
    critic = Critic()
    next_obs, _ = envs.reset()
    key = jax.random.PRNGKey(seed)
    network_params = network.init(key, next_obs)
    hidden = network.apply(network_params, next_obs)
    params = [network_params, actor.init(key, hidden), critic.init(key, hidden)]
    with open(model_path, "rb") as f:
        _, (network_params, actor_params, _) = flax.serialization.from_bytes([None, params], f.read())
    get_logits = jax.jit(lambda obs: actor.apply(actor_params, network.apply(network_params, obs)))
    episodic_returns = []
    episodic_return = 0.0
    while len(episodic_returns) < eval_episodes:
        key, subkey = jax.random.split(key)
        action = jax.random.categorical(subkey, get_logits(next_obs))
        next_obs, _, _, truncated, info = envs.step(np.asarray(action))
        episodic_return += info["reward"][0]
        if info["terminated"][0] or truncated[0]:
            print(f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}")
            episodic_returns.append(episodic_return)
            episodic_return = 0.0
    envs.close()
    return episodic_returns


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
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.checkpoint_every or args.resume:  # with --resume: the run it goes on with, its checkpoint checked
        run_name = checkpoint.begin(args, __file__, run_name)
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
    jax.config.update("jax_threefry_partitionable", False)  # JAX 0.4's random numbers, the reference's
    key = jax.random.PRNGKey(args.seed)
    key, network_key, actor_key, critic_key = jax.random.split(key, 4)

    # env setup
    envs = make_env(args.env_id, args.seed, args.num_envs)()
    episode_stats = EpisodeStatistics(
        episode_returns=jnp.zeros(args.num_envs, dtype=jnp.float32),
        episode_lengths=jnp.zeros(args.num_envs, dtype=jnp.int32),
        returned_episode_returns=jnp.zeros(args.num_envs, dtype=jnp.float32),
        returned_episode_lengths=jnp.zeros(args.num_envs, dtype=jnp.int32),
    )
    handle, recv, send, step_env = envs.xla()

    def step_env_wrappeed(episode_stats, handle, action):
        handle, (next_obs, reward, terminated, truncated, info) = step_env(handle, action)
        next_done = terminated | truncated
        new_episode_return = episode_stats.episode_returns + info["reward"]
        new_episode_length = episode_stats.episode_lengths + 1
        episode_stats = episode_stats.replace(
            episode_returns=(new_episode_return) * (1 - info["terminated"]) * (1 - truncated),
            episode_lengths=(new_episode_length) * (1 - info["terminated"]) * (1 - truncated),
            # only update the `returned_episode_returns` if the episode is done
            returned_episode_returns=jnp.where(
                info["terminated"] + truncated, new_episode_return, episode_stats.returned_episode_returns
            ),
            returned_episode_lengths=jnp.where(
                info["terminated"] + truncated, new_episode_length, episode_stats.returned_episode_lengths
            ),
        )
        return episode_stats, handle, (next_obs, reward, next_done, info)

    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"

    def linear_schedule(count):
        # anneal learning rate linearly after one training iteration which contains
        # (args.num_minibatches * args.update_epochs) gradient updates
        frac = 1.0 - (count // (args.num_minibatches * args.update_epochs)) / args.num_iterations
        return args.learning_rate * frac

    network = Network()
    actor = Actor(action_dim=envs.single_action_space.n)
    critic = Critic()
    network_params = network.init(network_key, np.array([envs.single_observation_space.sample()]))
    agent_state = TrainState.create(
        apply_fn=None,
        params=AgentParams(
            network_params,
            actor.init(actor_key, network.apply(network_params, np.array([envs.single_observation_space.sample()]))),
            critic.init(critic_key, network.apply(network_params, np.array([envs.single_observation_space.sample()]))),
        ),
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

    @jax.jit
    def get_action_and_value(
        agent_state: TrainState,
        next_obs: np.ndarray,
        key: jax.random.PRNGKey,
    ):
        """sample action, calculate value, logprob, entropy, and update storage"""
        hidden = network.apply(agent_state.params.network_params, next_obs)
        logits = actor.apply(agent_state.params.actor_params, hidden)
        # sample action: Gumbel-softmax trick
        # see https://stats.stackexchange.com/questions/359442/sampling-from-a-categorical-distribution
        key, subkey = jax.random.split(key)
        u = jax.random.uniform(subkey, shape=logits.shape)
        action = jnp.argmax(logits - jnp.log(-jnp.log(u)), axis=1)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        value = critic.apply(agent_state.params.critic_params, hidden)
        return action, logprob, value.squeeze(1), key

    @jax.jit
    def get_action_and_value2(
        params: flax.core.FrozenDict,
        x: np.ndarray,
        action: np.ndarray,
    ):
        """calculate value, logprob of supplied `action`, and entropy"""
        hidden = network.apply(params.network_params, x)
        logits = actor.apply(params.actor_params, hidden)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        # normalize the logits https://gregorygundersen.com/blog/2020/02/09/log-sum-exp/
        logits = logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)
        logits = logits.clip(min=jnp.finfo(logits.dtype).min)
        p_log_p = logits * jax.nn.softmax(logits)
        entropy = -p_log_p.sum(-1)
        value = critic.apply(params.critic_params, hidden).squeeze()
        return logprob, entropy, value

    def compute_gae_once(carry, inp, gamma, gae_lambda):
        advantages = carry
        nextdone, nextvalues, curvalues, reward = inp
        nextnonterminal = 1.0 - nextdone

        delta = reward + gamma * nextvalues * nextnonterminal - curvalues
        advantages = delta + gamma * gae_lambda * nextnonterminal * advantages
        return advantages, advantages

    compute_gae_once = partial(compute_gae_once, gamma=args.gamma, gae_lambda=args.gae_lambda)

    @jax.jit
    def compute_gae(
        agent_state: TrainState,
        next_obs: np.ndarray,
        next_done: np.ndarray,
        storage: Storage,
    ):
        next_value = critic.apply(
            agent_state.params.critic_params, network.apply(agent_state.params.network_params, next_obs)
        ).squeeze()

        advantages = jnp.zeros((args.num_envs,))
        dones = jnp.concatenate([storage.dones, next_done[None, :]], axis=0)
        values = jnp.concatenate([storage.values, next_value[None, :]], axis=0)
        _, advantages = jax.lax.scan(
            compute_gae_once, advantages, (dones[1:], values[1:], values[:-1], storage.rewards), reverse=True
        )
        storage = storage.replace(
            advantages=advantages,
            returns=advantages + storage.values,
        )
        return storage

    def ppo_loss(params, x, a, logp, mb_advantages, mb_returns, mb_values):
        newlogprob, entropy, newvalue = get_action_and_value2(params, x, a)
        logratio = newlogprob - logp
        ratio = jnp.exp(logratio)
        approx_kl = ((ratio - 1) - logratio).mean()
        old_approx_kl = (-logratio).mean()  # with the clip fraction, logged as the PyTorch scripts log them
        clipfrac = (jnp.abs(ratio - 1.0) > args.clip_coef).mean()

        if args.norm_adv:
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

        # Policy loss
        pg_loss1 = -mb_advantages * ratio
        pg_loss2 = -mb_advantages * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        pg_loss = jnp.maximum(pg_loss1, pg_loss2).mean()

        # Value loss
        if args.clip_vloss:  # the reference's flag never took effect; ours clips as the PyTorch scripts do
            v_loss_unclipped = (newvalue - mb_returns) ** 2
            v_clipped = mb_values + jnp.clip(
                newvalue - mb_values,
                -args.clip_coef,
                args.clip_coef,
            )
            v_loss_clipped = (v_clipped - mb_returns) ** 2
            v_loss_max = jnp.maximum(v_loss_unclipped, v_loss_clipped)
            v_loss = 0.5 * v_loss_max.mean()
        else:
            v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()

        entropy_loss = entropy.mean()
        loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
        return loss, (pg_loss, v_loss, entropy_loss, jax.lax.stop_gradient(approx_kl), old_approx_kl, clipfrac)

    ppo_loss_grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    @jax.jit
    def update_ppo(
        agent_state: TrainState,
        storage: Storage,
        key: jax.random.PRNGKey,
    ):
        def update_epoch(carry, unused_inp):
            agent_state, key = carry
            key, subkey = jax.random.split(key)

            def flatten(x):
                return x.reshape((-1,) + x.shape[2:])

            # taken from: https://github.com/google/brax/blob/main/brax/training/agents/ppo/train.py
            def convert_data(x: jnp.ndarray):
                x = jax.random.permutation(subkey, x)
                x = jnp.reshape(x, (args.num_minibatches, -1) + x.shape[1:])
                return x

            flatten_storage = jax.tree.map(flatten, storage)
            shuffled_storage = jax.tree.map(convert_data, flatten_storage)

            def update_minibatch(agent_state, minibatch):
                (loss, (pg_loss, v_loss, entropy_loss, approx_kl, old_approx_kl, clipfrac)), grads = ppo_loss_grad_fn(
                    agent_state.params,
                    minibatch.obs,
                    minibatch.actions,
                    minibatch.logprobs,
                    minibatch.advantages,
                    minibatch.returns,
                    minibatch.values,
                )
                agent_state = agent_state.apply_gradients(grads=grads)
                return agent_state, (loss, pg_loss, v_loss, entropy_loss, approx_kl, grads, old_approx_kl, clipfrac)

            agent_state, (loss, pg_loss, v_loss, entropy_loss, approx_kl, grads, old_approx_kl, clipfrac) = (
                jax.lax.scan(update_minibatch, agent_state, shuffled_storage)
            )
            return (agent_state, key), (loss, pg_loss, v_loss, entropy_loss, approx_kl, grads, old_approx_kl, clipfrac)

        (agent_state, key), (loss, pg_loss, v_loss, entropy_loss, approx_kl, grads, old_approx_kl, clipfrac) = (
            jax.lax.scan(update_epoch, (agent_state, key), (), length=args.update_epochs)
        )
        return agent_state, loss, pg_loss, v_loss, entropy_loss, approx_kl, key, old_approx_kl, clipfrac

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    next_obs, _ = envs.reset()
    next_done = jnp.zeros(args.num_envs, dtype=jax.numpy.bool_)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, next_obs, agent_state, key, episode_stats = checkpoint.restore_jax(
            envs, agent_state, key, episode_stats
        )

    # based on https://github.dev/google/evojax/blob/0625d875262011d8e1b6aa32566b236f44b4da66/evojax/sim_mgr.py
    def step_once(carry, step, env_step_fn):
        agent_state, episode_stats, obs, done, key, handle = carry
        action, logprob, value, key = get_action_and_value(agent_state, obs, key)

        episode_stats, handle, (next_obs, reward, next_done, _) = env_step_fn(episode_stats, handle, action)
        storage = Storage(
            obs=obs,
            actions=action,
            logprobs=logprob,
            dones=done,
            values=value,
            rewards=reward,
            returns=jnp.zeros_like(reward),
            advantages=jnp.zeros_like(reward),
        )
        # with the statistics after each step, for each game's charts/episodic_return
        return ((agent_state, episode_stats, next_obs, next_done, key, handle), (storage, episode_stats))

    def rollout(agent_state, episode_stats, next_obs, next_done, key, handle, step_once_fn, max_steps):
        (agent_state, episode_stats, next_obs, next_done, key, handle), (storage, episodes) = jax.lax.scan(
            step_once_fn, (agent_state, episode_stats, next_obs, next_done, key, handle), (), max_steps
        )
        return agent_state, episode_stats, next_obs, next_done, storage, key, handle, episodes

    rollout = partial(rollout, step_once_fn=partial(step_once, env_step_fn=step_env_wrappeed), max_steps=args.num_steps)

    for iteration in range(first_iteration, args.num_iterations + 1):
        iteration_time_start = time.time()
        agent_state, episode_stats, next_obs, next_done, storage, key, handle, episodes = rollout(
            agent_state, episode_stats, next_obs, next_done, key, handle
        )
        global_step += args.num_steps * args.num_envs
        for episode_step, episodic_return, episodic_length in finished_episodes(jax.device_get(episodes), global_step):
            writer.add_scalar("charts/episodic_return", episodic_return, episode_step)
            writer.add_scalar("charts/episodic_length", episodic_length, episode_step)
            recent_returns.append(episodic_return)
        storage = compute_gae(agent_state, next_obs, next_done, storage)
        agent_state, loss, pg_loss, v_loss, entropy_loss, approx_kl, key, old_approx_kl, clipfrac = update_ppo(
            agent_state,
            storage,
            key,
        )
        avg_episodic_return = np.mean(jax.device_get(episode_stats.returned_episode_returns))
        y_pred, y_true = np.asarray(storage.values).reshape(-1), np.asarray(storage.returns).reshape(-1)
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        writer.add_scalar("charts/avg_episodic_return", avg_episodic_return, global_step)
        writer.add_scalar(
            "charts/avg_episodic_length", np.mean(jax.device_get(episode_stats.returned_episode_lengths)), global_step
        )
        writer.add_scalar(
            "charts/learning_rate", agent_state.opt_state[1].hyperparams["learning_rate"].item(), global_step
        )
        writer.add_scalar("losses/value_loss", v_loss[-1, -1].item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss[-1, -1].item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss[-1, -1].item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl[-1, -1].item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl[-1, -1].item(), global_step)
        writer.add_scalar("losses/clipfrac", clipfrac[-1, -1].item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("losses/loss", loss[-1, -1].item(), global_step)
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/SPS", sps, global_step)
        writer.add_scalar(
            "charts/SPS_update", int(args.num_envs * args.num_steps / (time.time() - iteration_time_start)), global_step
        )
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
        with open(model_path, "wb") as f:
            f.write(
                flax.serialization.to_bytes(
                    [
                        vars(args),
                        [
                            agent_state.params.network_params,
                            agent_state.params.actor_params,
                            agent_state.params.critic_params,
                        ],
                    ]
                )
            )
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(model_path, args.env_id, 10, args.seed)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            weights = "flax-serialized parameters of the script's networks"
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__, weights)

    envs.close()
    writer.close()
