"""Fixtures and hooks every test file shares."""

import importlib.util
import os
import shutil
import sys
import tempfile

import pytest
import torch

# which tests run together on one worker when the suite runs in parallel, and which alone (tests/grouping.py)
from grouping import (  # noqa: F401  (pytest finds hooks by their names here)
    pytest_collection_finish,
    pytest_configure_node,
    pytest_pyfunc_call,
    pytest_xdist_make_scheduler,
)
from helpers import (
    KIND_CACHE,
    MULTIGPU_RUN,
    PLAIN_RUNS,
    ROOT,
    groups_unavailable_here,
    only_run_dir,
    run_torchrun,
    script_env,
)

# where JAX keeps its compiled programs for later processes (the jax_compilation_cache_dir option)
JAX_CACHE = "JAX_COMPILATION_CACHE_DIR"


def session_folder(config, variable, prefix, **settings):
    """A temporary folder for the whole session, named in the environment by `variable` (with `settings` beside it),
    so that every process the tests start finds it; removed, and the variables with it, when the session ends. A
    variable set before pytest started is left as it is."""
    if variable in os.environ:
        return
    os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
    os.environ.update(settings)

    def remove():
        shutil.rmtree(os.environ.pop(variable), ignore_errors=True)
        for name in settings:
            os.environ.pop(name, None)

    config.add_cleanup(remove)


def pytest_configure(config):
    """In the process pytest started (not in an xdist worker, which inherits it): a folder for the machine kinds
    the session finds, so that each is found once (helpers.machine_kind), one for the plain runs that several test
    files read (helpers.plain_run), and one for JAX's compiled programs."""
    if hasattr(config, "workerinput"):
        return
    session_folder(config, KIND_CACHE, "pytest-kinds-")
    session_folder(config, PLAIN_RUNS, "pytest-plain-runs-")
    # Many tests run a JAX script more than once with the same arguments (a run and its resumption, a run and its
    # repeat), and XLA would compile the same programs each time, about a quarter of a tiny run. Every JAX process of
    # the session keeps what it compiles in this folder, and the next one reads it from there. A size limit makes
    # JAX lock the folder around each read and write, which processes running at the same time need; a minimum
    # compile time of 0 keeps the many small programs too.
    jax_settings = {"JAX_COMPILATION_CACHE_MAX_SIZE": str(2**32), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    session_folder(config, JAX_CACHE, "pytest-jax-cache-", **jax_settings)


# The module each group installs, which a test of that group names in its id (ppo_procgen.py, bossfight, ...).
GROUP_MODULES = {"procgen": "procgen"}


def pytest_collection_modifyitems(config, items):
    """On a Python that cannot install a group (requirements/pythons.txt), the tests that need it skip, saying why;
    only where its module is really missing, so a group that did install is tested whatever the file says."""
    for group, why in groups_unavailable_here().items():
        module = GROUP_MODULES[group]
        if importlib.util.find_spec(module) is not None:
            continue
        skip = pytest.mark.skip(reason=f"the {group} group does not install on Python {sys.version.split()[0]}: {why}")
        for item in items:
            if module in item.nodeid.lower():
                item.add_marker(skip)


@pytest.fixture(scope="session")
def uninterrupted_multigpu_run(tmp_path_factory):
    """ppo_atari_multigpu.py's tiny run (helpers.MULTIGPU_RUN) in two processes under torchrun, never stopped, with
    the checkpoint of its last iteration: the run that test_resume_more.py's killed and resumed run and
    test_slurm.py's requeued one must log bitwise. Made once for both (their tests run on one worker, one after the
    other: multicore); returns its run folder."""
    cwd = tmp_path_factory.mktemp("multigpu_uninterrupted")
    environment = script_env(PYTHONPATH=str(ROOT))  # cleanrl_utils importable, for the checkpoint
    run_torchrun("ppo_atari_multigpu.py", 2, *MULTIGPU_RUN, "--checkpoint-every", "1000", cwd=cwd, env=environment)
    return only_run_dir(cwd)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """In-process tests run torch on one thread, as the scripts run under test do (OMP_NUM_THREADS=1 where set):
    the machine is small and shared, and two threads contending for a core run a CNN far slower.
    The session's thread count is given back afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_jax_traces_of_other_tests():
    """Each test starts with JAX's in-process caches empty, where JAX is loaded. jaxlib 0.10.2 calls any two
    registered dataclass trees of one shape equal, whatever their classes, so a cache that already holds a trace
    made for one script's AgentParams can hand it to another script's, run in this process, and the program fails
    with "different types at key path" (it did once in CI, in test_ppo_atari_envpool_xla_jax.py). A script run
    alone in its process, as users run it, has no two such classes of one shape."""
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()


def pytest_report_header(config):
    """Which machine kind the conformance records see here: bitwise where a record holds it, else within tolerance."""
    import json

    from helpers import CONFORMANCE, machine_kind

    kind = machine_kind()
    records = [json.loads(path.read_text()) for path in sorted(CONFORMANCE.glob("*.json"))]
    known = [r for r in records if any(m.get("kind") == kind for m in r.get("machines", {}).values())]
    return (
        f"conformance: machine kind {kind} (tests/conformance/fingerprint.py); {len(known)} of {len(records)} records "
        "hold it and compare bitwise, the others within their portable tolerance"
    )
