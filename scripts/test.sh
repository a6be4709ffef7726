#!/usr/bin/env bash
# Sets up .venv with everything the tests need, then runs the linters, the docs build and the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k gae`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A group this Python cannot install (requirements/pythons.txt) is left out in one line, and its tests skip saying why.
bash "$root/scripts/setup.sh" --skip-unavailable dev docs plot tune atari box2d mujoco dm_control envpool jax procgen pettingzoo microrts newton
# Slurm's packages for tests/test_slurm.py's private one-node cluster (apt-get, as root); where they cannot be
# installed, that one line says why and those tests skip.
bash "$root/scripts/slurm-local.sh" install || echo "test: going on without Slurm: tests/test_slurm.py skips"
cd "$root"
echo "== ruff format --check"
.venv/bin/ruff format --check .
echo "== ruff check"
.venv/bin/ruff check .
echo "== mkdocs build --strict"
site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"  # built only to see that it builds
echo "== pytest"
# In parallel, on as many workers as the machine has cores (pytest-xdist); tests that share a made fixture or start
# processes of their own are kept together (tests/grouping.py). `-n 0` after these runs everything in this process,
# one test after another: `bash scripts/test.sh -n 0`.
# On a GPU, JAX would take most of its memory in each worker that imports it, and the next one would run out.
# pytest exits 5 when it collected no test: set -e makes that a failure, as it should be.
XLA_PYTHON_CLIENT_PREALLOCATE=false .venv/bin/python -m pytest -n auto --dist loadgroup "$@"
