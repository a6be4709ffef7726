"""scripts/setup.sh's choice of Python, on stand-in interpreters: small shell scripts that answer its questions as a
Python of a given version would and write down how they were called, so that no test installs anything.

The set-up runs in a copy of the files it reads (scripts/, requirements/, pyproject.toml, adapters/), with a PATH
whose first folder holds the stand-ins; the machine's own tools (bash, awk, sed) come after."""

import os
import shutil
import subprocess

import pytest
from helpers import ROOT

STANDIN = """#!/bin/sh
# a Python {version} for scripts/setup.sh: its version, a venv that is a copy of this file, pip that does nothing
echo "$0 $*" >>"{log}"
case "$1" in
    -c) echo {version} ;;
    -m) if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi ;;
esac
"""
NOT_INSTALLED = """#!/bin/sh
# what a pyenv shim says for a version that is not installed
echo "pyenv: $(basename "$0"): command not found" >&2
exit 127
"""


@pytest.fixture
def project(tmp_path):
    """A copy of what setup.sh reads, and a folder of stand-in interpreters first on PATH."""
    copy = tmp_path / "project"
    for folder in ("scripts", "requirements", "adapters"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy)
    (tmp_path / "bin").mkdir()
    return copy


def standin(project, name, version=None):
    """Puts a stand-in named `name` in the folder first on PATH: a Python `version`, or a shim of one not installed."""
    path = project.parent / "bin" / name
    text = NOT_INSTALLED if version is None else STANDIN.format(version=version, log=project.parent / "calls")
    path.write_text(text)
    path.chmod(0o755)
    return path


def setup(project, *groups, python=None):
    env = dict(os.environ, PATH=f"{project.parent / 'bin'}:{os.environ['PATH']}")
    env.pop("PYTHON", None)
    if python is not None:
        env["PYTHON"] = str(python)
    return subprocess.run(
        ["bash", str(project / "scripts" / "setup.sh"), *groups], capture_output=True, text=True, env=env
    )


def calls(project):
    log = project.parent / "calls"
    return log.read_text() if log.exists() else ""


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith("setup: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr


def test_without_python_the_first_supported_interpreter_that_runs_is_taken_and_named(project):
    """A shim of a version that is not installed does not count; the set-up says which interpreter it took."""
    for name in ("python3.11", "python3", "python"):
        standin(project, name)  # shims that only complain (python3 and python too: nothing real before 3.12)
    python312 = standin(project, "python3.12", "3.12")
    proc = setup(project)
    assert proc.returncode == 0, proc.stderr
    assert f"setup: creating .venv with Python 3.12 ({python312})" in proc.stdout
    assert f"{python312} -m venv .venv" in calls(project)
    assert (project / ".venv" / "bin" / "python").exists()


def test_python_names_the_interpreter(project):
    python313 = standin(project, "my-python", "3.13")
    proc = setup(project, python=python313)
    assert proc.returncode == 0, proc.stderr
    assert f"setup: creating .venv with Python 3.13 ({python313})" in proc.stdout


def test_an_unsupported_python_is_one_line_and_exit_2(project):
    proc = setup(project, python=standin(project, "python3.10", "3.10"))
    assert_one_line_error(proc, "is Python 3.10", "runs on Python 3.11, 3.12 or 3.13")
    assert not (project / ".venv").exists()


def test_a_python_that_does_not_run_is_one_line_and_exit_2(project):
    proc = setup(project, python=standin(project, "python3.12"))
    assert_one_line_error(proc, "does not run", "3.11, 3.12 or 3.13")
    assert not (project / ".venv").exists()


def test_no_supported_python_is_one_line_that_says_how_to_name_one(project):
    for name in ("python3.11", "python3.12", "python3.13", "python3", "python"):
        standin(project, name)
    proc = setup(project)  # the stand-ins come first on PATH and hide the machine's own interpreters
    assert_one_line_error(proc, "no Python 3.11, 3.12 or 3.13 found", "PYTHON=/path/to/python3.12")


def test_a_venv_of_another_python_than_asked_for_is_one_line_and_left_alone(project):
    setup(project, python=standin(project, "python3.11", "3.11"))
    venv_python = project / ".venv" / "bin" / "python"
    before = venv_python.read_text()
    proc = setup(project, python=standin(project, "python3.13", "3.13"))
    assert_one_line_error(proc, ".venv runs Python 3.11, not the 3.13 of PYTHON=", "rm -rf .venv")
    assert venv_python.read_text() == before


def test_a_group_this_python_cannot_install_stops_before_anything_is_installed(project):
    """procgen on 3.13 (requirements/pythons.txt): one line naming the package without a build, no .venv made."""
    proc = setup(project, "dev", "procgen", python=standin(project, "python3.13", "3.13"))
    assert_one_line_error(
        proc, "the procgen group does not install on Python 3.13", "procgen-mirror 0.10.7", "use Python 3.11 or 3.12"
    )
    assert not (project / ".venv").exists()
    assert " -m " not in calls(project)


def test_skip_unavailable_leaves_such_a_group_out_in_one_line(project):
    """What the README's test command asks for: the groups this Python can install, and a line for each other."""
    proc = setup(project, "--skip-unavailable", "dev", "procgen", python=standin(project, "python3.13", "3.13"))
    assert proc.returncode == 0, proc.stderr
    assert "setup: leaving out the procgen group, which does not install on Python 3.13: procgen-mirror" in proc.stdout
    pip_calls = [line for line in calls(project).splitlines() if " -m pip install" in line]
    assert any("requirements/requirements-dev.txt" in line for line in pip_calls)
    assert not any("procgen" in line for line in pip_calls)


def test_the_same_groups_on_the_same_python_install_nothing_twice(project):
    python = standin(project, "python3.12", "3.12")
    setup(project, "dev", python=python)
    installs = calls(project).count("pip install")
    proc = setup(project, "dev", python=python)
    assert proc.returncode == 0 and calls(project).count("pip install") == installs
