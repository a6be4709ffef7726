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

continuous() {
# --8<-- [start:continuous]
python -m cleanrl_utils.benchmark \
    --env-ids HalfCheetah-v4 Hopper-v4 Walker2d-v4 InvertedPendulum-v4 dm_control/cartpole-balance-v0 \
    --command "python cleanrl/ppo_continuous_action.py --no-cuda" \
    --num-seeds 3 \
    --workers 2
# --8<-- [end:continuous]
}

box2d() {
# --8<-- [start:box2d]
# LunarLander-v3 with ppo.py's defaults, with RL Baselines3 Zoo's published PPO settings, and with the settings the
# tuner found (docs/tuning.md); BipedalWalker-v3 with ppo_continuous_action.py's defaults and with the settings the
# tuner found. 1M steps, 3 seeds.
python -m cleanrl_utils.benchmark \
    --env-ids LunarLander-v3 \
    --command "python cleanrl/ppo.py --no-cuda --total-timesteps 1000000" \
    --num-seeds 3 \
    --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids LunarLander-v3 \
    --command "python cleanrl/ppo.py --no-cuda --exp-name ppo_zoo --total-timesteps 1000000 --num-envs 16 --num-steps 1024 --num-minibatches 256 --update-epochs 4 --gamma 0.999 --gae-lambda 0.98 --ent-coef 0.01 --learning-rate 0.0003 --no-anneal-lr --no-clip-vloss" \
    --num-seeds 3 \
    --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids LunarLander-v3 \
    --command "python cleanrl/ppo.py --no-cuda --exp-name ppo_tuned --total-timesteps 1000000 --num-envs 16 --num-steps 256 --num-minibatches 128 --update-epochs 6 --learning-rate 0.00129 --anneal-lr --gamma 0.99 --gae-lambda 0.98 --ent-coef 0.00058 --clip-coef 0.1 --no-clip-vloss" \
    --num-seeds 3 \
    --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids BipedalWalker-v3 \
    --command "python cleanrl/ppo_continuous_action.py --no-cuda" \
    --num-seeds 3 \
    --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids BipedalWalker-v3 \
    --command "python cleanrl/ppo_continuous_action.py --no-cuda --exp-name ppo_continuous_action_tuned --total-timesteps 1000000 --num-envs 4 --num-steps 2048 --num-minibatches 32 --update-epochs 6 --learning-rate 0.000727 --anneal-lr --gamma 0.999 --gae-lambda 0.9 --clip-coef 0.3 --no-clip-vloss" \
    --num-seeds 3 \
    --workers 2
# --8<-- [end:box2d]
}

atari() {
# --8<-- [start:atari]
python -m cleanrl_utils.benchmark \
    --env-ids PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 \
    --command "python cleanrl/ppo_atari.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:atari]
# --8<-- [start:atari_lstm]
python -m cleanrl_utils.benchmark \
    --env-ids PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 \
    --command "python cleanrl/ppo_atari_lstm.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:atari_lstm]
# --8<-- [start:atari_multigpu]
# two processes of 4 environments each: the 8 environments of ppo_atari.py; one thread per process
python -m cleanrl_utils.benchmark \
    --env-ids PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 \
    --command "torchrun --standalone --nnodes=1 --nproc_per_node=2 cleanrl/ppo_atari_multigpu.py --local-num-envs 4" \
    --num-seeds 3 \
    --workers 1 \
    --threads-per-run 1
# --8<-- [end:atari_multigpu]
}

envpool() {
# --8<-- [start:envpool]
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_envpool.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:envpool]
}

jax() {
# --8<-- [start:jax]
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_envpool_xla_jax.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:jax]
# --8<-- [start:jax_scan]
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_envpool_xla_jax_scan.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:jax_scan]
}

isaacgym() {
# --8<-- [start:isaacgym]
# IsaacGymEnvs' tasks on Newton (bash scripts/setup.sh newton) at the reference's settings, on a GPU, one run at a time
python -m cleanrl_utils.benchmark \
    --env-ids Ant Humanoid Cartpole \
    --command "python cleanrl/ppo_continuous_action_isaacgym.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:isaacgym]
}

isaacgym_cpu() {
# --8<-- [start:isaacgym_cpu]
# Ant on a 2-core CPU: 2048 copies, the most steps a second measured there (about 5,000), one thread a run (two
# threads contend and run several times slower), 180 iterations of 16 steps: 21 to 23 minutes a seed with two runs
# side by side, one core each (45 minutes for the three)
python -m cleanrl_utils.benchmark \
    --env-ids Ant \
    --command "python cleanrl/ppo_continuous_action_isaacgym.py --no-cuda --num-envs 2048 --total-timesteps 5898240" \
    --num-seeds 3 \
    --workers 2 \
    --threads-per-run 1
# --8<-- [end:isaacgym_cpu]
}

procgen() {
# --8<-- [start:procgen]
python -m cleanrl_utils.benchmark \
    --env-ids starpilot bossfight bigfish \
    --command "python cleanrl/ppo_procgen.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:procgen]
}

pettingzoo() {
# --8<-- [start:pettingzoo]
python -m cleanrl_utils.benchmark \
    --env-ids pong_v3 surround_v2 tennis_v3 \
    --command "python cleanrl/ppo_pettingzoo_ma_atari.py" \
    --num-seeds 3 \
    --workers 1
# --8<-- [end:pettingzoo]
}

microrts() {
# --8<-- [start:microrts]
# Gym-μRTS (bash scripts/setup.sh microrts), one core a run, fewer steps than the reference's 2M so that the six
# runs fit in about 45 minutes of one core: the masked agent first, then the plain one
python -m cleanrl_utils.benchmark \
    --env-ids MicrortsProduceCombatUnitsShapedReward-v1 \
    --command "python cleanrl/ppo_multidiscrete_mask.py --no-cuda --total-timesteps 200000" \
    --num-seeds 3 \
    --workers 1 \
    --threads-per-run 1
python -m cleanrl_utils.benchmark \
    --env-ids MicrortsMining-v1 \
    --command "python cleanrl/ppo_multidiscrete.py --no-cuda --total-timesteps 200000" \
    --num-seeds 3 \
    --workers 1 \
    --threads-per-run 1
# --8<-- [end:microrts]
}

torchcompile() {
# --8<-- [start:torchcompile]
# Does a compiled sibling learn what its parent learns? Both run the same seeds, then the comparison (IQMs, the
# difference of the means with its bootstrap interval, the verdict) goes into benchmark/results/OUTPUT/.
# Usage: learn_the_same PARENT SIBLING OUTPUT SEEDS WORKERS "EXTRA FLAGS" ENV_ID [ENV_ID ...]
learn_the_same() {
    local parent=$1 sibling=$2 output=$3 seeds=$4 workers=$5 flags=$6
    shift 6
    for script in "$parent" "$sibling"; do
        python -m cleanrl_utils.benchmark \
            --env-ids "$@" \
            --command "python cleanrl/$script.py --no-cuda${flags:+ $flags}" \
            --num-seeds "$seeds" \
            --workers "$workers" \
            --threads-per-run 1
    done
    python -m cleanrl_utils.report --compare "$parent" "$sibling" --output-dir "benchmark/results/$output"
}
learn_the_same ppo ppo_torchcompile torchcompile 10 2 "" CartPole-v1 Acrobot-v1
# The continuous sibling at the parent's default budget of 1M steps: 144 seeds on HalfCheetah, added block by block
# until the test decided, and 25 on Hopper, where 5 gave a verdict that 5 more did not bear out and 25 decided it.
# The second report takes in both tasks' runs.
learn_the_same ppo_continuous_action ppo_continuous_action_torchcompile torchcompile_continuous 144 2 "" HalfCheetah-v4
learn_the_same ppo_continuous_action ppo_continuous_action_torchcompile torchcompile_continuous 25 2 "" Hopper-v4
# The EnvPool sibling on Breakout, 500k steps, 5 seeds: about 4 hours of a 2-core CPU (2M steps would take 15).
# On a GPU, for the parent's 10M steps, drop --total-timesteps here and --no-cuda in learn_the_same.
learn_the_same ppo_atari_envpool ppo_atari_envpool_torchcompile torchcompile_envpool 5 2 \
    "--total-timesteps 500000" Breakout-v5
# --8<-- [end:torchcompile]
}

blocks=(classic box2d continuous atari envpool jax isaacgym isaacgym_cpu procgen pettingzoo microrts torchcompile)
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
