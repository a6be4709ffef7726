# ppo_continuous_action.py, compiled by torch.compile; explained in docs/ppo.md#ppo_continuous_action_torchcompilepy
# Follows CleanRL's ppo_continuous_action.py (MIT licence, (c) 2019 CleanRL developers)
# and the design of LeanRL's _torchcompile scripts (MIT licence, (c) 2024 LeanRL developers); see CREDITS.md
import contextlib
import importlib.util
import io
import logging
import os
import random
import shutil
import signal
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
from torch.distributions.normal import Normal
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    exp_name: str = Path(__file__).stem
    """name of the experiment, part of the run's folder name (the script's file name by default)"""
    seed: int = 1
    """seed for Python, NumPy, torch and the environments (environment i gets seed + i)"""
    torch_deterministic: bool = True
    """ask cuDNN for deterministic kernels (`torch.backends.cudnn.deterministic`)"""
    cuda: bool = True
    """train on the GPU when one is available (--no-cuda keeps to the CPU)"""
    track: bool = False
    """also log the run to Weights & Biases"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run goes to"""
    wandb_entity: str | None = None
    """Weights & Biases team or user that owns the project (None: your default)"""
    capture_video: bool = False
    """record videos of environment 0's episodes into videos/"""
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
    compile: bool = True
    """compile the acting step and the whole minibatch update with torch.compile (--no-compile: run eagerly)"""
    cudagraphs: bool = False
    """on a GPU, also replay the compiled steps as CUDA graphs, which saves launching each small kernel"""

    # What PPO does, and how much of it
    env_id: str = "HalfCheetah-v4"
    """Gymnasium id of the task to learn"""
    total_timesteps: int = 1000000
    """environment steps to train for, summed over all environments"""
    learning_rate: float = 3e-4
    """Adam's step size (where it starts, with --anneal-lr)"""
    num_envs: int = 1
    """environments stepped side by side, each collecting its share of every rollout"""
    num_steps: int = 2048
    """steps each environment takes per rollout; a rollout is num_envs x num_steps transitions"""
    anneal_lr: bool = True
    """decrease the learning rate linearly to zero over the run"""
    gamma: float = 0.99
    """discount: how much a reward one step later is worth"""
    gae_lambda: float = 0.95
    """GAE's lambda: 0 trusts the value function's one-step estimate, 1 the whole sum of rewards"""
    num_minibatches: int = 32
    """parts each rollout is split into for the gradient steps of one epoch"""
    update_epochs: int = 10
    """passes over each rollout during its update"""
    norm_adv: bool = True
    """rescale each minibatch's advantages to mean 0 and standard deviation 1"""
    clip_coef: float = 0.2
    """how far the probability ratio may move from 1 before the objective stops rewarding it"""
    clip_vloss: bool = True
    """clip the value function's change too, as the PPO paper's code does"""
    ent_coef: float = 0.0
    """weight of the entropy bonus, which keeps the policy exploring"""
    vf_coef: float = 0.5
    """weight of the value loss in the total loss"""
    max_grad_norm: float = 0.5
    """largest gradient norm allowed; larger gradients are scaled down to it"""
    target_kl: float | None = None
    """stop an update's epochs early once the approximate KL divergence passes this (None: never)"""

    # computed from the flags above once they are parsed
    batch_size: tyro.conf.Suppress[int] = 0
    """transitions per rollout: num_envs x num_steps"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """transitions per gradient step: batch_size / num_minibatches"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """rollouts in the run, each followed by an update: total_timesteps / batch_size"""


def make_env(env_id, index, capture_video, run_name, gamma):
    """A function that makes environment `index` of the vector: Gymnasium's vector environments call it in place."""

    def make():
        if capture_video:
            os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders headless through EGL
        if env_id.startswith("dm_control/"):
            with contextlib.redirect_stderr(io.StringIO()):  # a legacy gym, if installed, prints a notice on import
                import shimmy  # noqa: F401  (importing it registers the dm_control/ ids)
        if capture_video and index == 0:  # one environment is enough to watch
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        if hasattr(env.unwrapped, "_ctrl_cost_weight"):  # MuJoCo's control cost in float64, as under NumPy 1
            env.unwrapped._ctrl_cost_weight = np.float64(env.unwrapped._ctrl_cost_weight)
        env = gym.wrappers.FlattenObservation(env)  # dm_control's observations are a dict of arrays: one vector
        env = gym.wrappers.RecordEpisodeStatistics(env)  # puts each episode's return and length in `info`
        env = gym.wrappers.ClipAction(env)  # the Gaussian's samples, cut to the action bounds
        # observations scaled by running statistics (kept in float64, as Gymnasium 0.29 did) and clipped
        env = gym.wrappers.NormalizeObservation(env)
        env.obs_rms = gym.wrappers.utils.RunningMeanStd(shape=env.observation_space.shape)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        # rewards scaled by the running spread of the discounted return, and clipped
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
        return env

    return make


def finished_episodes(infos):
    """[(return, length)] of the episodes that ended in this step (same-step autoreset: under "final_info")."""
    final_info = infos.get("final_info", {})
    if "episode" not in final_info:
        return []
    ended = np.flatnonzero(final_info["_episode"])
    return list(zip(final_info["episode"]["r"][ended].tolist(), final_info["episode"]["l"][ended].tolist()))


def layer_init(layer, std=np.sqrt(2), bias=0.0):
    """Orthogonal weights scaled by `std`, constant biases: PPO's usual start, which matters for how it learns."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """Two separate networks over the same observation: the critic estimates its value, the actor gives the mean
    of a Gaussian over the actions, whose log standard deviations are parameters of their own."""

    def __init__(self, envs):
        super().__init__()
        obs_size = np.array(envs.single_observation_space.shape).prod()
        hidden = 64
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        action_size = np.prod(envs.single_action_space.shape)
        # a small last layer: every mean starts near 0
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)),
            nn.Tanh(),
            layer_init(nn.Linear(hidden, action_size), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_size))  # one per action, whatever the state

    def get_value(self, obs):
        return self.critic(obs)

    def get_action_and_value(self, obs, action=None):
        """Samples an action (or takes the one given, to score it again) and returns it with its log-probability,
        the policy's entropy and the critic's value."""
        mean = self.actor_mean(obs)
        logstd = self.actor_logstd.expand_as(mean)
        std = torch.exp(logstd)
        policy = Normal(mean, std)
        if action is None:
            action = policy.sample()
        # the action's dimensions are independent: their log-probabilities and entropies add up
        return action, policy.log_prob(action).sum(1), policy.entropy().sum(1), self.critic(obs)


def update(agent, optimizer, obs, actions, logprobs, advantages, returns, values):
    """The parent script's gradient step on one minibatch, in a function of its own for torch.compile to compile: the
    losses, their backward pass, the gradient clipping and Adam's step. Returns the figures the script logs."""
    # the policy as it is now, on the actions the rollout took
    _, new_logprob, entropy, new_value = agent.get_action_and_value(obs, actions)
    log_ratio = new_logprob - logprobs
    ratio = log_ratio.exp()  # new probability / probability when acting

    with torch.no_grad():
        # two estimates of the KL divergence from the acting policy (http://joschu.net/blog/kl-approx.html)
        old_approx_kl = (-log_ratio).mean()
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipped = (ratio - 1.0).abs() > args.clip_coef
        clip_fraction = clipped.float().mean()

    adv = advantages
    if args.norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)

    # Clipped surrogate objective, negated into a loss: the pessimistic one of the plain and the
    # clipped ratio times the advantage, so that no step gains by pushing the ratio past 1 +- clip_coef.
    surrogate = -adv * ratio
    clipped_surrogate = -adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    policy_loss = torch.max(surrogate, clipped_surrogate).mean()

    # Value loss: squared error to the returns, with the change from the rollout's value clipped alike.
    new_value = new_value.view(-1)
    target = returns
    if args.clip_vloss:
        old_value = values
        error = (new_value - target) ** 2
        value_clipped = old_value + torch.clamp(new_value - old_value, -args.clip_coef, args.clip_coef)
        error_clipped = (value_clipped - target) ** 2
        worse = torch.max(error, error_clipped)
        value_loss = 0.5 * worse.mean()
    else:
        value_loss = 0.5 * ((new_value - target) ** 2).mean()

    entropy_bonus = entropy.mean()
    loss = policy_loss - args.ent_coef * entropy_bonus + value_loss * args.vf_coef

    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
    optimizer.step()
    return policy_loss.detach(), value_loss.detach(), entropy_bonus.detach(), old_approx_kl, approx_kl, clip_fraction


class Compiled:
    """`fn` compiled by torch.compile, on CUDA graphs with --cudagraphs. torch.compile compiles a function when it is
    first called: the wall time of each first call is added up in Compiled.seconds, the run's compile time."""

    seconds = 0.0

    def __init__(self, fn, cudagraphs):
        self.fn = torch.compile(fn, mode="reduce-overhead" if cudagraphs else None)
        self.cudagraphs = cudagraphs
        self.called = False

    def __call__(self, *inputs):
        if self.cudagraphs:  # what the graphs returned before is copied or read by now: their memory may be reused
            torch.compiler.cudagraph_mark_step_begin()
        if self.called:
            return self.fn(*inputs)
        start = time.time()
        # Slurm sends its stop signal to every process of the run, the C++ compiler's too, which it would kill. The
        # processes that compiling starts inherit the signals held here, so they finish; the run then stops after
        # its iteration as at any other time.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGUSR1, signal.SIGTERM))
        outputs = self.fn(*inputs)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        Compiled.seconds += time.time() - start
        self.called = True
        return outputs


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
    if args.resume_changed_code and not args.resume:
        return "--resume-changed-code goes with --resume: give the run folder to go on with"
    if args.cudagraphs and not args.compile:
        return "--cudagraphs replays what torch.compile compiled: leave out --no-compile"
    if args.cudagraphs and not (args.cuda and torch.cuda.is_available()):
        return "--cudagraphs needs a CUDA GPU (and --cuda): leave it out on this machine"
    compiler = os.environ.get("CXX", "g++")
    if args.compile and not (args.cuda and torch.cuda.is_available()) and not shutil.which(compiler):
        missing = f"torch.compile needs a C++ compiler for CPU kernels, and {compiler} is not found"
        return f"{missing}: install one (or set CXX) or add --no-compile"


def evaluate(model_path, env_id, eval_episodes, run_name, device, capture_video, seed, gamma=0.99):
    """Plays `eval_episodes` episodes with a saved model, observations normalised with its saved statistics, frozen;
    returns their returns."""
    envs = gym.vector.SyncVectorEnv(
        [make_env(env_id, 0, capture_video, run_name, gamma)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    agent = Agent(envs).to(device)
    checkpoint = torch.load(model_path, map_location=device)
    agent.load_state_dict(checkpoint["agent"])
    normalizer = envs.envs[0]
    while not isinstance(normalizer, gym.wrappers.NormalizeObservation):  # down the wrapper stack
        normalizer = normalizer.env
    normalizer.update_running_mean = False  # the saved statistics, frozen
    rms = normalizer.obs_rms
    rms.mean = checkpoint["obs_rms"]["mean"].cpu().numpy()
    rms.var = checkpoint["obs_rms"]["var"].cpu().numpy()
    rms.count = checkpoint["obs_rms"]["count"].cpu().numpy()
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

    # The environments, stepped in turn in this process. Same-step autoreset: the step that ends an episode
    # returns the first observation of the next one, as Gymnasium 0.x did.
    if args.env_id.startswith("dm_control/") and importlib.util.find_spec("shimmy") is None:
        fail("shimmy is missing; run `bash scripts/setup.sh dm_control` in a clone of this project")
    try:
        envs = gym.vector.SyncVectorEnv(
            [make_env(args.env_id, i, args.capture_video, run_name, args.gamma) for i in range(args.num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    except gym.error.DependencyNotInstalled:  # Gymnasium's MuJoCo and Box2D tasks, without their extra
        extra = "box2d" if "box2d" in gym.spec(args.env_id).entry_point else "mujoco"
        fail(f"{extra} is missing; run `bash scripts/setup.sh {extra}` in a clone of this project")
    except (gym.error.Error, ModuleNotFoundError) as e:
        fail(f"cannot make environment '{args.env_id}': {e}")
    except (AttributeError, RuntimeError):  # MuJoCo's import fails where MUJOCO_GL names a renderer it cannot load
        if "MUJOCO_GL" not in os.environ or "mujoco" in sys.modules:  # MuJoCo was imported: another error
            raise
        gl = os.environ["MUJOCO_GL"]
        fail(f"MuJoCo cannot load its renderer MUJOCO_GL={gl}: set MUJOCO_GL=egl, osmesa or glfw, one this machine has")
    except TypeError:  # ClipAction refuses an action space that is not a Box
        action_space = gym.make(args.env_id).action_space
        fail(f"{args.env_id} has {action_space} actions; this script needs Box actions: use ppo.py instead")
    obs_space = envs.single_observation_space
    action_space = envs.single_action_space

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

    # One seed for every random number: Python's, NumPy's (minibatch order) and torch's (weights, sampled actions).
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.distributions.Distribution.set_default_validate_args(False)  # no argument checks in every Normal

    use_cuda = args.cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

    agent = Agent(envs).to(device)
    # the learning rate as a tensor, changed in place: a compiled Adam step then reads it instead of being
    # compiled anew for every value that --anneal-lr gives it
    optimizer = optim.Adam(agent.parameters(), lr=torch.tensor(args.learning_rate, device=device), eps=1e-5)
    torch._logging.set_logs(dynamo=logging.ERROR)  # torch.compile's notes on what it leaves out: not for the user
    policy_step = agent.get_action_and_value
    # GAE is not compiled (torch.compile unrolls its loop, over 2,048 steps for minutes): it runs on NumPy arrays
    if args.compile:  # compiled on their first calls, in the first iteration
        policy_step = Compiled(agent.get_action_and_value, args.cudagraphs)
        update = Compiled(update, args.cudagraphs)

    # What one rollout collects, step by step and environment by environment.
    steps_by_envs = (args.num_steps, args.num_envs)
    rollout_obs = torch.zeros(steps_by_envs + obs_space.shape).to(device)
    rollout_actions = torch.zeros(steps_by_envs + action_space.shape).to(device)
    rollout_logprobs = torch.zeros(steps_by_envs).to(device)
    # the rewards and done flags stay NumPy arrays, as the environments give them, for GAE to run on them there
    rollout_rewards = np.zeros(steps_by_envs, dtype=np.float32)
    rollout_dones = np.zeros(steps_by_envs, dtype=np.float32)
    rollout_values = torch.zeros(steps_by_envs).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=100)
    # `obs` is what the agent acts on next; `done` says whether it opens a new episode
    obs, _ = envs.reset(seed=args.seed)
    obs = torch.Tensor(obs).to(device)
    done = np.zeros(args.num_envs, dtype=np.float32)
    first_iteration = 1
    if args.resume:
        first_iteration, global_step, start_time, obs, done = checkpoint.restore(envs, agent, optimizer)
        done = done.cpu().numpy()

    for iteration in range(first_iteration, args.num_iterations + 1):
        if args.anneal_lr:  # from --learning-rate at the first iteration down towards 0 at the last
            remaining = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"].fill_(remaining * args.learning_rate)

        # Rollout: the current policy plays num_steps steps in every environment.
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            rollout_obs[step] = obs
            rollout_dones[step] = done

            with torch.no_grad():  # acting needs no gradients
                action, logprob, _, value = policy_step(obs)
                rollout_values[step] = value.flatten()
            rollout_actions[step] = action
            rollout_logprobs[step] = logprob

            obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            # a time limit ends an episode as a termination does
            done = np.logical_or(terminations, truncations)
            rollout_rewards[step] = reward
            obs = torch.as_tensor(obs, dtype=torch.float32, device=device)
            done = done.astype(np.float32)

            for episodic_return, episodic_length in finished_episodes(infos):
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                recent_returns.append(episodic_return)

        # Generalized advantage estimation, from the last step back to the first. Each step's TD error compares
        # the reward plus the discounted value of the next observation with the value of this one; the advantage
        # sums those errors discounted by gamma x lambda, and an episode's end cuts the sum and the next value.
        with torch.no_grad():
            next_value = agent.get_value(obs).reshape(1, -1)
            # on NumPy arrays in the host's memory: the same float32 arithmetic in the same order, at a fraction of
            # the cost that a tensor operation on a few numbers has
            next_value = next_value.cpu().numpy()
            values = rollout_values.cpu().numpy()
            advantages = np.zeros_like(rollout_rewards)
            gae = 0  # the advantage of the step after t
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    not_done = 1.0 - done
                    value_after = next_value
                else:
                    not_done = 1.0 - rollout_dones[t + 1]
                    value_after = values[t + 1]
                td_error = rollout_rewards[t] + args.gamma * value_after * not_done - values[t]
                gae = td_error + args.gamma * args.gae_lambda * not_done * gae
                advantages[t] = gae
            # what the critic should have said: the value it gave plus how much better things went
            returns = advantages + values
            advantages = torch.from_numpy(advantages).to(device)
            returns = torch.from_numpy(returns).to(device)

        # The rollout as one batch of num_steps x num_envs transitions.
        batch_obs = rollout_obs.reshape((-1,) + obs_space.shape)
        batch_logprobs = rollout_logprobs.reshape(-1)
        batch_actions = rollout_actions.reshape((-1,) + action_space.shape)
        batch_advantages = advantages.reshape(-1)
        batch_returns = returns.reshape(-1)
        batch_values = rollout_values.reshape(-1)

        # Update: update_epochs passes over the batch, each in shuffled minibatches, one gradient step per minibatch.
        order = np.arange(args.batch_size)
        clip_fractions = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(order)
            for start in range(0, args.batch_size, args.minibatch_size):
                stop = start + args.minibatch_size
                minibatch = order[start:stop]

                figures_of_step = update(
                    agent,
                    optimizer,
                    batch_obs[minibatch],
                    batch_actions[minibatch],
                    batch_logprobs[minibatch],
                    batch_advantages[minibatch],
                    batch_returns[minibatch],
                    batch_values[minibatch],
                )
                policy_loss, value_loss, entropy_bonus, old_approx_kl, approx_kl, clip_fraction = figures_of_step
                clip_fractions.append(clip_fraction.item())

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        # how much of the returns' variance the critic's values explained before the update (1: all of it)
        predicted = batch_values.cpu().numpy()
        actual = batch_returns.cpu().numpy()
        actual_variance = np.var(actual)
        explained_var = np.nan if actual_variance == 0 else 1 - np.var(actual - predicted) / actual_variance

        # The iteration's figures, from its last minibatch (the KL, the losses) or from all of them (clip fraction).
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", value_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", policy_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_bonus.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clip_fractions), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        writer.add_scalar("charts/compile_seconds", Compiled.seconds, global_step)
        if time.time() - last_print > 5 or iteration in (1, args.num_iterations):  # progress, every few seconds
            last_print = time.time()
            left = int((args.total_timesteps - global_step) / max(sps, 1))
            recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
            progress = f"[{100 * global_step / args.total_timesteps:3.0f}%] step {global_step}/{args.total_timesteps}"
            speed = f"SPS {sps} (compiled in {Compiled.seconds:.0f}s)"
            print(f"{progress} | {speed} | episodic return {recent} | left {left // 60}m{left % 60:02d}s", flush=True)
        if args.checkpoint_every or args.resume:  # every --checkpoint-every iterations, the last one, and on a signal
            checkpoint.save(
                iteration, global_step, start_time, writer, envs, agent, optimizer, obs, torch.from_numpy(done)
            )

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        normalizer = envs.envs[0]
        while not isinstance(normalizer, gym.wrappers.NormalizeObservation):  # down the wrapper stack
            normalizer = normalizer.env
        rms = normalizer.obs_rms  # env 0's observation statistics: needed to act as trained
        obs_rms = {"mean": torch.tensor(rms.mean), "var": torch.tensor(rms.var), "count": torch.tensor(rms.count)}
        torch.save({"agent": agent.state_dict(), "obs_rms": obs_rms}, model_path)
        print(f"model saved to {model_path}")

        episodic_returns = evaluate(
            model_path, args.env_id, 10, f"{run_name}-eval", device, args.capture_video, args.seed, args.gamma
        )
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

        if args.upload_model:
            weights = "a dict: `agent`, the state dict of the script's `Agent`; `obs_rms`, the observation statistics"
            push_to_hub(args, episodic_returns, f"runs/{run_name}", f"videos/{run_name}-eval", __file__, weights)

    if args.checkpoint_every or args.resume:  # finished once the model is saved, evaluated and uploaded
        checkpoint.finish()

    envs.close()
    writer.close()
