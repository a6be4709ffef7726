#!/usr/bin/env bash
# Reproduces the PPO benchmarks: every block runs one variant over its environments and seeds.
# Run one block at a time on a small machine, e.g. `bash benchmark/ppo.sh classic`; the docs quote these blocks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    source .venv/bin/activate
fi

classic() {
# --8<-- [start:classic]
python -m cleanrl_utils.benchmark \
    --env-ids CartPole-v1 Acrobot-v1 MountainCar-v0 \
    --command "python cleanrl/ppo.py --no-cuda" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:classic]
}

isaacgym() {
# --8<-- [start:isaacgym]
python -m cleanrl_utils.benchmark \
    --env-ids Cartpole Ant Humanoid BallBalance Anymal \
    --command "python cleanrl/ppo_continuous_action_isaacgym.py" \
    --num-seeds 3 \
    --workers 1
python -m cleanrl_utils.benchmark \
    --env-ids AllegroHand ShadowHand \
    --command "python cleanrl/ppo_continuous_action_isaacgym.py --num-envs 8192 --num-steps 8 --num-minibatches 4 --update-epochs 5 --reward-scaler 0.01 --total-timesteps 600000000" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:isaacgym]
}

blocks=(classic isaacgym)
if [ $# -eq 0 ]; then
    echo "usage: bash benchmark/ppo.sh BLOCK [BLOCK ...]; blocks: ${blocks[*]}" >&2
    exit 2
fi
for block in "$@"; do
    if ! declare -F "$block" >/dev/null; then
        echo "ppo.sh: error: no block '$block'; blocks: ${blocks[*]}" >&2
        exit 2
    fi
    "$block"
done
