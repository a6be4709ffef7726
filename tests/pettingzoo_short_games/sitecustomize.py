"""Put on PYTHONPATH by the tests (Python imports sitecustomize at startup): every PettingZoo Atari game ends after
200 frames, 50 agent steps, through PettingZoo's own truncation (`max_cycles`), so that a tiny run of random play
finishes games and a saved model's 10-game evaluation takes seconds. A whole game of Pong takes some 4,000 frames."""

import pettingzoo.atari.base_atari_env as base_atari_env  # not `from pettingzoo.atari import`: a DeprecatedModule

MAX_CYCLES = 200
full_length_init = base_atari_env.ParallelAtariEnv.__init__


def short_game_init(self, *args, **kwargs):
    full_length_init(self, *args, **kwargs)
    self.max_cycles = MAX_CYCLES


base_atari_env.ParallelAtariEnv.__init__ = short_game_init
