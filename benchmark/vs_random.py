"""A learning check for self-play: how an agent saved by `ppo_pettingzoo_ma_atari.py --save-model` does against
an opponent that picks its actions uniformly at random, beside the same games played by an untrained agent.

    python -m benchmark.vs_random runs/pong_v3__ppo_pettingzoo_ma_atari__1__.../ppo_pettingzoo_ma_atari.cleanrl_model
    python benchmark/vs_random.py MODEL --env-id boxing_v2 --games 20

In self-play the training returns of a zero-sum game stay near zero whatever the agent learns, since it plays
itself; a fixed opponent gives a return that rises with skill. The agent takes each side of the game in turn
(game g: player g mod the number of players), the other players act at random. The return is the agent's
score over the whole game (in pong_v3: points won minus points lost, from -21 to +21).
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file, from anywhere: find cleanrl_utils
from cleanrl_utils.scripts import error_line, load_script, vector_env  # noqa: E402


@dataclass
class Args:
    model: tyro.conf.Positional[Path]
    """the .cleanrl_model file that ppo_pettingzoo_ma_atari.py --save-model wrote"""
    env_id: str = "pong_v3"
    """the PettingZoo Atari game the model was trained on"""
    games: int = 10
    """games per agent"""
    seed: int = 1
    """seed of the games, the random players and the untrained agent"""


def fail(message):
    print(f"vs_random: error: {message}", file=sys.stderr)
    sys.exit(2)


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
                actions = agent.get_action_and_value(torch.as_tensor(obs))[0].numpy()
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
    args = tyro.cli(Args, prog="python -m benchmark.vs_random", description=__doc__)
    if not args.model.is_file():
        fail(f"no saved model at {args.model}; train with --save-model first")
    if args.games <= 0:
        fail(f"--games must be positive, got {args.games}")

    import torch

    script = load_script("ppo_pettingzoo_ma_atari")
    try:
        envs = vector_env(script, args.env_id, None)  # one game: a sub-environment per player
    except Exception as e:  # PettingZoo's error for a game it does not know
        fail(f"cannot make environment '{args.env_id}': {error_line(e)}")
    torch.set_num_threads(1)
    try:
        weights = torch.load(args.model, map_location="cpu")
        script.Agent(envs).load_state_dict(weights)
    except Exception as e:
        envs.close()
        fail(
            f"cannot load {args.model} as an agent for {args.env_id} ({error_line(e)}); "
            "give the model that ppo_pettingzoo_ma_atari.py --save-model wrote for this game"
        )
    print(f"| {args.env_id} | games | return against random players (mean ± std) | game length | agent |")
    print("|---|---|---|---|---|")
    for name in ("untrained", "trained"):
        torch.manual_seed(args.seed)
        agent = script.Agent(envs)
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
