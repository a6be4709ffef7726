"""The code that made a checkpoint: the script's sha256 and the versions of Python and of the packages the process
imported, which every checkpoint records; and the check on --resume that refuses a checkpoint of other code, or with
--resume-changed-code goes on with a note of what changed (the learner resumes, the environments restart: not
bitwise). Uses fileformat.py (for BadCheckpoint).
"""

import functools
import hashlib
import importlib.metadata
import platform
import sys
from pathlib import Path

from cleanrl_utils.checkpoint.fileformat import BadCheckpoint

# The packages whose versions a checkpoint records: the first three always, the others where the process has
# imported them (the environments' and JAX's); {module: distribution}
PACKAGES = {
    "torch": "torch",
    "numpy": "numpy",
    "gymnasium": "gymnasium",
    "ale_py": "ale-py",
    "envpool": "envpool",
    "mujoco": "mujoco",
    "dm_control": "dm-control",
    "shimmy": "shimmy",
    "procgen": "procgen",
    "pettingzoo": "pettingzoo",
    "supersuit": "SuperSuit",
    "gym_microrts": "gym-microrts",
    "jpype": "JPype1",
    "newton": "newton",
    "warp": "warp-lang",
    "mujoco_warp": "mujoco-warp",
    "isaacgym_tasks_newton": "isaacgym-tasks-newton",
    "jax": "jax",
    "flax": "flax",
    "optax": "optax",
}
ALWAYS = ("torch", "numpy", "gymnasium")


@functools.cache  # looking a distribution up takes milliseconds; what is installed stays within a run
def installed_version(module):
    """The installed version of the package of `module` (its distribution's, else the module's __version__), or
    None where it is not installed."""
    try:
        return importlib.metadata.version(PACKAGES[module])
    except importlib.metadata.PackageNotFoundError:
        if module in sys.modules:
            return str(getattr(sys.modules[module], "__version__", "unknown"))
        return None


def script_sha256(script):
    return hashlib.sha256(Path(script).read_bytes()).hexdigest()


def versions_in_use():
    """{"python": version, module: version} for Python and the packages of PACKAGES in use."""
    versions = {"python": platform.python_version()}
    for module in PACKAGES:
        if module in ALWAYS or module in sys.modules:
            versions[module] = installed_version(module)
    return versions


def code_record(sha256):
    """What a checkpoint records of the code that writes it, whose script has the sha256 `sha256`."""
    return {"script_sha256": sha256, "versions": versions_in_use()}


def code_changes(code, script, sha256):
    """What differs between the code that wrote a checkpoint (its `code` record) and this program's, whose script
    `script` has the sha256 `sha256`."""
    changes = []
    if code["script_sha256"] != sha256:
        changes.append(f"{script} is another text (sha256 {code['script_sha256'][:12]}, now {sha256[:12]})")
    for name, then in code["versions"].items():
        now = platform.python_version() if name == "python" else installed_version(name)
        if now != then:
            changes.append(f"{name} {then}, now {now or 'not installed'}")
    return changes


def check_code(code, script, sha256, resume_changed_code, where):
    """None where the checkpoint of the run at `where` was made by this program's code; otherwise BadCheckpoint
    saying what changed and how to go on, or under --resume-changed-code (`resume_changed_code`) the line that says
    what changed, for the restart of the environments."""
    changes = code_changes(code, script, sha256)
    if changes and not resume_changed_code:
        raise BadCheckpoint(
            f"{where} was made by other code ({'; '.join(changes)}): add --resume-changed-code to go on with its "
            "learner and fresh environments (not bitwise), or start the run afresh"
        )
    if changes:
        return f"the code changed since the checkpoint ({'; '.join(changes)})"
    return None
