"""Which tests run together on one pytest-xdist worker, when the suite runs in parallel (`-n N --dist loadgroup`,
as scripts/test.sh runs it). conftest.py takes these hooks in.

Two kinds of tests are kept together, each group sent whole to one worker:
- tests that read the same shared fixture (a tiny run made once per module, a started Slurm), so that it is made
  once, not once on each worker that reads it;
- tests marked `multicore`, which start processes that run at the same time (torchrun's, Slurm's, the tuner's or
  the benchmark runner's workers): they run one after another, so that no two of them share the machine's cores.
Every other test is sent on its own. A test marked `own_process` runs in a pytest process started for it alone,
with or without xdist (pytest_pyfunc_call below).

pytest-xdist's own `loadgroup` reads `xdist_group` marks through the test ids, which pytest 9.2 no longer lets a
plugin change (pytest-xdist issue 1386): the marks are silently ignored and every test goes its own way. So each
worker writes the groups it computes while collecting into a folder the controller gave it, and the controller's
scheduler, pytest-xdist's `LoadScopeScheduling` with these groups as its scopes, reads them before it sends work."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The scopes of a fixture that several tests share: made once, then read by each of them.
SHARED_SCOPES = {"class", "module", "package", "session"}
MULTICORE = "multicore"
# the key of the groups' folder, in the controller's stash and in each worker's input
FOLDER = "test_groups_folder"
FOLDER_KEY = pytest.StashKey[str]()
# set in the process that runs one test marked own_process for its parent
OWN_PROCESS = "CLEANRL_TESTS_OWN_PROCESS"


def shared_group(item):
    """The group of a test that reads a shared fixture of this suite: its file's name and the value of each shared
    parameter, so that every test reading the same made thing lands with it. None for a test that shares nothing;
    pytest's own wide fixtures (tmp_path_factory) are not ours and cost nothing."""
    shared_params = []
    reads_shared = False
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        if not definitions or definitions[-1].scope not in SHARED_SCOPES or not definitions[-1].baseid:
            continue
        reads_shared = True
        if definitions[-1].params is not None:
            shared_params.append(f"{name}={item.callspec.params[name]}")
    if not reads_shared:
        return None
    return item.path.stem + "".join(f"[{param}]" for param in shared_params)


def groups_of(items):
    """{test id: group} for every test that has one. A shared fixture read by a multicore test goes with it: the
    group of all its readers becomes the multicore group."""
    shared = {item: shared_group(item) for item in items}
    multicore = {item for item in items if item.get_closest_marker(MULTICORE)}
    joined = {shared[item] for item in multicore if shared[item]}
    groups = {}
    for item in items:
        if item in multicore or shared[item] in joined:
            groups[item.nodeid] = MULTICORE
        elif shared[item]:
            groups[item.nodeid] = shared[item]
    return groups


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """In the controller, before a worker starts: the folder the workers write their groups into."""
    stash = node.config.stash
    if FOLDER_KEY not in stash:
        folder = tempfile.mkdtemp(prefix="pytest-groups-")
        stash[FOLDER_KEY] = folder
        node.config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    node.workerinput[FOLDER] = stash[FOLDER_KEY]


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which tells the controller the worker has collected
def pytest_collection_finish(session):
    """In a worker, once its tests are collected and before the controller hears of them: its groups, written
    whole under a temporary name, then renamed."""
    worker = getattr(session.config, "workerinput", None)
    if not worker or FOLDER not in worker:
        return
    target = Path(worker[FOLDER]) / f"{worker['workerid']}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(groups_of(session.items)))
    os.replace(partial, target)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` schedules by this suite's groups; any other mode is pytest-xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """pytest-xdist's scheduling by scope, where a test's scope is its group, or the test alone."""

        groups = None

        def _split_scope(self, nodeid):
            if self.groups is None:
                written = sorted(Path(config.stash[FOLDER_KEY]).glob("*.json"))
                if not written:
                    raise pytest.UsageError("no worker wrote its test groups (tests/grouping.py)")
                self.groups = json.loads(written[0].read_text())
            return self.groups.get(nodeid, nodeid)

        def remove_node(self, node):
            """A worker that ends with tests still to run has crashed: the test it was running is reported as
            crashed and not run again, and only the tests it had not started go back in the queue, each with its
            group. pytest-xdist's own puts back every group the worker ever had, finished ones included: those
            are sent as empty work, which no report ever follows, and the run waits for ever."""
            workload = self.assigned_work.pop(node)
            unstarted = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not unstarted:
                return None
            crashed = unstarted.pop(0)
            for nodeid in unstarted:
                self.workqueue.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked `own_process` runs in a pytest process of its own, which ends with it: what it starts (a Java
    VM, with its threads, signal handlers and guarded stack) never lives on in a process that runs other tests,
    where it once crashed Procgen's native code. Its fixtures are still made here; its output comes back on
    failure."""
    if not pyfuncitem.get_closest_marker("own_process") or os.environ.get(OWN_PROCESS):
        return None
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", pyfuncitem.nodeid]
    env = dict(os.environ, **{OWN_PROCESS: "1"})
    proc = subprocess.run(
        command, cwd=pyfuncitem.config.rootpath, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.fail(f"in its own process, exit status {proc.returncode}:\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}")
    return True
