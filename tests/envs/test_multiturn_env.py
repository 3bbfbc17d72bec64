"""MultiTurnEnv's rollout loop as an environment author meets it: turn limits,
`setup_state`/`init_state` hooks that return the wrong thing, env responses of the wrong
type, text prompts in a chat environment, info shared by reference and token budgets.

Every test runs real environments against the project's own model server.
"""

from __future__ import annotations

import threading
from typing import Any

import datasets
import pytest
from countdown_env import COUNTDOWN_ROWS, Countdown, countdown
from endless_env import GO, Again
from scripted_models import say_ok, scripted

import vfgym as vf
from vfgym.envs import MultiTurnEnv, SingleTurnEnv
from vfgym.rubrics import Rubric
from vfgym.sandbox.env import SandboxEnv
from vfgym.types import Messages, State


async def test_max_turns_none_means_no_turn_limit(model_server) -> None:
    server = await model_server(say_ok)  # 2 tokens a turn
    env = Again(dataset=[{"question": "q"}], max_turns=None, rollout_token_budget=6)
    _, state = await env.rollout(server.client(), "m", GO)
    assert "error" not in state
    assert state["stop_reason"] == "token_budget"
    assert state["turn"] == 3


@pytest.mark.parametrize("bad", ["3", [3], 2.5])
def test_a_max_turns_that_is_not_a_whole_number_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="max_turns must be a whole number of turns"):
        Again(dataset=[{"question": "q"}], max_turns=bad)


class DealsACard(SingleTurnEnv):
    """Deals from the row's deck and marks the question, in place, as games do."""

    def setup_state(self, state: State, **kwargs) -> State:
        state["card"] = state["info"]["deck"].pop()
        state["prompt"][-1]["content"] += " (your card is drawn)"
        return state


def card(state: State) -> float:
    return float(state["card"])


async def test_setup_state_changes_stay_in_their_own_rollout(model_server) -> None:
    server = await model_server(say_ok)
    env = DealsACard(
        dataset=[{"question": "draw", "info": {"deck": [1, 2, 3, 4]}}],
        rubric=Rubric(funcs=[card]),
    )
    out = await env.evaluate(server.client(), "m", rollouts_per_example=3)
    assert out.reward == [4.0, 4.0, 4.0]  # every copy drew from the full deck
    assert [p[-1]["content"] for p in out.prompt] == ["draw (your card is drawn)"] * 3
    assert [r["messages"][-1]["content"] for r in server.requests] == [
        "draw (your card is drawn)"
    ] * 3
    row = env.get_dataset()[0]
    assert row["info"] == {"deck": [1, 2, 3, 4]}
    assert row["prompt"] == [{"role": "user", "content": "draw"}]


async def test_setup_state_returning_something_else_than_the_state_says_so(model_server) -> None:
    class ReturnsFlag(SingleTurnEnv):
        def setup_state(self, state: State, **kwargs):
            state["ready"] = True
            return True

    server = await model_server(say_ok)
    out = await ReturnsFlag(dataset=[{"question": "q"}]).evaluate(server.client(), "m")
    state = out.state[0]
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "TypeError"
    assert "ReturnsFlag.setup_state must return the State" in state["error"]["message"]
    assert "got bool" in state["error"]["message"]
    assert server.requests == []


async def test_init_state_returning_nothing_says_so(model_server) -> None:
    class Forgets(SingleTurnEnv):
        async def init_state(self, prompt, completion, answer, task, info, example_id, **kw):
            self.built = True  # and no `return`

    server = await model_server(say_ok)
    out = await Forgets(dataset=[{"question": "q"}]).evaluate(server.client(), "m")
    state = out.state[0]
    assert state["stop_reason"] == "error"
    assert "Forgets.init_state must return the new State" in state["error"]["message"]
    assert "got NoneType" in state["error"]["message"]


@pytest.mark.parametrize(
    ("reply", "got"),
    [([{"role": "user", "content": "x"}], "list"), (None, "NoneType")],
)
async def test_a_text_env_response_that_is_not_text_says_what_to_return(
    model_server, reply: object, got: str
) -> None:
    class Story(MultiTurnEnv):
        def is_completed(self, messages, state, **kwargs):
            return state["turn"] >= 2

        def env_response(self, messages, state, **kwargs):
            return reply, state

    server = await model_server(say_ok)
    env = Story(dataset=[{"prompt": "Once"}], message_type="completion")
    out = await env.evaluate(server.client(), "m")
    error = out.state[0]["error"]
    assert error["type"] == "TypeError"
    assert "Story.env_response must return (text, state)" in error["message"]
    assert f"got {got} as the text" in error["message"]


async def test_a_text_prompt_given_to_a_chat_rollout_becomes_the_user_turn(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], system_prompt="Be brief.")
    completion, state = await env.rollout(server.client(), "m", "What is 2+2?")
    assert "error" not in state
    assert state["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert completion == [{"role": "assistant", "content": "ok"}]
    assert server.requests[0]["messages"] == state["prompt"]


async def test_generate_with_text_prompts_in_a_chat_environment(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    out = await env.generate([{"prompt": "hello", "answer": "x"}], server.client(), "m")
    assert out.state[0]["stop_reason"] == "completed"
    assert out.prompt == [[{"role": "user", "content": "hello"}]]


def test_a_missing_question_is_refused_not_asked_as_none() -> None:
    with pytest.raises(ValueError, match="dataset row 1 has no question"):
        SingleTurnEnv(dataset=[{"question": "q"}, {"question": None, "answer": "x"}])


def test_a_prompt_list_that_is_not_messages_says_what_a_message_is() -> None:
    with pytest.raises(TypeError, match=r"dataset row 0: 'prompt' item 0 is str"):
        SingleTurnEnv(dataset=[{"prompt": ["hello"]}])


def test_arrow_padding_is_taken_out_of_prompt_messages() -> None:
    """A datasets.Dataset gives every message every key some message has, set to None:
    a `"name": null` a real server refuses, or a chat template renders."""
    data = datasets.Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": "s"},
                    {"role": "user", "content": "q", "name": "bob"},
                ]
            }
        ]
    )
    prompt = SingleTurnEnv(dataset=data).get_dataset()[0]["prompt"]
    assert prompt == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q", "name": "bob"},
    ]


async def test_a_live_object_in_info_is_shared_not_copied(model_server) -> None:
    """A lock or a client in `info` cannot be copied, and is meant to be shared."""
    lock = threading.Lock()

    def holds_the_lock(info: dict) -> float:
        return 1.0 if info["lock"] is lock and info["limits"] == {"n": 1} else 0.0

    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], rubric=Rubric(funcs=[holds_the_lock]))
    out = await env.generate(
        {"prompt": [GO], "info": [{"lock": lock, "limits": {"n": 1}}]}, server.client(), "m"
    )
    assert "error" not in out.state[0]
    assert out.reward == [1.0]


@pytest.mark.parametrize("last_turn", [False, True])
async def test_env_response_messages_that_are_not_dicts_are_its_error(
    model_server, last_turn: bool
) -> None:
    """Not the next model call's HTTP 400, nor (on the last turn) a completion that
    holds a bare string for the rubric and the tokenizer to trip on."""

    class Terse(MultiTurnEnv):
        def env_response(self, messages, state, **kwargs):
            return ["try again"], state

    server = await model_server(say_ok)
    env = Terse(dataset=[{"question": "q"}], max_turns=1 if last_turn else 5)
    _, state = await env.rollout(server.client(), "m", GO)
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "TypeError"
    message = state["error"]["message"]
    assert "Terse.env_response returned a message that is a str, not a dict" in message
    assert "{'role': 'user', 'content': text}" in message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("env_key", "call_key"),
    [("max_completion_tokens", "max_tokens"), ("max_tokens", "max_completion_tokens")],
)
async def test_the_callers_max_tokens_overrides_the_envs_under_either_name(
    model_server, env_key: str, call_key: str
) -> None:
    """The two names are one setting: an environment default under one name must not
    win over the caller's value under the other (the client keeps
    `max_completion_tokens` when both are sent)."""
    server = await model_server(lambda messages: "0123456789")
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={env_key: 5})
    out = await env.evaluate(server.client(), "m", sampling_args={call_key: 3})
    assert server.requests[0]["max_completion_tokens"] == 3
    assert out.completion == [[{"role": "assistant", "content": "012"}]]
    assert out.metadata["sampling_args"] == {call_key: 3}
    assert env.sampling_args[env_key] == 5


@pytest.mark.parametrize("bad", ["100", True, 10.5])
def test_a_token_budget_that_is_not_a_whole_number_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="rollout_token_budget must be a whole number of tokens"):
        Again(dataset=[{"question": "q"}], rollout_token_budget=bad)


class NoRole(Countdown):
    def reply(self) -> Any:
        return {"content": "ok"}


class UnknownRole(Countdown):
    def reply(self) -> Any:
        return {"role": "environment", "content": "ok"}


class NumberContent(Countdown):
    def reply(self) -> Any:
        return {"role": "user", "content": 5}


class ForgotSuper(SandboxEnv):
    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state["started"] = True  # no `await super().setup_state(...)`: no sandbox leased
        return state


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


class ForgetsTheState(MultiTurnEnv):
    """Returns its messages alone, as `env_response` authors sometimes do."""

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Messages, state: State, **kwargs: Any):
        return [{"role": "user", "content": f"hint {i}"} for i in state["info"]["hints"]]


@pytest.mark.parametrize("hints", [[1], [1, 2]])
async def test_env_response_without_the_state_is_a_clear_error(model_server, hints) -> None:
    server = await model_server(lambda messages: "x")
    env = ForgetsTheState(dataset=[{"question": "q", "info": {"hints": hints}}])
    out = await env.evaluate(server.client(), "m")
    state = out.state[0]
    assert state["stop_reason"] == "error"
    assert state["error"]["type"] == "TypeError"
    message = state["error"]["message"]
    assert "ForgetsTheState.env_response must return (messages, state)" in message
    assert "role" not in state and "content" not in state  # no message merged into the State
