#!/usr/bin/env bash
# Runs, on every supported Python but the default (requirements/pythons.txt), the tests that show each script runs
# (tests/test_scripts.py's copied-alone runs) and the conformance tests: for each Python, a copy of this checkout
# (its tracked files and untracked ones git does not ignore) in a fresh folder, a .venv there made with that Python by
# scripts/setup.sh, then pytest there. The README's test command runs the whole suite on the default Python.
#   bash scripts/test-pythons.sh                                  # 3.12 and 3.13, found as below
#   PYTHONS="/usr/bin/python3.12" bash scripts/test-pythons.sh    # only these interpreters
# Without PYTHONS, Python X.Y is the first of pythonX.Y on PATH, pyenv's versions/X.Y*/bin/pythonX.Y,
# /usr/local/bin/pythonX.Y and /usr/bin/pythonX.Y that runs. Extra arguments go to pytest.
# The copies are removed afterwards unless KEEP=1; pip's cache (~/.cache/pip) is shared, so a second run is faster.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

fail() {
    echo "test-pythons: error: $*" >&2
    exit 2
}
read -r -a supported <<<"$(sed -n 's/^supported //p' requirements/pythons.txt)"
groups=(dev atari box2d mujoco dm_control envpool jax procgen pettingzoo microrts newton)

version_of() {
    "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}
find_python() {
    local v="$1" cand
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    for cand in "$(command -v "python$v" || true)" "$pyenv_root"/versions/"$v"*/bin/python"$v" \
        "/usr/local/bin/python$v" "/usr/bin/python$v"; do
        if [ -n "$cand" ] && [ -x "$cand" ] && [ "$(version_of "$cand")" = "$v" ]; then
            echo "$cand"
            return
        fi
    done
}

interpreters=()
if [ -n "${PYTHONS:-}" ]; then
    read -r -a interpreters <<<"$PYTHONS"
else
    for v in "${supported[@]:1}"; do
        found="$(find_python "$v")"
        [ -n "$found" ] || fail "no Python $v runs here: install it, or name the interpreters with PYTHONS=\"/path/to/python$v ...\""
        interpreters+=("$found")
    done
fi

summary=()
status=0
for py in "${interpreters[@]}"; do
    version="$(version_of "$py")"
    [ -n "$version" ] || fail "$py does not run"
    folder="$(mktemp -d "${TMPDIR:-/tmp}/cleanrl-python$version-XXXXXX")"
    echo "== Python $version ($py) in $folder"
    git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$folder"
    start=$(date +%s)
    PYTHON="$py" bash "$folder/scripts/setup.sh" --skip-unavailable "${groups[@]}"
    installed=$(date +%s)
    outcome="passed"
    (cd "$folder" && XLA_PYTHON_CLIENT_PREALLOCATE=false .venv/bin/python -m pytest -n auto --dist loadgroup \
        tests/test_conformance.py tests/test_scripts.py -k "conformance or copied_alone" "$@") || {
        outcome="FAILED"
        status=1
    }
    done_at=$(date +%s)
    summary+=("Python $version: set-up $((installed - start)) s, tests $((done_at - installed)) s, $outcome")
    if [ "${KEEP:-0}" = 1 ]; then
        echo "test-pythons: kept $folder"
    else
        rm -rf "$folder"
    fi
done
printf 'test-pythons: %s\n' "${summary[@]}"
exit "$status"
