"""An environment author's mistakes, each met with a clear error, never a silent wrong result.

Each test writes a small environment as the README's "Write an environment" shows
and plays it against the project's model server on loopback (or steps it through
the Gym adapter), with one mistake an author makes in it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from scripted_models import scripted
from vfgym.games._base import TextGame, move_message

import vfgym as vf
from vfgym.errors import InvalidMove
from vfgym.gym import GymEnv
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.env import SandboxEnv

COUNTDOWN_ROWS = [{"question": "Count down from 2.", "answer": "2"}]


class Countdown(vf.MultiTurnEnv):
    """Say the numbers from N down to 1; subclasses change `reply` to make a mistake."""

    def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state["game_state"] = {"next": int(state["answer"])}
        return state

    def is_completed(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> bool:
        return state["game_state"]["next"] == 0

    def env_response(
        self, messages: vf.Messages, state: vf.State, **kwargs: Any
    ) -> tuple[vf.Messages, vf.State]:
        state["game_state"]["next"] -= 1
        return [self.reply()], state

    def reply(self) -> Any:
        return {"role": "user", "content": "ok"}


def finished(state: vf.State) -> float:
    return float(state["game_state"]["next"] == 0)


def countdown(cls: type[Countdown]) -> Countdown:
    return cls(dataset=COUNTDOWN_ROWS, rubric=vf.Rubric(funcs=[finished]), max_turns=4)


class TextItem(Countdown):
    def reply(self) -> Any:
        return "ok"


class NoRole(Countdown):
    def reply(self) -> Any:
        return {"content": "ok"}


class UnknownRole(Countdown):
    def reply(self) -> Any:
        return {"role": "environment", "content": "ok"}


class NumberContent(Countdown):
    def reply(self) -> Any:
        return {"role": "user", "content": 5}


# ------------------------------------------------------------- env_response's messages


@pytest.mark.parametrize(
    ("cls", "said"),
    [
        (NoRole, "no 'role'"),
        (UnknownRole, "'environment'"),
        (NumberContent, "content"),
    ],
)
async def test_a_malformed_env_message_is_the_environments_error_not_the_servers(
    model_server: Any, cls: type[Countdown], said: str
) -> None:
    server = await model_server(scripted("2", "1"))
    out = await countdown(cls).evaluate(server.client(), "m")
    error = out.state[0]["error"]
    assert error["type"] == "TypeError", error
    assert f"{cls.__name__}.env_response" in error["message"] and said in error["message"]
    assert "'role': 'user'" in error["message"]  # says what to return
    assert len(server.requests) == 1  # the bad message never reached the server
    assert all(isinstance(m, dict) and "role" in m for m in out.completion[0])


@pytest.mark.parametrize("cls", [TextItem, NoRole, UnknownRole, NumberContent])
def test_gym_step_refuses_a_malformed_env_message_clearly(cls: type[Countdown]) -> None:
    env = GymEnv(countdown(cls))
    env.reset(seed=0)
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.env_response returned a message"):
        env.step("2")
    env.close()


def test_a_well_formed_env_message_still_steps() -> None:
    env = GymEnv(countdown(Countdown))
    env.reset(seed=0)
    observation, reward, terminated, _, _ = env.step("2")
    assert observation == "ok" and not terminated
    observation, reward, terminated, _, _ = env.step("1")
    assert terminated and reward == 1.0


# ------------------------------------------------------------------------ TextGame


class CountGame(TextGame):
    """A TextGame with only its rules: say N, N-1, ..., 1."""

    game_name = "count"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"next": info["start"]}

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        if move != str(game["next"]):
            raise InvalidMove(f"say {game['next']}, not {move}")
        game["next"] -= 1
        return "ok"

    def is_over(self, game: dict[str, Any]) -> bool:
        return game["next"] == 0

    def score(self, game: dict[str, Any]) -> float:
        return 1.0

    def render(self, game: dict[str, Any]) -> str:
        return f"next: {game['next']}"

    def reference_policy(self, messages: vf.Messages) -> vf.ChatMessage:
        said = sum(1 for m in messages if m["role"] == "assistant")
        return move_message(str(2 - said))

    def random_move(self, messages: vf.Messages, rng: Any) -> str:
        return "1"


GAME_ROWS = [{"question": "Count down from 2.", "answer": "2", "info": {"start": 2}}]


class AsyncOver(CountGame):
    async def is_over(self, game: dict[str, Any]) -> bool:  # type: ignore[override]
        return game["next"] == 0


class AsyncApply(CountGame):
    async def apply_move(self, game: dict[str, Any], move: str) -> str:  # type: ignore[override]
        return CountGame.apply_move(self, game, move)


class NoFeedback(CountGame):
    def apply_move(self, game: dict[str, Any], move: str) -> str:
        CountGame.apply_move(self, game, move)  # forgot `return`
        return None  # type: ignore[return-value]


@pytest.mark.parametrize(("cls", "rule"), [(AsyncOver, "is_over"), (AsyncApply, "apply_move")])
def test_textgame_refuses_async_rules_when_made(cls: type[CountGame], rule: str) -> None:
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.{rule} is async.*plain `def`"):
        cls(dataset=GAME_ROWS, max_turns=5)


@pytest.mark.parametrize("tagged", [True, False])
def test_textgame_feedback_that_is_no_text_is_refused(tagged: bool) -> None:
    env = GymEnv(NoFeedback(dataset=GAME_ROWS, max_turns=5))
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"NoFeedback\.apply_move must return the feedback"):
        env.step("<move>2</move>" if tagged else "2")
    env.close()


async def test_textgame_feedback_that_is_no_text_ends_the_rollout_as_an_error(
    model_server: Any,
) -> None:
    server = await model_server(scripted("<move>2</move>"))
    out = await NoFeedback(dataset=GAME_ROWS, max_turns=5).evaluate(server.client(), "m")
    assert "apply_move must return the feedback" in out.state[0]["error"]["message"]


def test_an_invalid_move_without_a_full_stop_is_not_run_into_the_count() -> None:
    env = GymEnv(CountGame(dataset=GAME_ROWS, max_turns=5))
    env.reset(seed=0)
    observation, *_ = env.step("<move>3</move>")
    assert observation == "Invalid move: say 2, not 3. 2 more invalid moves end the game."
    observation, *_ = env.step("3")  # the untagged path words it the same
    assert observation == "Invalid move: say 2, not 3. 1 more invalid move ends the game."


# ------------------------------------------------------------------------- ToolEnv


def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def total(*numbers: int) -> int:
    """Add numbers.

    Args:
        numbers: The numbers.
    """
    return sum(numbers)


def test_tools_given_as_one_function_say_to_pass_a_list() -> None:
    with pytest.raises(TypeError, match=r"tools=\[add\]"):
        vf.ToolEnv(tools=add, dataset=COUNTDOWN_ROWS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tool",
    [{"type": "function", "function": {"name": "add"}}, None, "add"],
)
def test_a_tool_that_is_no_function_is_named_as_such(tool: Any) -> None:
    with pytest.raises(TypeError, match=r"tool 0 .* not a function.*pass the function itself"):
        vf.ToolEnv(tools=[tool], dataset=COUNTDOWN_ROWS)


def test_a_tool_with_star_args_is_warned_about_with_a_list_parameter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its `*numbers` is not offered (a model sends named arguments): the author hears
    so, and what to write instead, rather than finding a tool the model calls with nothing."""
    with caplog.at_level(logging.WARNING, logger="vfgym.tools.schema"):
        env = vf.ToolEnv(tools=[total], dataset=COUNTDOWN_ROWS)
    assert env.oai_tools[0]["function"]["parameters"]["properties"] == {}
    warned = [r.getMessage() for r in caplog.records if r.name == "vfgym.tools.schema"]
    assert len(warned) == 1 and "'total' takes *numbers" in warned[0]
    assert "`numbers: list[int]`" in warned[0]


def untyped(a, b):  # type: ignore[no-untyped-def]
    return a + b


def test_a_tool_without_type_hints_or_docstring_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="vfgym.tools.schema"):
        vf.ToolEnv(tools=[untyped, add], dataset=COUNTDOWN_ROWS)
    warned = [r.getMessage() for r in caplog.records if r.name == "vfgym.tools.schema"]
    assert len(warned) == 1, warned  # `add` is described in full
    assert "'untyped'" in warned[0] and "a, b" in warned[0] and "docstring" in warned[0]


async def test_two_plain_tools_sync_and_async_with_optional_and_raising(
    model_server: Any,
) -> None:
    """The author's happy path: defaults and Optional stay optional; a raise is told."""

    def price(item: str, quantity: int = 1, currency: str | None = None) -> str:
        """Price of an item.

        Args:
            item: The item.
            quantity: How many.
            currency: A currency code, or none for dollars.
        """
        if item != "pear":
            raise KeyError(f"unknown item {item!r}")
        return f"{3 * quantity} {currency or 'USD'}"

    async def halve(x: float) -> float:
        """Half of x.

        Args:
            x: The number.
        """
        return x / 2

    def call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    env = vf.ToolEnv(tools=[price, halve], dataset=COUNTDOWN_ROWS, max_turns=3)
    params = env.oai_tools[0]["function"]["parameters"]
    assert params["required"] == ["item"]
    server = await model_server(
        scripted(
            [
                call("price", '{"item": "pear"}', "c1"),
                call("price", '{"item": "plum", "currency": null}', "c2"),
                call("halve", '{"x": 3}', "c3"),
            ],
            "done",
        )
    )
    out = await env.evaluate(server.client(), "m")
    tool_replies = [m["content"] for m in out.completion[0] if m["role"] == "tool"]
    assert tool_replies == ["3 USD", "Error: KeyError: \"unknown item 'plum'\"", "1.5"]
    assert out.state[0]["tools_called"] == ["price", "price", "halve"]


# ---------------------------------------------------------------------- SandboxEnv


async def run_in(code: str, box: DockerSandbox) -> str:
    """Run code.

    Args:
        code: The code.
    """
    return (await box.run_python(code)).summary()


async def run_code(code: str, sandbox: DockerSandbox) -> str:
    """Run code.

    Args:
        code: The code.
    """
    return (await sandbox.run_python(code)).summary()


def test_a_sandbox_parameter_under_another_name_says_to_call_it_sandbox() -> None:
    with pytest.raises(TypeError, match=r"'run_in'.*'box'.*name it `sandbox`"):
        SandboxEnv(tools=[run_in], dataset=COUNTDOWN_ROWS)


def test_a_sandbox_tool_in_a_plain_tool_env_says_to_use_a_sandbox_env() -> None:
    with pytest.raises(ValueError, match=r"'sandbox'.*vf\.SandboxEnv"):
        vf.ToolEnv(tools=[run_code], dataset=COUNTDOWN_ROWS)


class ForgotSuper(SandboxEnv):
    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state["started"] = True  # no `await super().setup_state(...)`: no sandbox leased
        return state


async def test_a_setup_state_that_skips_super_is_told_to_call_it(model_server: Any) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "python", "arguments": '{"code": "1"}'},
    }
    server = await model_server(scripted([call], "done"))
    env = ForgotSuper(dataset=COUNTDOWN_ROWS, max_turns=2)
    out = await env.evaluate(server.client(), "m")
    message = out.state[0]["error"]["message"]
    assert "ForgotSuper.setup_state" in message and "super().setup_state" in message
