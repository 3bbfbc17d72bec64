"""`EnvServer` driven by OpenEnv's own client (`GenericEnvClient`) and by raw frames.

The protocol is OpenEnv's: these tests play whole episodes through its client, read
the HTTP routes it documents, and send the malformed frames a careless client sends,
checking the error codes OpenEnv's server uses and that the server outlives them all.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from remote_servers import AUTH

from vfgym.envs.registry import load_environment
from vfgym.remote.protocol import action_frame
from vfgym.remote.server import EnvServer


def guess_env() -> Any:
    return load_environment("guess-the-number")


def play_to_the_end(client: Any, env: Any, seed: int) -> list[Any]:
    """Play one episode with the environment's reference policy; the step results."""
    client.reset(seed=seed)
    results = []
    for _ in range(30):
        messages = client.state()["messages"]
        result = client.step(action_frame(env.reference_policy(messages)))
        results.append(result)
        if result.done:
            return results
    raise AssertionError("the episode did not end within 30 steps")


def test_openenv_client_plays_a_game_to_the_end(serve: Any, openenv_client: Any) -> None:
    env = guess_env()
    server = serve(env)
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as client:
        first = client.reset(seed=5)
        assert "number" in first.observation["text"].lower()
        assert first.done is False and first.reward is None
        assert first.metadata == {"terminated": False, "truncated": False, "turn": 0}
        results = play_to_the_end(client, env, seed=5)
    last = results[-1]
    assert last.done is True
    assert last.metadata["terminated"] is True and last.metadata["truncated"] is False
    assert last.reward == pytest.approx(last.metadata["episode_reward"]) and last.reward > 0
    assert last.metadata["stop_reason"]
    assert all(r.reward == 0.0 and not r.done for r in results[:-1])


def test_state_frame_holds_the_conversation_and_counts_steps(
    serve: Any, openenv_client: Any
) -> None:
    server = serve(guess_env())
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as client:
        client.reset(seed=1, episode_id="ep-1")
        client.step({"content": "<move>50</move>"})
        state = client.state()
    assert state["episode_id"] == "ep-1" and state["step_count"] == 1 and state["turn"] == 1
    assert state["done"] is False
    assert state["messages"][-2] == {"role": "assistant", "content": "<move>50</move>"}
    # The episode as the model saw it, and nothing of the hidden game state (the number).
    assert set(state) == {"episode_id", "step_count", "done", "turn", "messages", "stop_reason"}


def test_sessions_are_isolated(serve: Any, openenv_client: Any) -> None:
    """Two sessions with the same seed play their own episodes: neither sees the other's
    moves, and one ending leaves the other running."""
    env = guess_env()
    server = serve(env)
    with (
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as one,
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as two,
    ):
        assert one.reset(seed=9).observation == two.reset(seed=9).observation
        one.step({"content": "<move>10</move>"})
        two.step({"content": "<move>90</move>"})
        two.step({"content": "<move>80</move>"})
        seen_by_one = json.dumps(one.state()["messages"])
        assert "<move>10</move>" in seen_by_one and "<move>90</move>" not in seen_by_one
        assert one.state()["step_count"] == 1 and two.state()["step_count"] == 2
        play_to_the_end(one, env, seed=9)
        assert two.state()["done"] is False
        assert len(server.sessions) == 2


def test_step_before_reset_and_bad_actions_are_validation_errors(
    serve: Any, openenv_client: Any
) -> None:
    server = serve(guess_env())
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as client:
        with pytest.raises(RuntimeError, match=r"send a reset frame first.*VALIDATION_ERROR"):
            client.step({"content": "<move>5</move>"})
        client.reset(seed=0)
        with pytest.raises(RuntimeError, match=r"'content'.*VALIDATION_ERROR"):
            client.step({})
        with pytest.raises(RuntimeError, match=r"seed.*non-negative.*VALIDATION_ERROR"):
            client.reset(seed=-1)
        # The session survives its errors: the episode goes on.
        assert client.step({"content": "<move>5</move>"}).metadata["turn"] == 1


def test_capacity_reached_is_said_at_once(serve: Any, openenv_client: Any) -> None:
    server = serve(guess_env(), max_sessions=2)
    with (
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as one,
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as two,
    ):
        one.reset(seed=0)
        two.reset(seed=0)
        started = time.monotonic()
        with (
            openenv_client(base_url=server.base_url, headers=AUTH).sync() as third,
            pytest.raises(RuntimeError, match=r"at capacity \(2 of --max-sessions 2.*CAPACITY"),
        ):
            third.reset(seed=0)
        assert time.monotonic() - started < 5
    # Once a session closes, a new one gets in.
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as later:
        assert later.reset(seed=0).done is False


def test_token_is_required_except_for_health(serve: Any, openenv_client: Any) -> None:
    server = serve(guess_env())

    async def probe() -> dict[str, tuple[int, Any]]:
        seen = {}
        async with aiohttp.ClientSession() as http:
            for name, path, headers in (
                ("health", "/health", {}),
                ("schema-none", "/schema", {}),
                ("schema-wrong", "/schema", {"Authorization": "Bearer nope"}),
                ("schema", "/schema", AUTH),
                ("metadata", "/metadata", AUTH),
            ):
                async with http.get(server.base_url + path, headers=headers) as response:
                    seen[name] = (response.status, await response.json())
        return seen

    seen = asyncio.run(probe())
    assert seen["health"] == (200, {"status": "healthy"})
    assert seen["schema-none"][0] == 401 and "no bearer token" in seen["schema-none"][1]["error"]
    assert seen["schema-wrong"][0] == 401 and "wrong" in seen["schema-wrong"][1]["error"]
    status, schema = seen["schema"]
    assert status == 200 and set(schema) == {"action", "observation", "state"}
    assert "content" in schema["action"]["properties"]
    status, metadata = seen["metadata"]
    assert status == 200 and metadata["name"] == "guess-the-number" and metadata["description"]
    with (
        pytest.raises(ConnectionError, match="401"),
        openenv_client(base_url=server.base_url).sync() as client,
    ):
        client.reset()


def test_no_token_is_refused_off_loopback() -> None:
    with pytest.raises(ValueError, match=r"loopback only.*'0\.0\.0\.0' is not"):
        EnvServer(guess_env(), allow_no_token=True, host="0.0.0.0")
    with pytest.raises(ValueError, match="bearer token is required"):
        EnvServer(guess_env())


def test_no_token_on_loopback_serves_anyone(serve: Any, openenv_client: Any) -> None:
    server = serve(guess_env(), token=None, allow_no_token=True)
    with openenv_client(base_url=server.base_url).sync() as client:
        assert client.reset(seed=0).done is False


async def _raw_session(url: str, frames: list[Any], **connect: Any) -> list[Any]:
    """Send `frames` (text, or bytes) one by one; the server's answers, and how it closed."""
    answers: list[Any] = []
    async with (
        aiohttp.ClientSession(headers=AUTH) as http,
        http.ws_connect(url, **connect) as socket,
    ):
        for frame in frames:
            await (socket.send_bytes(frame) if isinstance(frame, bytes) else socket.send_str(frame))
            message = await socket.receive(timeout=10)
            if message.type is aiohttp.WSMsgType.TEXT:
                answers.append(json.loads(message.data))
            else:
                answers.append(("closed", socket.close_code))
                break
    return answers


def test_garbage_frames_get_openenv_error_codes(serve: Any) -> None:
    server = serve(guess_env())
    frames = [
        "{not json",
        json.dumps({"type": "teleport"}),
        json.dumps([1, 2]),
        json.dumps({"type": "step", "data": "crane"}),
        b"\xff\xfe binary garbage",
        json.dumps({"type": "reset", "data": {"seed": 3}}),
    ]
    answers = asyncio.run(_raw_session(server.ws_url, frames))
    codes = [a["data"]["code"] if a["type"] == "error" else a["type"] for a in answers]
    assert codes == [
        "INVALID_JSON",
        "UNKNOWN_TYPE",
        "VALIDATION_ERROR",
        "VALIDATION_ERROR",
        "INVALID_JSON",
        "observation",
    ]
    assert "Send one JSON object per frame" in answers[0]["data"]["message"]
    assert "reset, step, state, close" in answers[1]["data"]["message"]


def test_oversized_frame_ends_only_its_session(serve: Any, openenv_client: Any) -> None:
    server = serve(guess_env(), max_frame_bytes=4096)
    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as bystander:
        bystander.reset(seed=0)
        huge = json.dumps({"type": "step", "data": {"content": "x" * 10_000}})
        answers = asyncio.run(_raw_session(server.ws_url, [huge]))
        assert answers == [("closed", 1009)]
        assert bystander.step({"content": "<move>50</move>"}).metadata["turn"] == 1
    _wait_for(lambda: not server.sessions)
    assert server.ended.get("too_big") == 1


def test_client_disconnecting_mid_episode_ends_its_session(serve: Any) -> None:
    server = serve(guess_env())

    async def vanish() -> None:
        http = aiohttp.ClientSession(headers=AUTH)
        socket = await http.ws_connect(server.ws_url)
        await socket.send_str(json.dumps({"type": "reset", "data": {"seed": 1}}))
        await socket.receive(timeout=10)
        await socket.send_str(json.dumps({"type": "step", "data": {"content": "<move>7</move>"}}))
        # Gone without a close frame: the TCP connection is cut under the socket.
        transport = socket._response.connection.transport  # type: ignore[union-attr]
        transport.abort()
        await http.close()

    asyncio.run(vanish())
    _wait_for(lambda: not server.sessions)
    assert server.ended == {"client": 1}
    assert server.info()["active_sessions"] == 0


def test_idle_session_is_ended_with_a_reason(serve: Any) -> None:
    server = serve(guess_env(), idle_timeout=0.5)

    async def idle() -> list[Any]:
        async with (
            aiohttp.ClientSession(headers=AUTH) as http,
            http.ws_connect(server.ws_url) as socket,
        ):
            await socket.send_str(json.dumps({"type": "reset", "data": {"seed": 1}}))
            await socket.receive(timeout=10)
            error = await socket.receive(timeout=10)  # nothing sent: the server speaks
            closing = await socket.receive(timeout=10)
            return [json.loads(error.data), closing.type, socket.close_code]

    error, closing, code = asyncio.run(idle())
    assert error["data"]["code"] == "SESSION_ERROR"
    assert "--idle-timeout" in error["data"]["message"]
    assert closing in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED) and code == 1008
    _wait_for(lambda: not server.sessions)
    assert server.ended == {"idle": 1}


def test_a_client_silent_past_the_idle_timeout_leaves_others_unhurt(
    serve: Any, openenv_client: Any
) -> None:
    """A client that goes quiet past the idle timeout loses its session; a client
    stepping meanwhile is not slowed or disturbed."""
    server = serve(guess_env(), idle_timeout=1.0)
    with (
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as slow,
        openenv_client(base_url=server.base_url, headers=AUTH).sync() as fast,
    ):
        slow.reset(seed=0)
        fast.reset(seed=0)
        for guess in range(1, 9):
            started = time.monotonic()
            fast.step({"content": f"<move>{guess}</move>"})
            assert time.monotonic() - started < 2.0  # (a loaded machine: the point is no idle wait)
            time.sleep(0.25)
        # The server ended the slow session; OpenEnv's client reconnects on its next
        # call, which finds a new session with no episode in it.
        with pytest.raises(RuntimeError, match=r"no episode is running in this session"):
            slow.step({"content": "<move>1</move>"})
        assert fast.state()["step_count"] == 8
    assert server.ended.get("idle") == 1


def _wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the server"
        time.sleep(0.02)


def test_a_client_that_stops_reading_is_dropped(serve: Any, openenv_client: Any) -> None:
    """A client that asks and never reads fills the connection's buffers; the server
    drops it after `send_timeout` instead of holding its frames (and memory) forever,
    and a session alongside it goes on."""
    server = serve(guess_env(), send_timeout=0.5)

    async def stop_reading() -> None:
        async with (
            aiohttp.ClientSession(headers=AUTH) as http,
            http.ws_connect(server.ws_url) as socket,
        ):
            await socket.send_str(json.dumps({"type": "reset", "data": {"seed": 1}}))
            await socket.receive(timeout=10)
            padding = "x" * 50_000  # the conversation, and so each state frame, grows by it
            step = {"type": "step", "data": {"content": f"<move>5</move>{padding}"}}
            await socket.send_str(json.dumps(step))
            await socket.receive(timeout=10)
            for _ in range(400):  # about 20 MB of state frames asked for, none read
                await socket.send_str('{"type": "state"}')
            deadline = time.monotonic() + 30
            while "slow" not in server.ended and time.monotonic() < deadline:
                await asyncio.sleep(0.1)

    with openenv_client(base_url=server.base_url, headers=AUTH).sync() as bystander:
        bystander.reset(seed=0)
        asyncio.run(stop_reading())
        assert server.ended.get("slow") == 1
        assert bystander.step({"content": "<move>50</move>"}).metadata["turn"] == 1
    _wait_for(lambda: not server.sessions)
