"""What an environment written for verifiers 0.1.x can observe, matched to 0.1.7.post0:
unknown constructor keywords kept as attributes, the turn loop stopping at
`max_turns` before `env_response`, and XMLParser's format reward.

This file is written for verifiers 0.1.x: it imports `verifiers` (the alias), so the
environments it builds are treated as such (an environment written for vfgym keeps
vfgym's own rules: tests/test_envs.py).

The expected format scores are 0.1.7's formula worked by hand: 0.4 x the share of
field sets present (when any field parsed), + 0.2 for spacing (always met by its
parser), + 0.2 when the text starts with a first-field tag, + 0.2 when it ends with
a last-field closing tag; averaged over every assistant message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI

import vfgym as vf
from vfgym.compat import install_verifiers_alias, uninstall_verifiers_alias
from vfgym.gym import GymEnv
from vfgym.inference.server import ModelServer


@pytest.fixture(autouse=True)
def verifiers_alias() -> Iterator[None]:
    install_verifiers_alias(force=True)
    try:
        import verifiers  # this file is written for verifiers 0.1.x

        assert verifiers.MultiTurnEnv is vf.MultiTurnEnv
        yield
    finally:
        uninstall_verifiers_alias()


ROWS = [{"question": f"q{i}", "answer": "a"} for i in range(2)]


# ----------------------------------------------------------- unknown keywords


def test_unknown_keywords_are_kept_as_attributes_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="vfgym.envs"):
        env = vf.SingleTurnEnv(dataset=ROWS, max_concurrent=8, client="a client", max_turn=3)
    assert (env.max_concurrent, env.client, env.max_turn) == (8, "a client", 3)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "client" in message and "max_concurrent" in message
    assert "max_turn (did you mean max_turns?)" in message


class _Echo(vf.MultiTurnEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dataset=ROWS, client="c", model="m", **kwargs)

    async def env_response(self, messages, state, **kwargs):  # type: ignore[no-untyped-def]
        return [{"role": "user", "content": "again"}], state


def test_a_subclass_may_pass_client_and_model_up_as_0_1_x_examples_do(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="vfgym.envs"):
        env = _Echo(max_turns=2)
    assert (env.client, env.model, env.max_turns) == ("c", "m", 2)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_known_keywords_bring_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="vfgym.envs"):
        vf.SingleTurnEnv(dataset=ROWS, system_prompt="s")
    assert not [r for r in caplog.records if r.name == "vfgym.envs"]


# ----------------------------------------------------------- the turn limit


class _CountingEnv(vf.MultiTurnEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dataset=ROWS, **kwargs)
        self.answered = 0

    async def env_response(self, messages, state, **kwargs):  # type: ignore[no-untyped-def]
        self.answered += 1
        return [{"role": "user", "content": f"reply {self.answered}"}], state


async def test_the_loop_stops_at_max_turns_before_env_response() -> None:
    env = _CountingEnv(max_turns=3)
    async with ModelServer(lambda messages: "more") as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        results = await env.evaluate(client, "m", num_examples=1)
    state = results.state[0]
    completion = results.completion[0]
    assert env.answered == 2  # after turns 1 and 2; not after the last allowed turn
    assert completion[-1] == {"role": "assistant", "content": "more"}
    assert [m["role"] for m in completion].count("assistant") == 3
    assert state["stop_reason"] == "max_turns" and state["is_truncated"]


def test_an_environment_written_for_vfgym_still_answers_the_last_turn() -> None:
    env = _CountingEnv(max_turns=2)
    assert env.answers_last_turn is False  # built here, in code written for verifiers
    native = _CountingEnv.__new__(_CountingEnv)
    assert type(native).answers_last_turn is None  # decided per construction


def test_a_gym_step_that_reaches_max_turns_reports_truncation() -> None:
    env = GymEnv(_CountingEnv(max_turns=2))
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("first")
    assert (terminated, truncated) == (False, False)
    _, _, terminated, truncated, info = env.step("second")
    assert (terminated, truncated) == (False, True)
    assert info["stop_reason"] == "max_turns"
    assert env.unwrapped.environment.answered == 1
    env.close()


# ----------------------------------------------------------- XMLParser's format reward

FULL = "<think>\nx\n</think>\n<answer>\n5\n</answer>"


@pytest.mark.parametrize(
    ("text", "score"),
    [
        (FULL, 1.0),
        ("<think>x</think><answer>5</answer>", 1.0),
        ("OK", 0.2),  # no field: spacing only
        ("<answer>\n5\n</answer>", 0.6),  # half the fields, ends right
        ("<think>\nx\n</think>", 0.6),  # half the fields, starts right
        (FULL + "\nbye", 0.8),  # does not end with </answer>
        ("<answer>5", 0.2),  # an unclosed tag parses nothing
        ("", 0.2),
    ],
)
def test_xml_format_reward_is_0_1_7s(text: str, score: float) -> None:
    parser = vf.XMLParser(["think", "answer"])
    reward = parser.get_format_reward_func()
    assert reward([{"role": "assistant", "content": text}]) == pytest.approx(score)


def test_xml_format_reward_averages_every_assistant_message() -> None:
    parser = vf.XMLParser(["think", ("code", "answer")])
    reward = parser.get_format_reward_func()
    completion = [
        {"role": "assistant", "content": "<think>\nx\n</think>\n<code>\ny\n</code>"},
        {"role": "user", "content": "ignored"},
        {"role": "assistant", "content": "OK"},
    ]
    assert reward(completion) == pytest.approx((1.0 + 0.2) / 2)
    assert reward([{"role": "user", "content": "only the user"}]) == 0.0


def test_a_catalogue_game_loaded_from_verifiers_style_code_still_plays_its_last_move() -> None:
    game = vf.load_environment("guess-the-number", difficulty="easy")
    assert game.answers_last_turn is True


# ------------------------------------------------- tool calls at the turn limit


def increment(x: int) -> int:
    """Add one to x.

    Args:
        x: The integer to add one to.
    """
    return x + 1


def negate(flag: bool) -> bool:
    """Negate a flag.

    Args:
        flag: The flag to negate.
    """
    return not flag


def _calls(*names: str) -> dict[str, Any]:
    arguments = {"increment": '{"x": 1}', "negate": '{"flag": true}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": n, "arguments": arguments[n]}}
            for k, n in enumerate(names)
        ],
    }


async def test_calls_of_the_last_allowed_turn_count_though_they_never_ran() -> None:
    tools = [increment, negate]
    rubric = vf.ToolRubric(tools=tools)
    env = vf.ToolEnv(dataset=ROWS[:1], tools=tools, rubric=rubric, max_turns=2)
    replies = iter([_calls("increment"), _calls("increment", "negate")])
    async with ModelServer(lambda messages: next(replies)) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        results = await env.evaluate(client, "m", num_examples=1)
    state, completion = results.state[0], results.completion[0]
    assert state["tools_called"] == ["increment"]  # the second turn's calls never ran
    assert completion[-1]["role"] == "assistant" and len(completion[-1]["tool_calls"]) == 2
    assert results.metrics["total_tool_calls"] == [3.0]  # as 0.1.7 counted: every call made
    assert results.metrics["increment_calls"] == [2.0]
    assert results.metrics["negate_calls"] == [1.0]
