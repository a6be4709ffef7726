"""How the suite runs in parallel (tests/grouping.py): a small suite of its own, run with pytest-xdist as
scripts/test.sh runs this one, keeps together on one worker the tests that read one shared fixture, made once, and
the tests marked multicore; without xdist the same tests run one after another; a worker that crashes costs the
test it was running, and the others still run."""

import re
import textwrap

from helpers import ROOT, run_python, script_env

SMALL_SUITE = {
    "conftest.py": """
        import pytest
        from grouping import (
            pytest_collection_finish,
            pytest_configure_node,
            pytest_pyfunc_call,
            pytest_xdist_make_scheduler,
        )
    """,
    "pytest.ini": """
        [pytest]
        markers =
            multicore: starts processes that run at the same time
            own_process: runs in a process of its own
    """,
    "test_shared.py": """
        import os
        import time

        import pytest

        @pytest.fixture(scope="module", params=["a", "b"])
        def made(request):
            # a line for each time it is made, in a folder every worker sees
            with open(os.path.join(os.environ["MADE"], request.param), "a") as made:
                made.write(f"made by process {os.getpid()}\\n")
            return request.param

        @pytest.mark.parametrize("i", range(4))
        def test_reads(made, i):
            time.sleep(0.05)

        @pytest.mark.parametrize("i", range(8))
        def test_alone(i):
            time.sleep(0.05)
    """,
    "test_processes.py": """
        import time

        import pytest

        @pytest.mark.multicore
        @pytest.mark.parametrize("i", range(3))
        def test_many(i):
            time.sleep(0.05)
    """,
    "test_more_processes.py": """
        import pytest

        pytestmark = pytest.mark.multicore

        def test_one_more():
            pass
    """,
}


# a test that ends its worker's process as a crash in native code does; sent alone, after a group (the largest
# groups are sent first), so its worker has finished work by then
CRASHING = """
    import os
    import signal

    def test_crashes():
        os.kill(os.getpid(), signal.SIGSEGV)
"""


def run_small_suite(tmp_path, *options, files=SMALL_SUITE):
    """Runs `files`, SMALL_SUITE unless told, with `options`. Returns the process, {test id: the worker that ran
    it} from the verbose report, and {parameter: how many times its shared fixture was made}."""
    suite, made = tmp_path / "suite", tmp_path / "made"
    suite.mkdir()
    made.mkdir()
    for name, text in files.items():
        (suite / name).write_text(textwrap.dedent(text))
    env = script_env(PYTHONPATH=str(ROOT / "tests"), MADE=str(made))
    command = ("-m", "pytest", "-v", "-p", "no:cacheprovider", *options)
    proc = run_python(*command, cwd=suite, env=env, check=False, timeout=120)
    report = re.findall(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+)", proc.stdout, re.M)
    workers = {test: worker for worker, test in report}
    makings = {file.name: len(file.read_text().splitlines()) for file in made.iterdir()}
    return proc, workers, makings


def test_tests_that_share_a_fixture_or_the_cores_stay_on_one_worker(tmp_path):
    proc, workers, makings = run_small_suite(tmp_path, "-n", "2", "--dist", "loadgroup")
    assert proc.returncode == 0 and len(workers) == 20, proc.stdout + proc.stderr
    assert set(workers.values()) == {"gw0", "gw1"}, "the tests that share nothing go to both workers"
    for param in ("a", "b"):
        readers = {
            worker for test, worker in workers.items() if test.startswith(f"test_shared.py::test_reads[{param}-")
        }
        assert len(readers) == 1, f"the readers of {param} ran on {readers}"
    multicore = {worker for test, worker in workers.items() if "processes.py" in test}
    assert len(multicore) == 1, f"the multicore tests ran on {multicore}"
    assert makings == {"a": 1, "b": 1}, "each shared fixture is made once"


def test_without_xdist_the_same_suite_runs_serially(tmp_path):
    proc, workers, makings = run_small_suite(tmp_path, "-p", "no:xdist")
    assert proc.returncode == 0 and "20 passed" in proc.stdout and workers == {}, proc.stdout + proc.stderr
    assert makings == {"a": 1, "b": 1}


def test_a_crashed_worker_costs_only_the_test_it_was_running(tmp_path):
    # pytest-xdist's own scheduling by scope sends a crashed worker's finished groups again, as empty work that
    # nothing ever answers: the run never ended (a CI run was stopped at its time limit)
    files = {**SMALL_SUITE, "test_crashing.py": CRASHING}
    proc, workers, _ = run_small_suite(tmp_path, "-n", "2", "--dist", "loadgroup", files=files)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "crashed while running 'test_crashing.py::test_crashes'" in proc.stdout, proc.stdout
    assert len(workers) == 20, "every other test ran, once"
    assert re.search(r"^=+ 1 failed, 20 passed in ", proc.stdout, re.M), proc.stdout


# two tests that run in a process of their own: one writes its process's id, the other fails there
ALONE = """
    import os

    import pytest

    @pytest.mark.own_process
    def test_writes_its_process():
        with open(os.path.join(os.environ["MADE"], "alone"), "w") as made:
            made.write(str(os.getpid()))

    @pytest.mark.own_process
    def test_fails_alone():
        assert os.getpid() < 0, "failed in its own process"

    def test_writes_the_shared_process():
        with open(os.path.join(os.environ["MADE"], "shared"), "w") as made:
            made.write(str(os.getpid()))
"""


def test_a_test_marked_own_process_runs_in_a_process_of_its_own(tmp_path):
    files = {name: SMALL_SUITE[name] for name in ("conftest.py", "pytest.ini")} | {"test_alone.py": ALONE}
    proc, _, _ = run_small_suite(tmp_path, "-p", "no:xdist", files=files)
    assert re.search(r"^=+ 1 failed, 2 passed in ", proc.stdout, re.M), proc.stdout + proc.stderr
    assert "failed in its own process" in proc.stdout, "a failure there is reported here, with its output"
    made = tmp_path / "made"
    assert (made / "alone").read_text() != (made / "shared").read_text()
