#!/usr/bin/env bash
# Tables and learning curves of the PPO benchmarks (benchmark/ppo.sh), read from runs/ (or $RUNS_DIR):
# one report per block, into benchmark/results/BLOCK/ (table.md, curves_steps.png, curves_walltime.png).
#   bash benchmark/ppo_plot.sh classic atari
# Every block named is reported even when one fails (for example, no runs of it yet); the exit status says if any did.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    source .venv/bin/activate
fi

report() {
    local block="$1"
    shift
    python -m cleanrl_utils.report --runs-dir "${RUNS_DIR:-runs}" --output-dir "benchmark/results/$block" \
        --compare-reference "$@"
}

classic() {
    report classic --exp-names ppo --env-ids CartPole-v1 Acrobot-v1 MountainCar-v0
}

box2d() {
    # the runs of benchmark/ppo.sh box2d: ppo.py's defaults, the published and the tuned settings; the continuous
    # script's defaults and tuned settings
    report box2d --exp-names ppo ppo_zoo ppo_tuned ppo_continuous_action ppo_continuous_action_tuned \
        --env-ids LunarLander-v3 BipedalWalker-v3
}

atari() {
    report atari --exp-names ppo_atari ppo_atari_lstm ppo_atari_multigpu \
        --env-ids PongNoFrameskip-v4 BreakoutNoFrameskip-v4 BeamRiderNoFrameskip-v4
}

envpool() {
    report envpool --exp-names ppo_atari_envpool --env-ids Pong-v5 Breakout-v5 BeamRider-v5
}

jax() {
    # the JAX variants log fixed-shape averages of the finished episodes
    report jax --exp-names ppo_atari_envpool_xla_jax ppo_atari_envpool_xla_jax_scan \
        --env-ids Pong-v5 Breakout-v5 BeamRider-v5 --metric charts/avg_episodic_return
}

continuous() {
    # the environments of benchmark/ppo.sh continuous
    report continuous --exp-names ppo_continuous_action \
        --env-ids HalfCheetah-v4 Hopper-v4 Walker2d-v4 InvertedPendulum-v4 dm_control/cartpole-balance-v0
}

mujoco() {
    report mujoco --exp-names ppo_continuous_action \
        --env-ids HalfCheetah-v4 Walker2d-v4 Hopper-v4 InvertedPendulum-v4 Humanoid-v4 Pusher-v4
}

dm_control() {
    report dm_control --exp-names ppo_continuous_action \
        --env-ids dm_control/cartpole-balance-v0 dm_control/ball_in_cup-catch-v0 dm_control/reacher-easy-v0
}

procgen() {
    report procgen --exp-names ppo_procgen --env-ids starpilot bossfight bigfish
}

pettingzoo() {
    # self-play: the reference compares episode lengths (both players share an episode)
    report pettingzoo --exp-names ppo_pettingzoo_ma_atari --env-ids pong_v3 surround_v2 \
        --metric charts/episodic_length-player0
}

microrts() {
    # the runs of benchmark/ppo.sh microrts: each script on its own Gym-μRTS task
    report microrts --exp-names ppo_multidiscrete ppo_multidiscrete_mask \
        --env-ids MicrortsMining-v1 MicrortsProduceCombatUnitsShapedReward-v1
}

isaacgym() {
    report isaacgym --exp-names ppo_continuous_action_isaacgym --env-ids Ant Humanoid Cartpole
}

blocks=(classic box2d atari envpool jax continuous mujoco dm_control procgen pettingzoo isaacgym microrts)
if [ $# -eq 0 ]; then
    echo "usage: bash benchmark/ppo_plot.sh BLOCK [BLOCK ...]; blocks: ${blocks[*]}" >&2
    exit 2
fi
for block in "$@"; do
    if [[ ! " ${blocks[*]} " =~ " $block " ]]; then
        echo "ppo_plot.sh: error: no block '$block'; blocks: ${blocks[*]}" >&2
        exit 2
    fi
done
failed=()
for block in "$@"; do
    echo "== $block"
    "$block" || failed+=("$block")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "ppo_plot.sh: no report for: ${failed[*]}" >&2
    exit 1
fi
