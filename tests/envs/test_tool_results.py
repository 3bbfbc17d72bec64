"""What the model reads of a tool's result: capped in length, and JSON for dicts and lists.

Every test runs real tools through a real ToolEnv turn: a rollout against the
project's model server on loopback (whose recorded requests show what the model
was sent next), or one `env_response` turn.
"""

from __future__ import annotations

import json
import math
import re
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from scripted_models import scripted

from vfgym.envs import StatefulToolEnv, ToolEnv
from vfgym.types import State

QUESTION = [{"role": "user", "content": "Look at the file."}]
ROWS = [{"prompt": QUESTION, "answer": ""}]
DEFAULT_CAP = 20_000
#: The note a cut result ends with: how much of how many characters the model sees.
NOTE = re.compile(r"\n\[\.\.\. cut to the first (\d+) of (\d+) characters\]\Z")


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


async def answer(env: ToolEnv, *calls: Any) -> tuple[list[dict[str, Any]], State]:
    """The env's replies to one assistant turn holding `calls`, with a fresh State."""
    turn = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    state: State = {}
    return await env.env_response([*QUESTION, turn], state)


def check_cut(content: str, full: str, cap: int) -> None:
    """`content` is `full` cut to at most `cap` characters, ending with the note."""
    assert len(content) <= cap
    note = NOTE.search(content)
    assert note is not None, content[-200:]
    kept, total = int(note.group(1)), int(note.group(2))
    assert total == len(full)
    assert content == full[:kept] + note.group(0)
    assert kept >= cap - 100  # the note takes little room


def has_lone_surrogate(text: str) -> bool:
    """True when `text` holds a surrogate not paired (UTF-16 refuses it)."""
    try:
        text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return True
    return False


# -- the cap ---------------------------------------------------------------------------


def cat(path: str) -> str:
    """Show a file's text.

    Args:
        path: The file to show.
    """
    return Path(path).read_text()


async def test_a_huge_file_is_cut_before_it_reaches_the_model(model_server, tmp_path) -> None:
    big = tmp_path / "big.log"
    text = "".join(f"line {n}: {'x' * 40}\n" for n in range(20_000))  # ~1 MB
    big.write_text(text)
    server = await model_server(scripted([call("cat", {"path": str(big)})], "done"))
    env = ToolEnv(tools=[cat], dataset=ROWS)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    # Uncut, the next request would not fit the model's context and the episode would end.
    assert not state.get("prompt_too_long")
    assert completion[-1] == {"role": "assistant", "content": "done"}
    reply = completion[1]
    check_cut(reply["content"], text, DEFAULT_CAP)
    sent = server.requests[1]["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == reply["content"]
    assert [entry["ok"] for entry in state["tool_call_log"]] == [True]
    assert env.max_tool_result_chars == DEFAULT_CAP


async def test_a_result_within_the_cap_is_untouched() -> None:
    def exact() -> str:
        """Return exactly the cap's length."""
        return "y" * 500

    replies, _ = await answer(
        ToolEnv(tools=[exact], dataset=ROWS, max_tool_result_chars=500), call("exact", {})
    )
    assert replies[0]["content"] == "y" * 500


async def test_bytes_objects_and_json_results_are_cut_too() -> None:
    class Huge:
        def __str__(self) -> str:
            return "object " * 50_000

    def read_bytes() -> bytes:
        """Read raw bytes."""
        return "é".encode() * 100_000

    def make_object() -> Any:
        """Return an object with a long text."""
        return Huge()

    def numbers() -> list[int]:
        """Return many numbers."""
        return list(range(100_000))

    env = ToolEnv(
        tools=[read_bytes, make_object, numbers], dataset=ROWS, max_tool_result_chars=1000
    )
    replies, _ = await answer(
        env,
        call("read_bytes", {}, "b"),
        call("make_object", {}, "o"),
        call("numbers", {}, "n"),
    )
    check_cut(replies[0]["content"], "é" * 100_000, 1000)
    check_cut(replies[1]["content"], "object " * 50_000, 1000)
    check_cut(replies[2]["content"], json.dumps(list(range(100_000))), 1000)


def explode(size: int) -> str:
    """Fail with a long message.

    Args:
        size: How long the message is.
    """
    raise ValueError("boom " * size)


async def test_an_error_embedding_huge_text_is_cut(model_server) -> None:
    server = await model_server(scripted([call("explode", {"size": 200_000})], "done"))
    env = ToolEnv(tools=[explode], dataset=ROWS)
    completion, state = await env.rollout(server.client(), "m", QUESTION)
    assert completion[-1] == {"role": "assistant", "content": "done"}
    content = completion[1]["content"]
    check_cut(content, "Error: ValueError: " + "boom " * 200_000, DEFAULT_CAP)
    assert server.requests[1]["messages"][-1]["content"] == content
    assert [entry["ok"] for entry in state["tool_call_log"]] == [False]


async def test_a_custom_error_formatter_is_cut_too() -> None:
    env = ToolEnv(
        tools=[explode],
        dataset=ROWS,
        error_formatter=lambda exc: f"failed: {exc}",
        max_tool_result_chars=300,
    )
    replies, _ = await answer(env, call("explode", {"size": 10_000}))
    check_cut(replies[0]["content"], "failed: " + "boom " * 10_000, 300)


async def test_an_argument_error_listing_many_problems_is_cut() -> None:
    def total(numbers: list[int]) -> int:
        """Add numbers.

        Args:
            numbers: The numbers to add.
        """
        return sum(numbers)

    env = ToolEnv(tools=[total], dataset=ROWS, max_tool_result_chars=2000)
    replies, state = await answer(env, call("total", {"numbers": ["x"] * 5000}))
    content = replies[0]["content"]
    assert content.startswith("Error: invalid arguments for total: numbers.0: ")
    note = NOTE.search(content)
    assert note is not None and len(content) <= 2000
    assert int(note.group(2)) > 100_000  # one problem per item: the whole list was long
    assert state["tool_call_log"][0]["ok"] is False


@pytest.mark.parametrize("cap", [1000, 1001])
async def test_a_cut_never_splits_a_surrogate_pair(cap: int) -> None:
    # Text decoded with "surrogatepass" (Java's modified UTF-8, CESU-8) keeps each
    # astral character as two surrogates; with one of the two caps the cut would
    # land between them.
    text = b"\xed\xa0\xbd\xed\xb8\x80".decode("utf-8", "surrogatepass") * 5000
    assert len(text) == 10_000 and text[:2] == "\ud83d\ude00"

    def emojis() -> str:
        """Return many emojis."""
        return text

    env = ToolEnv(tools=[emojis], dataset=ROWS, max_tool_result_chars=cap)
    replies, _ = await answer(env, call("emojis", {}))
    content = replies[0]["content"]
    assert not has_lone_surrogate(content)
    note = NOTE.search(content)
    assert note is not None and len(content) <= cap
    assert content == text[: int(note.group(1))] + note.group(0)


async def test_none_turns_the_cap_off() -> None:
    def flood() -> str:
        """Return a lot of text."""
        return "z" * 100_000

    replies, _ = await answer(
        ToolEnv(tools=[flood], dataset=ROWS, max_tool_result_chars=None), call("flood", {})
    )
    assert replies[0]["content"] == "z" * 100_000


class Session(StatefulToolEnv):
    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs) -> dict:
        return tool_args


def test_a_stateful_tool_env_takes_the_cap() -> None:
    assert Session(dataset=ROWS, max_tool_result_chars=5000).max_tool_result_chars == 5000


@pytest.mark.parametrize("bad", [True, False, -1, 0, 99, 1.5, "20000", 20_000.0])
def test_a_bad_cap_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_tool_result_chars") as caught:
        ToolEnv(dataset=ROWS, max_tool_result_chars=bad)
    assert repr(bad) in str(caught.value)
    assert "None" in str(caught.value)  # says how to turn the cap off


# -- dicts and lists as JSON -------------------------------------------------------------


async def test_dict_and_list_results_reach_the_model_as_json(model_server) -> None:
    def lookup() -> dict[str, Any]:
        """Return a record."""
        return {"name": "Zoë", "age": None, "admin": True, "tags": ("a", "b"), "score": 1.5}

    server = await model_server(scripted([call("lookup", {})], "done"))
    env = ToolEnv(tools=[lookup], dataset=ROWS)
    completion, _ = await env.rollout(server.client(), "m", QUESTION)
    expected = '{"name": "Zoë", "age": null, "admin": true, "tags": ["a", "b"], "score": 1.5}'
    assert completion[1]["content"] == expected
    assert server.requests[1]["messages"][-1]["content"] == expected


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ([1, "two", None, False], '[1, "two", null, false]'),
        ((1, 2), "[1, 2]"),
        ([], "[]"),
        ({"nested": [{"k": [None]}]}, '{"nested": [{"k": [null]}]}'),
        ({"when": {1, 2}}, "{'when': {1, 2}}"),  # a set is not JSON: str() as before
        ({"raw": b"x"}, "{'raw': b'x'}"),
        (Point(1, 2), "Point(x=1, y=2)"),  # its field names say more than [1, 2]
        ({"x": math.inf}, '{"x": Infinity}'),
        ("{'a': 1}", "{'a': 1}"),  # text is sent as it is
        (42, "42"),
    ],
)
async def test_result_text_of_each_kind(result: Any, expected: str) -> None:
    def produce() -> Any:
        """Return the result under test."""
        return result

    replies, _ = await answer(ToolEnv(tools=[produce], dataset=ROWS), call("produce", {}))
    assert replies[0]["content"] == expected
