"""`RemoteEnv`: an environment served by `vfgym serve-env`, as a `gymnasium.Env`.

    env = RemoteEnv("http://envs.internal:8765", token="s3cret")
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("<move>crane</move>")

The spaces are those of `GymEnv` (text observations bounded as the server bounds them;
the model's turn as the action, text or an assistant message with `tool_calls`), so
code written against `gym.make("vfgym/...")` runs against a remote server unchanged.
`info` is the observation frame's metadata: `terminated`, `truncated`, `turn` and, on
the last step, `stop_reason`, `episode_reward` and `metrics`.

`gym.make_vec("vfgym/Remote-v0", num_envs=N, vectorization_mode="sync", url=...)`
opens N sessions (`vfgym.remote` registers the id). Sync calls run on a private event
loop; asyncio code uses `areset`/`astep`/`aclose` on its own loop instead (one or the
other for a given env: its connection belongs to the loop that opened it).
Every wait is bounded by `timeout` (see `RemoteSession`): a dead server is a
`RemoteEnvUnavailable` within it, never a hang.
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym

from vfgym.errors import RemoteEnvError
from vfgym.gym.spaces import ModelTurnSpace, UnicodeText
from vfgym.remote.client import RemoteSession
from vfgym.remote.protocol import action_frame


class RemoteEnv(gym.Env[str, Any]):
    """A `gymnasium.Env` over a session on the env server at `url`.

    Args:
        url: the server (http://HOST:PORT, or its ws:// address).
        token: the server's bearer token (default: the `VFGYM_ENV_TOKEN` variable).
        timeout: seconds to wait for each answer before giving up with
            `RemoteEnvUnavailable`.
        connect_timeout: seconds to wait for the connection.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.session = RemoteSession(url, token, timeout=timeout, connect_timeout=connect_timeout)
        self.url = self.session.base_url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner: asyncio.AbstractEventLoop | None = None
        self._done = True
        self._closed = False
        info = self.session.info()
        self.server_info: dict[str, Any] = info
        self.observation_space = UnicodeText(int(info["max_text_length"]))
        self.action_space = ModelTurnSpace(int(info["max_text_length"]), chat=bool(info["chat"]))

    # ------------------------------------------------------------------ sync

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server (with `seed`, the server draws its row from it)."""
        return self._run(self.areset(seed=seed, options=options), "reset")

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send the model's turn; the server's answer as Gymnasium's five-tuple."""
        return self._run(self.astep(action), "step")

    def close(self) -> None:
        """Close the session (its episode's cleanup runs on the server) and the loop."""
        if self._closed:
            return
        try:
            if self._owner is None or self._owner is self._loop:
                self._run(self.session.close(), "close")
        finally:
            self._closed = True
            if self._loop is not None:
                self._loop.close()
                self._loop = None

    # ------------------------------------------------------------------ async

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """`reset` for asyncio code."""
        self._claim_loop("areset")
        super().reset(seed=seed)
        data = await self.session.reset(seed, options)
        self._done = False
        return _text(data), dict(data.get("metadata") or {})

    async def astep(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """`step` for asyncio code."""
        self._claim_loop("astep")
        if self._done:
            raise gym.error.ResetNeeded(
                "the episode is over (or never started): call reset() before step()"
            )
        try:
            data = await self.session.step(action_frame(action))
        except RemoteEnvError as exc:
            if exc.code != "VALIDATION_ERROR":
                self._done = True  # the server ended the episode
            raise
        except Exception:
            self._done = True
            raise
        metadata = dict(data.get("metadata") or {})
        terminated = bool(metadata.get("terminated", data.get("done", False)))
        truncated = bool(metadata.get("truncated", False))
        self._done = terminated or truncated
        reward = data.get("reward")
        return _text(data), float(reward or 0.0), terminated, truncated, metadata

    async def aclose(self) -> None:
        """`close` for asyncio code."""
        if self._closed:
            return
        self._closed = True
        await self.session.close()

    async def astate(self) -> dict[str, Any]:
        """The server's view of the episode so far (its messages, turn, step count)."""
        self._claim_loop("astate")
        return await self.session.state()

    def state(self) -> dict[str, Any]:
        """The server's view of the episode so far (its messages, turn, step count)."""
        return self._run(self.astate(), "state")

    # ------------------------------------------------------------------ loops

    def _run(self, coro: Any, call: str) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                f"RemoteEnv.{call} was called inside a running event loop; await the async "
                "form instead (areset, astep, astate, aclose)"
            )
        if self._closed:
            coro.close()
            raise RuntimeError("this RemoteEnv is closed; make a new one")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def _claim_loop(self, call: str) -> None:
        loop = asyncio.get_running_loop()
        if self._closed:
            raise RuntimeError("this RemoteEnv is closed; make a new one")
        if self._owner is None:
            self._owner = loop
        elif self._owner is not loop:
            raise RuntimeError(
                f"RemoteEnv.{call}: this env's session was opened on another event loop; use "
                "one env per loop (sync calls run on the env's own loop, async ones on yours)"
            )

    def __repr__(self) -> str:
        return f"<RemoteEnv {self.server_info.get('env_id')} at {self.url}>"


def _text(data: dict[str, Any]) -> str:
    observation = data.get("observation") or {}
    text = observation.get("text") if isinstance(observation, dict) else None
    if not isinstance(text, str):
        raise RemoteEnvError(
            f"the server's observation has no text ({observation!r}); is it a vfgym env server?",
            "VALIDATION_ERROR",
        )
    return text
