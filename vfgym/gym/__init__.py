"""Gymnasium adapter: every vfgym environment as a `gymnasium.Env`.

    import gymnasium as gym
    import vfgym.gym  # registers the ids (Gymnasium's convention; see below)

    env = gym.make("vfgym/Wordle-v0", num_examples=50)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<move>crane</move>")

Importing this package registers a Gymnasium id for every environment in the
`vfgym.environments` entry-point group — Gymnasium 1.x dropped plugin discovery,
so, as with other Gymnasium environment packages, the ids exist once the package is
imported. `gym.make("vfgym.gym:vfgym/Wordle-v0")` imports it on the fly.
`register(id, loader, **defaults)` adds ids for your own environments, and
`GymEnv(env)` wraps an environment object directly.

Vector envs: `gym.make_vec(id, num_envs=8)` gives a `GymVectorEnv` (every id has it as
its `vector_entry_point`), which steps its sub-envs in this process — one after another
(`mode="sync"`, the default) or concurrently on one event loop (`mode="async"`, for
environments that wait on sandboxes or HTTP; see `vfgym.gym.vector`). Its infos are
batched as Gymnasium batches them, each value built when first read (`BatchedInfo`). Gymnasium's own
vector envs work too (`vectorization_mode="sync"` or `"async"`): the async one returns
the right strings (the text spaces bring their own shared-memory codec), and there each
step's `info["state"]` reaches the main process as a delta (the new messages, not the
whole conversation again), rebuilt into the same State (`vfgym.gym.shipping`). The
vector env's autoreset mode (NEXT_STEP by default, as in Gymnasium 1.x) decides what
happens after an episode ends; a single `GymEnv` refuses `step()` after the end with
`gymnasium.error.ResetNeeded`.

Speed: an environment whose hooks never wait (`env.hooks_are_sync`, every built-in game)
steps as plain sync code — no event loop, no coroutine — and its episode is scored with
`Rubric.score_rollout_sync` when its reward functions are sync.
"""

from vfgym.errors import SubEnvError
from vfgym.gym.batching import BatchedInfo
from vfgym.gym.env import GymEnv
from vfgym.gym.play import (
    Trajectory,
    aplay_episode,
    aplay_vector,
    play_episode,
    play_vector,
    unbatch_info,
)
from vfgym.gym.registration import make_env, make_vector_env, register, register_registry
from vfgym.gym.spaces import (
    DEFAULT_MAX_TEXT_LENGTH,
    MessagesSpace,
    ModelTurnSpace,
    UnicodeText,
)
from vfgym.gym.state_view import StateView
from vfgym.gym.vector import GymVectorEnv

#: name -> Gym id of the registry's environments, and name -> why one was skipped.
REGISTERED_IDS, SKIPPED = register_registry()

__all__ = [
    "DEFAULT_MAX_TEXT_LENGTH",
    "REGISTERED_IDS",
    "SKIPPED",
    "BatchedInfo",
    "GymEnv",
    "GymVectorEnv",
    "MessagesSpace",
    "ModelTurnSpace",
    "StateView",
    "SubEnvError",
    "Trajectory",
    "UnicodeText",
    "aplay_episode",
    "aplay_vector",
    "make_env",
    "make_vector_env",
    "play_episode",
    "play_vector",
    "register",
    "register_registry",
    "unbatch_info",
]
