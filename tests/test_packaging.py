"""The packaging says one thing in two places (pyproject extras, requirements files); they must agree."""

import re
import subprocess
import sys
import tomllib
import zipfile

import pytest
from helpers import ROOT
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

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
    assert "torch==2.13.0" in requirement_lines(ROOT / "requirements/constraints.txt")
    setup = (ROOT / "scripts/setup.sh").read_text()
    assert "torch==2.13.0" in setup and "-c requirements/constraints.txt" in setup


def every_requirement():
    """Each requirement of pyproject.toml's dependencies and extras, parsed."""
    lists = [PROJECT["dependencies"], *PROJECT["optional-dependencies"].values()]
    return [Requirement(line) for requirements in lists for line in requirements]


def test_the_constraints_pin_one_version_each_that_the_requirements_admit():
    """constraints.txt holds the exact version of each package, the same on every Python; a requirement changed
    without it (a pin the constraint falls outside of) would make pip fail to resolve, on some Python only."""
    pinned = {}
    for line in requirement_lines(ROOT / "requirements/constraints.txt"):
        constraint = Requirement(line)
        specifiers = list(constraint.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", line
        pinned[canonicalize_name(constraint.name)] = specifiers[0].version
    for requirement in every_requirement():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} has no version in requirements/constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (str(requirement), pinned[name])


def supported_pythons():
    line = next(line for line in (ROOT / "requirements/pythons.txt").read_text().splitlines() if line.startswith("su"))
    return line.split()[1:]


def test_the_supported_pythons_are_said_alike_everywhere():
    """requirements/pythons.txt, which the set-up reads, pyproject's requires-python and classifiers, and ruff's
    target (the oldest, whose syntax the code must keep) name the same Pythons."""
    versions = supported_pythons()
    requires = SpecifierSet(PROJECT["requires-python"])
    for minor in range(8, 20):
        assert (f"3.{minor}" in versions) == requires.contains(f"3.{minor}.0"), minor
    classified = {c.rsplit(" ", 1)[-1] for c in PROJECT["classifiers"] if re.fullmatch(r".*:: 3\.\d+", c)}
    assert classified == set(versions)
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + versions[0].replace(".", "")


def test_ci_runs_the_readme_test_commands():
    """CI runs the README's test command, then the one that runs the tests on the other Pythons."""
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/train.sh" in readme
    assert "bash scripts/test-pythons.sh" in readme
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-2:] == ["bash scripts/test.sh", "bash scripts/test-pythons.sh"]


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
