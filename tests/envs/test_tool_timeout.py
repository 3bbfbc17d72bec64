"""Per-call time limits for tools: `ToolEnv(tool_timeout=..., tool_timeouts={...})`.

Each test drives a real ToolEnv through rollouts against the project's model server on
loopback (or a real `Offloader`), with tools that really block: a thread waiting on an
event, a coroutine sleeping. The events are set when each test ends, so no thread
outlives the test by more than a moment.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_models import scripted

from vfgym.engine.offload import LIMITED_WORKERS, AbandonedThreadsError, Offloader
from vfgym.envs import ToolEnv
from vfgym.errors import CallTimeoutError, ToolTimeoutError

QUESTION = [{"role": "user", "content": "Look it up."}]
ROWS = [{"prompt": QUESTION, "answer": "x"}]


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def tool_replies(completion: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in completion if m["role"] == "tool"]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends: every blocked tool thread then returns."""
    event = threading.Event()
    yield event
    event.set()


def blocking_tools(release: threading.Event) -> tuple[Any, Any, list[str]]:
    """(hang, quick, finished): `hang` blocks until `release` is set, then returns
    "LATE RESULT" and records that it finished; `quick` answers at once."""
    finished: list[str] = []

    def hang(key: str) -> str:
        """Look a key up in a store that never answers.

        Args:
            key: The key.
        """
        release.wait(30)
        finished.append(key)
        return "LATE RESULT"

    def quick(key: str) -> str:
        """Look a key up in a store that answers.

        Args:
            key: The key.
        """
        return f"value of {key}"

    return hang, quick, finished


def wait_until(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# -- the model is told, and the rollout goes on --------------------------------------


async def test_a_sync_tool_that_never_returns_is_given_up_and_the_rollout_goes_on(
    model_server: Any, release: threading.Event
) -> None:
    hang, quick, _ = blocking_tools(release)
    policy = scripted(
        [call("hang", {"key": "a"}, "c1")], [call("quick", {"key": "b"}, "c2")], "done"
    )
    server = await model_server(policy)
    env = ToolEnv(tools=[hang, quick], dataset=ROWS, tool_timeout=0.3)
    started = time.monotonic()
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    assert time.monotonic() - started < 10
    first, second = tool_replies(completion)
    assert "tool hang did not finish within 0.3 s" in first
    assert first.startswith("Error: ToolTimeoutError: ")
    assert second == "value of b"
    assert completion[-1]["content"] == "done"
    assert [e["ok"] for e in state["tool_call_log"]] == [False, True]
    assert "error" not in state


async def test_an_async_tool_past_its_limit_is_cancelled(model_server: Any) -> None:
    cancelled: list[bool] = []

    async def stall(key: str) -> str:
        """Wait for a slow service.

        Args:
            key: The key.
        """
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    server = await model_server(scripted([call("stall", {"key": "a"}, "c1")], "done"))
    env = ToolEnv(tools=[stall], dataset=ROWS, tool_timeout=0.2)
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    assert cancelled == [True]
    (reply,) = tool_replies(completion)
    assert "tool stall did not finish within 0.2 s" in reply
    assert completion[-1]["content"] == "done"


async def test_a_late_result_of_an_abandoned_call_is_discarded(
    model_server: Any, release: threading.Event
) -> None:
    hang, quick, finished = blocking_tools(release)
    policy = scripted(
        [call("hang", {"key": "a"}, "c1")], [call("quick", {"key": "b"}, "c2")], "done"
    )
    server = await model_server(policy)
    env = ToolEnv(tools=[hang, quick], dataset=ROWS, tool_timeout=0.2)
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    release.set()  # the abandoned thread now finishes, with a result nobody waits for
    assert await asyncio.to_thread(wait_until, lambda: env.offloader.abandoned_calls == 0)
    await asyncio.sleep(0.05)  # a delivery the loop would run, if there were one
    assert finished == ["a"]
    assert "LATE RESULT" not in json.dumps(completion)
    assert "LATE RESULT" not in json.dumps([r["messages"] for r in server.requests])
    assert len(tool_replies(completion)) == 2


async def test_a_tool_under_its_limit_answers_as_usual(model_server: Any) -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

    def tagged(key: str) -> str:
        """Read a key, tagged with the caller's request id.

        Args:
            key: The key.
        """
        return f"{key}@{request_id.get()}@{threading.current_thread().name}"

    async def remote(key: str) -> dict[str, str]:
        """Read a key from a service.

        Args:
            key: The key.
        """
        await asyncio.sleep(0.01)
        return {"key": key}

    policy = scripted([call("tagged", {"key": "a"}, "c1"), call("remote", {"key": "b"}, "c2")], "x")
    server = await model_server(policy)
    env = ToolEnv(tools=[tagged, remote], dataset=ROWS, tool_timeout=5)
    request_id.set("r7")
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    first, second = tool_replies(completion)
    key, seen_id, thread = first.split("@")
    assert (key, seen_id) == ("a", "r7")  # the caller's context variables reach the thread
    assert thread != threading.current_thread().name  # a limited sync tool runs in a thread
    assert second == '{"key": "b"}'
    assert [e["ok"] for e in state["tool_call_log"]] == [True, True]


async def test_a_timeout_the_tool_raises_itself_is_its_own_error(model_server: Any) -> None:
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: The address.
        """
        raise TimeoutError("the socket timed out after 3 s")

    server = await model_server(scripted([call("fetch", {"url": "x"}, "c1")], "done"))
    env = ToolEnv(tools=[fetch], dataset=ROWS, tool_timeout=5)
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    (reply,) = tool_replies(completion)
    assert reply == "Error: TimeoutError: the socket timed out after 3 s"


async def test_a_limit_holds_with_offload_sync_never(
    model_server: Any, release: threading.Event
) -> None:
    hang, _, _ = blocking_tools(release)
    server = await model_server(scripted([call("hang", {"key": "a"}, "c1")], "done"))
    env = ToolEnv(tools=[hang], dataset=ROWS, tool_timeout=0.2, offload_sync="never")
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    assert "tool hang did not finish within 0.2 s" in tool_replies(completion)[0]
    assert completion[-1]["content"] == "done"


# -- per tool -----------------------------------------------------------------------


async def test_a_per_tool_limit_overrides_the_environment_wide_one(model_server: Any) -> None:
    def slowish(key: str) -> str:
        """Look a key up slowly.

        Args:
            key: The key.
        """
        time.sleep(0.5)
        return f"slow {key}"

    async def stall(key: str) -> str:
        """Wait for a slow service.

        Args:
            key: The key.
        """
        await asyncio.sleep(0.5)
        return f"stalled {key}"

    turn = [call("slowish", {"key": "a"}, "c1"), call("stall", {"key": "b"}, "c2")]
    server = await model_server(scripted(turn, "done"))
    env = ToolEnv(
        tools=[slowish, stall],
        dataset=ROWS,
        tool_timeout=0.1,
        tool_timeouts={"slowish": None, "stall": 5},
    )
    assert env.tool_time_limit("slowish") is None
    assert env.tool_time_limit("stall") == 5
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    assert tool_replies(completion) == ["slow a", "stalled b"]

    only_stall = ToolEnv(tools=[slowish, stall], dataset=ROWS, tool_timeouts={"stall": 0.1})
    assert only_stall.tool_time_limit("slowish") is None
    completion, _ = await only_stall.rollout(server.client(), "m", QUESTION)
    first, second = tool_replies(completion)
    assert first == "slow a"
    assert "tool stall did not finish within 0.1 s" in second


async def test_a_per_tool_limit_for_a_tool_not_offered_is_refused_at_the_start(
    model_server: Any,
) -> None:
    def quick(key: str) -> str:
        """Read a key.

        Args:
            key: The key.
        """
        return key

    server = await model_server(scripted("done"))
    env = ToolEnv(tools=[quick], dataset=ROWS, tool_timeouts={"quikc": 1})
    _, state = await env.rollout(server.client(), "m", QUESTION)
    message = state["error"]["message"]
    assert "tool_timeouts names 'quikc'" in message and "quick" in message
    assert server.requests == []  # refused before the model was asked anything
    env.add_tool(lambda_free_tool := _named("quikc"))
    assert env.tool_time_limit(lambda_free_tool.__name__) == 1
    _, state = await env.rollout(server.client(), "m", QUESTION)
    assert "error" not in state


def _named(name: str) -> Any:
    def tool() -> str:
        """A tool."""
        return name

    tool.__name__ = name
    return tool


# -- validation ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "5", True, [1]])
def test_a_tool_timeout_that_is_not_a_positive_finite_number_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"tool_timeout must be a positive, finite number"):
        ToolEnv(tools=[], dataset=ROWS, tool_timeout=bad)


def test_bad_per_tool_limits_are_refused_with_the_tool_named() -> None:
    with pytest.raises(ValueError, match=r"tool_timeouts\['lookup'\] must be a positive"):
        ToolEnv(tools=[], dataset=ROWS, tool_timeouts={"lookup": -2})
    with pytest.raises(ValueError, match="tool_timeouts must map tool names"):
        ToolEnv(tools=[], dataset=ROWS, tool_timeouts=[("lookup", 2)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_timeouts must map tool names"):
        ToolEnv(tools=[], dataset=ROWS, tool_timeouts={3: 2})  # type: ignore[dict-item]


def test_whole_and_fractional_seconds_are_accepted() -> None:
    env = ToolEnv(tools=[], dataset=ROWS, tool_timeout=30, tool_timeouts={"a": 0.5, "b": None})
    assert env.tool_timeout == 30.0 and env.tool_timeouts == {"a": 0.5, "b": None}
    assert ToolEnv(tools=[], dataset=ROWS).tool_timeout is None  # no limit unless asked


# -- the worker threads: bounded, never used up ---------------------------------------


async def test_abandoned_calls_do_not_use_up_the_threads_of_later_calls(
    model_server: Any, release: threading.Event
) -> None:
    hang, quick, _ = blocking_tools(release)
    given_up = LIMITED_WORKERS + 3  # more than the pool's workers (and the default executor's)
    turns: list[Any] = [[call("hang", {"key": str(i)}, f"h{i}")] for i in range(given_up)]
    policy = scripted(*turns, [call("quick", {"key": "z"}, "q")], "done")
    server = await model_server(policy)
    env = ToolEnv(tools=[hang, quick], dataset=ROWS, tool_timeout=0.1, max_turns=given_up + 3)
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    replies = tool_replies(completion)
    assert all("did not finish within 0.1 s" in r for r in replies[:-1]), replies
    assert replies[-1] == "value of z"
    assert env.offloader.abandoned_calls == given_up
    # Nor do they hold the loop's default executor, which the rest of the process uses.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
    release.set()
    assert await asyncio.to_thread(wait_until, lambda: env.offloader.abandoned_calls == 0)


async def test_past_the_bound_on_abandoned_threads_a_call_is_refused_clearly(
    model_server: Any, release: threading.Event
) -> None:
    hang, quick, finished = blocking_tools(release)
    turns: list[Any] = [[call("hang", {"key": str(i)}, f"h{i}")] for i in range(3)]
    policy = scripted(*turns, [call("quick", {"key": "z"}, "q")], "done")
    server = await model_server(policy)
    env = ToolEnv(tools=[hang, quick], dataset=ROWS, tool_timeout=0.1)
    env.offloader = Offloader("auto", max_abandoned=2)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    replies = tool_replies(completion)
    assert "did not finish within 0.1 s" in replies[0] and "did not finish" in replies[1]
    for refused in replies[2:]:  # not run at all: no third thread is started
        assert "was not run" in refused and "2 earlier calls" in refused, refused
    assert "error" not in state
    release.set()
    assert await asyncio.to_thread(wait_until, lambda: env.offloader.abandoned_calls == 0)
    assert sorted(finished) == ["0", "1"]
    _, state = await env.rollout(server.client(), "m", QUESTION)  # room again
    assert [e["ok"] for e in state["tool_call_log"]][-1] is True


async def test_time_spent_waiting_for_a_worker_does_not_count_against_the_limit() -> None:
    offloader = Offloader("always", limited_workers=1)

    def work(tag: str) -> str:
        time.sleep(0.3)
        return tag

    started = time.monotonic()
    results = await asyncio.gather(
        offloader.call_limited(0.6, work, "a"), offloader.call_limited(0.6, work, "b")
    )
    assert results == ["a", "b"]  # the second waited 0.3 s for the one worker, then ran
    assert time.monotonic() - started >= 0.55


async def test_a_cancelled_caller_abandons_its_running_call(release: threading.Event) -> None:
    offloader = Offloader("always", limited_workers=1)
    hang, _, finished = blocking_tools(release)
    running = asyncio.ensure_future(offloader.call_limited(30, hang, "a"))
    queued = asyncio.ensure_future(offloader.call_limited(30, hang, "b"))
    await asyncio.sleep(0.2)
    queued.cancel()  # first: once "a" is abandoned, a new worker would take "b" at once
    await asyncio.gather(queued, return_exceptions=True)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert offloader.abandoned_calls == 1  # the queued one never started
    assert await offloader.call_limited(5, str.upper, "still served") == "STILL SERVED"
    release.set()
    assert await asyncio.to_thread(wait_until, lambda: offloader.abandoned_calls == 0)
    assert finished == ["a"]


async def test_the_offloader_raises_its_own_errors() -> None:
    offloader = Offloader("auto", max_abandoned=1)
    gate = threading.Event()
    try:
        with pytest.raises(CallTimeoutError, match=r"did not finish within 0\.1 s"):
            await offloader.call_limited(0.1, gate.wait, 30)
        with pytest.raises(AbandonedThreadsError, match="1 earlier call"):
            await offloader.call_limited(0.1, gate.wait, 30)
    finally:
        gate.set()
    assert await asyncio.to_thread(wait_until, lambda: offloader.abandoned_calls == 0)
    assert await offloader.call_limited(None, str.lower, "NO LIMIT") == "no limit"
    with pytest.raises(ValueError, match="max_abandoned"):
        Offloader("auto", max_abandoned=0)


def test_tool_timeout_error_names_the_tool_and_the_limit() -> None:
    exc = ToolTimeoutError("lookup", 2.5)
    assert isinstance(exc, TimeoutError)
    assert str(exc).startswith("tool lookup did not finish within 2.5 s")
    assert (exc.tool, exc.limit) == ("lookup", 2.5)


# -- sandbox-backed tools --------------------------------------------------------------


def _sandbox_or_skip() -> Any:
    """The sandbox modules, when a Docker Engine and the sandbox image are there."""
    from vfgym.errors import SandboxError
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.image import default_image, image_exists

    try:
        client = make_client(None, timeout=60)
    except SandboxError as exc:
        reason = f"no Docker Engine: {exc}"
    else:
        try:
            if image_exists(client, default_image()):
                return
            reason = f"the sandbox image {default_image()} is not built"
        finally:
            client.close()
    if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


async def test_sandbox_tools_answer_with_their_own_timeout_below_the_tool_limit(
    model_server: Any,
) -> None:
    _sandbox_or_skip()
    from vfgym.sandbox import SandboxConfig
    from vfgym.sandbox.env import SandboxEnv

    policy = scripted(
        [call("bash", {"command": "echo kept > f.txt; sleep 30"}, "c1")],
        [call("bash", {"command": "cat f.txt"}, "c2")],
        "done",
    )
    server = await model_server(policy)
    config = SandboxConfig(timeout=1, labels={"vfgym-test": "tool-timeout"})
    # The sandbox's own limit (1 s, +10 s for its runner to answer) acts first: the
    # model reads a timed-out result and keeps its sandbox.
    async with SandboxEnv(sandbox_config=config, pool_size=1, dataset=ROWS, tool_timeout=20) as env:
        completion, state = await env.rollout(server.client(), "m", QUESTION)
    first, second = tool_replies(completion)
    assert "did not finish within" not in first and "timed out" in first.lower()
    assert second.strip() == "kept"

    # A tool limit below the sandbox's cuts the call: the sandbox, stopped mid-call, is
    # replaced for the next call, and the model is told its earlier state is gone.
    config = config.replace(timeout=10)
    async with SandboxEnv(sandbox_config=config, pool_size=1, dataset=ROWS, tool_timeout=1) as env:
        completion, state = await env.rollout(server.client(), "m", QUESTION)
    first, second = tool_replies(completion)
    assert "tool bash did not finish within 1 s" in first
    assert "fresh one" in second and "No such file" in second
    assert "error" not in state
