#!/usr/bin/env bash
# Sets up .venv (core requirements) and trains the default agent: ppo.py on CartPole-v1.
# Extra arguments go to ppo.py, e.g. `bash scripts/train.sh --seed 2`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
.venv/bin/python cleanrl/ppo.py --env-id CartPole-v1 "$@"
echo "TensorBoard logs are in runs/; view them with: .venv/bin/tensorboard --logdir runs"
