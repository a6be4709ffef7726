"""A learning check for self-play: how an agent saved by `ppo_pettingzoo_ma_atari.py --save-model` does against
an opponent that picks its actions uniformly at random, beside the same games played by an untrained agent.

    python benchmark/vs_random.py runs/pong_v3__ppo_pettingzoo_ma_atari__1__.../ppo_pettingzoo_ma_atari.cleanrl_model

In self-play the training returns of a zero-sum game stay near zero whatever the agent learns, since it plays
itself; a fixed opponent gives a return that rises with skill. The agent takes each side of the game in turn
(game g: player g mod the number of players), the other players act at random. The return is the agent's
score over the whole game (in pong_v3: points won minus points lost, from -21 to +21).
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from speed import load


def play(agent, envs, games, seed):
    """Plays `games` games of the agent against random players; returns [(agent's return, game length)]."""
    import torch

    rng = np.random.default_rng(seed)
    num_players = envs.num_envs
    results = []
    for game in range(games):
        side = game % num_players
        obs, _ = envs.reset(seed=seed + game)
        episodic_return, length, done = 0.0, 0, False
        while not done:
            with torch.inference_mode():
                actions = agent.get_action(torch.as_tensor(obs)).numpy()
            random_actions = rng.integers(envs.single_action_space.n, size=num_players)
            actions = np.where(np.arange(num_players) == side, actions, random_actions)
            obs, rewards, terminations, truncations, _ = envs.step(actions)
            episodic_return += float(rewards[side])
            length += 1
            done = bool(terminations[side] or truncations[side])
        print(f"  game {game}: agent as player {side}, return {episodic_return:+.0f}, length {length}", file=sys.stderr)
        results.append((episodic_return, length))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, help="the .cleanrl_model file that --save-model wrote")
    parser.add_argument("--env-id", default="pong_v3")
    parser.add_argument("--games", type=int, default=10, help="games per agent")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not args.model.is_file():
        parser.exit(2, f"vs_random.py: error: no saved model at {args.model}; train with --save-model first\n")
    if args.games <= 0:
        parser.exit(2, f"vs_random.py: error: --games must be positive, got {args.games}\n")

    import torch

    mod = load("ppo_pettingzoo_ma_atari")
    problem = mod.check_env_id(args.env_id, 0)
    if problem:
        parser.exit(2, f"vs_random.py: error: {problem}\n")
    torch.set_num_threads(1)
    envs = mod.make_vector_env(args.env_id, mod.count_players(args.env_id), False, "vs-random")
    try:
        weights = torch.load(args.model, map_location="cpu")
        mod.Agent(envs).load_state_dict(weights)
    except Exception as e:
        envs.close()
        # the first line of a state-dict mismatch is a header: name the first mismatch instead
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        message = lines[1] if len(lines) > 1 else lines[0]
        parser.exit(
            2,
            f"vs_random.py: error: cannot load {args.model} as an agent for {args.env_id} ({message}); "
            "give the model that ppo_pettingzoo_ma_atari.py --save-model wrote for this game\n",
        )
    print(f"| {args.env_id} | games | return against random players (mean ± std) | game length | agent |")
    print("|---|---|---|---|---|")
    for name in ("untrained", "trained"):
        torch.manual_seed(args.seed)
        agent = mod.Agent(envs).to(memory_format=torch.channels_last)
        if name == "trained":
            agent.load_state_dict(weights)
        agent.eval()
        print(f"{name}:", file=sys.stderr)
        returns, lengths = np.array(play(agent, envs, args.games, args.seed)).T
        print(
            f"| {name} | {args.games} | {returns.mean():+.2f} ± {returns.std():.2f} | {lengths.mean():.0f} "
            f"| {args.model.parent.name if name == 'trained' else f'a fresh agent (torch seed {args.seed})'} |",
            flush=True,
        )
    envs.close()


if __name__ == "__main__":
    main()
