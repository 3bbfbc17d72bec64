"""The built-in catalogue of text games and tool tasks, installed as `vfgym.games`.

Each game is one module with a `load_environment(**kwargs)` function; every one is
registered through the `vfgym.environments` entry-point group, the same mechanism a
third-party package of games uses.
"""

from vfgym.games._base import TextGame, move_message

from vfgym.errors import InvalidMove

__all__ = ["InvalidMove", "TextGame", "move_message"]
