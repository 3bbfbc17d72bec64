"""vfgym environments as a service: `vfgym serve-env` and `RemoteEnv`.

`EnvServer` serves any vfgym environment over OpenEnv's WebSocket protocol
(`vfgym.remote.protocol`), so OpenEnv's clients (TRL, verifiers' OpenEnv taskset,
SkyRL) and `RemoteEnv`, a `gymnasium.Env`, drive it from another process or machine.

Importing this package registers the Gymnasium id `vfgym/Remote-v0` (Gymnasium's
convention, as `vfgym.gym` does for its ids), so that
`gym.make_vec("vfgym/Remote-v0", num_envs=8, vectorization_mode="sync", url=URL)`
opens eight sessions.
"""

import gymnasium as gym

from vfgym.errors import RemoteEnvError, RemoteEnvUnavailable
from vfgym.remote.client import TOKEN_VARIABLE, RemoteSession
from vfgym.remote.env import RemoteEnv
from vfgym.remote.server import EnvServer

#: The Gymnasium id of a remote session; `url` (and `token`) are keyword arguments.
REMOTE_ID = "vfgym/Remote-v0"

if REMOTE_ID not in gym.registry:
    gym.register(REMOTE_ID, entry_point="vfgym.remote.env:RemoteEnv", disable_env_checker=True)

__all__ = [
    "REMOTE_ID",
    "TOKEN_VARIABLE",
    "EnvServer",
    "RemoteEnv",
    "RemoteEnvError",
    "RemoteEnvUnavailable",
    "RemoteSession",
]
