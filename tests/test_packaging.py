"""The packaging says one thing in two places (pyproject extras, requirements files); they must agree."""

import re
import subprocess
import sys
import tomllib
import zipfile

import pytest
from helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def requirement_lines(path):
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return sorted(line for line in lines if line)


def normalise(requirements):
    return sorted(re.sub(r"\s+", "", r).lower().replace("_", "-") for r in requirements)


def test_core_requirements_match_pyproject():
    assert normalise(requirement_lines(ROOT / "requirements/requirements.txt")) == normalise(PROJECT["dependencies"])


@pytest.mark.parametrize("extra", sorted(PROJECT["optional-dependencies"]))
def test_extra_matches_its_requirements_file(extra):
    path = ROOT / f"requirements/requirements-{extra}.txt"
    assert path.is_file(), f"no {path.name} for the [{extra}] extra"
    assert normalise(requirement_lines(path)) == normalise(PROJECT["optional-dependencies"][extra])


def test_every_requirements_file_is_an_extra():
    files = {p.name for p in (ROOT / "requirements").glob("requirements-*.txt")}
    assert files == {f"requirements-{extra}.txt" for extra in PROJECT["optional-dependencies"]}


def test_extras_cover_every_environment_family():
    assert {"atari", "mujoco", "dm_control", "envpool", "jax", "procgen", "pettingzoo", "docs", "dev"} <= set(
        PROJECT["optional-dependencies"]
    )


def test_torch_is_pinned_everywhere():
    assert "torch==2.13.0" in PROJECT["dependencies"]
    assert requirement_lines(ROOT / "requirements/constraints.txt") == ["torch==2.13.0"]
    setup = (ROOT / "scripts/setup.sh").read_text()
    assert "torch==2.13.0" in setup and "-c requirements/constraints.txt" in setup


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/train.sh" in readme
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "bash scripts/test.sh"


def test_setup_refuses_an_unknown_group(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "scripts/setup.sh"), "no-such-group"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "no requirements/requirements-no-such-group.txt" in proc.stderr


def test_setup_installs_this_project_so_cleanrl_utils_imports_anywhere():
    """A script copied elsewhere imports cleanrl_utils for --upload-model: `pip install -e .` (which setup.sh does)
    puts the package on the path."""
    assert "cleanrl_utils" in PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert "pip_install --no-deps -e ." in (ROOT / "scripts/setup.sh").read_text()


def test_the_wheel_ships_the_licence_and_the_credits(tmp_path):
    """The MIT licence asks that its notice travel with every copy: the wheel carries LICENSE (with the notices of
    the projects whose design this one follows), CREDITS.md, and NOTICE, the Apache 2.0 attribution that
    ppo_procgen.py's network needs. Built with hatchling from the dev requirements, without the network."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("cleanrl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    licences = sorted(name.rsplit("/", 1)[-1] for name in names if ".dist-info/licenses/" in name)
    assert licences == ["CREDITS.md", "LICENSE", "NOTICE"], names
    assert "CleanRL developers" in (ROOT / "LICENSE").read_text()
