"""What `generate`/`evaluate` accept before any rollout starts: input rows that bring their
own `prompt` (a bad message is refused naming the row), the opening a completion takes,
sampling arguments (`n`, `stream`, caller values over the environment's),
`num_examples`, `rollouts_per_example` and `max_concurrent`.

Every test runs a real environment against the project's own model server on loopback.
"""

from __future__ import annotations

from typing import Any

import datasets
import pytest
from endless_env import GO
from scripted_models import say_ok

import vfgym as vf
from vfgym.envs import SingleTurnEnv
from vfgym.inference.server import ModelServer
from vfgym.types import GenerateInputs, Messages


def answer_ok(messages: Messages) -> str:
    return "ok"


def env() -> SingleTurnEnv:
    return SingleTurnEnv(dataset=[{"question": "q"}])


#: A past turn that called a tool, and the tool's reply, as a valid prompt holds them.
CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}


HISTORY = [
    {"role": "user", "content": "add 1"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "content": "1", "tool_call_id": "c1"},
]


DICT_ARGS = {**CALL, "function": {"name": "add", "arguments": {"a": 1}}}


BAD_PROMPTS = {
    "unknown role": (
        [{"role": "robot", "content": "hi"}],
        ValueError,
        r"input row 1: 'prompt' item 0 has role 'robot'; a chat message's role is one of",
    ),
    "no content": (
        [{"role": "user"}],
        ValueError,
        r"input row 1: 'prompt' item 0: the user message has no 'content'; give its text",
    ),
    "tool without id": (
        [*HISTORY[:2], {"role": "tool", "content": "1"}],
        ValueError,
        r"input row 1: 'prompt' item 2: the tool message has no 'tool_call_id'; .*set its "
        r"'tool_call_id' to that call's 'id'",
    ),
    "dict arguments": (
        [HISTORY[0], {"role": "assistant", "content": None, "tool_calls": [DICT_ARGS]}],
        TypeError,
        r"input row 1: 'prompt' item 1: tool call 0's arguments are a dict; give them as "
        r"JSON text.*json\.dumps\(arguments\)",
    ),
    "not a message": (
        [GO[0], "hello"],
        TypeError,
        r"input row 1: 'prompt' item 1 is str, expected a chat message dict such as",
    ),
    "one message, not a list": (
        GO[0],
        TypeError,
        r"input row 1: 'prompt' is one message dict; wrap it in a list",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PROMPTS))
async def test_a_bad_message_in_a_given_prompt_is_refused_naming_its_row(
    model_server, case: str
) -> None:
    prompt, error, says = BAD_PROMPTS[case]
    server = await model_server(answer_ok)
    rows: list[dict[str, Any]] = [{"prompt": GO}, {"prompt": prompt}]
    with pytest.raises(error, match=says):
        await env().generate(rows, server.client(), "m")
    assert server.requests == []  # refused before any rollout started


async def test_a_bad_prompt_in_generate_inputs_is_refused_naming_its_row(model_server) -> None:
    server = await model_server(answer_ok)
    inputs = GenerateInputs(prompt=[GO, GO, [{"role": "robot", "content": "hi"}]])
    with pytest.raises(ValueError, match=r"input row 2: 'prompt' item 0 has role 'robot'"):
        await env().generate(inputs, server.client(), "m")
    assert server.requests == []


async def test_valid_given_prompts_still_run(model_server) -> None:
    """Tool history, content parts and text prompts are all fine as given."""
    server = await model_server(answer_ok)
    parts = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    rows = [{"prompt": GO}, {"prompt": HISTORY}, {"prompt": parts}]
    out = await env().generate(rows, server.client(), "m")
    assert out.prompt == [GO, HISTORY, parts]
    assert [c[-1]["content"] for c in out.completion] == ["ok"] * 3
    sent = sorted([m["role"] for m in r["messages"]] for r in server.requests)
    assert sent == [["user"], ["user"], ["user", "assistant", "tool"]]


async def test_prompts_from_a_hugging_face_dataset_are_accepted(model_server) -> None:
    """Arrow gives every message every key any message has, as None: that is padding,
    not a bad message."""
    server = await model_server(answer_ok)
    inputs = datasets.Dataset.from_list([{"prompt": GO}, {"prompt": HISTORY}])
    out = await env().generate(inputs, server.client(), "m")
    assert [c[-1]["content"] for c in out.completion] == ["ok", "ok"]
    assert not any(s.get("error") for s in out.state)


async def test_raw_question_rows_are_still_formatted_by_the_env(model_server) -> None:
    server = await model_server(answer_ok)
    system = SingleTurnEnv(dataset=[{"question": "q"}], system_prompt="Be brief.")
    out = await system.generate([{"question": "go"}, {"question": "stop"}], server.client(), "m")
    assert out.prompt == [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "stop"}],
    ]
    assert [c[-1]["content"] for c in out.completion] == ["ok", "ok"]


async def test_a_completion_env_still_takes_text_prompts(model_server) -> None:
    server = await model_server(answer_ok)
    text_env = SingleTurnEnv(dataset=[{"prompt": "q"}], message_type="completion")
    out = await text_env.generate([{"prompt": "Say ok:"}], server.client(), "m")
    assert out.prompt == ["Say ok:"]
    assert not out.state[0].get("error")


async def test_a_dataset_mixing_prompt_and_question_rows_formats_the_questions(
    model_server,
) -> None:
    """Arrow gives the question row a None prompt (and the prompt row a None question):
    the question row must still be formatted, not sent with no prompt."""
    server = await model_server(answer_ok)
    rows = [{"prompt": GO, "question": None}, {"prompt": None, "question": "stop"}]
    inputs = datasets.Dataset.from_list(rows)
    out = await env().generate(inputs, server.client(), "m")
    assert out.prompt == [GO, [{"role": "user", "content": "stop"}]]
    assert not any(s.get("error") for s in out.state)


async def test_a_completion_env_refuses_chat_messages_naming_the_row(model_server) -> None:
    server = await model_server(answer_ok)
    text_env = SingleTurnEnv(dataset=[{"prompt": "q"}], message_type="completion")
    with pytest.raises(ValueError, match=r"input row 1: message_type='completion' needs a text"):
        await text_env.generate([{"prompt": "a"}, {"prompt": GO}], server.client(), "m")
    assert server.requests == []


QUESTION = [{"role": "user", "content": "q"}]


def echo(messages: Any) -> str:
    """Answers with the text of the last message (the raw text of content parts)."""
    return f"ans:{messages[-1]['content']}"


def say_42(messages: Any) -> str:
    return "42"


def exact(completion: vf.Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


class Feedback(vf.MultiTurnEnv):
    """Answers every model turn with one user message; ends after three model turns."""

    def is_completed(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> bool:
        return state["turn"] >= 3

    def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": f"feedback {state['turn']}"}], state


@pytest.fixture(scope="module")
def server() -> Any:
    with ModelServer(echo).running() as running:
        yield running


def test_evaluate_reads_rollouts_per_example_none_as_generate_does(server) -> None:
    env = vf.SingleTurnEnv(dataset=[{"question": "q"}])
    out = env.evaluate_sync(server.sync_client(), "m", rollouts_per_example=None)
    assert len(out.reward) == 1


def test_evaluate_says_what_a_fractional_rollouts_per_example_should_be(server) -> None:
    env = vf.SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(TypeError, match="rollouts_per_example must be a whole number"):
        env.evaluate_sync(server.sync_client(), "m", rollouts_per_example=2.5)


def test_num_examples_zero_is_refused_by_evaluate_and_generate_alike(server) -> None:
    """evaluate ran no rows and generate all of them: zero is now refused by both."""
    env = vf.SingleTurnEnv(dataset=[{"question": "a"}, {"question": "b"}])
    client = server.sync_client()
    server.clear_requests()
    with pytest.raises(ValueError, match="num_examples=0 asks for no examples"):
        env.evaluate_sync(client, "m", num_examples=0)
    with pytest.raises(ValueError, match="num_examples=0 asks for no examples"):
        env.generate_sync(env.get_eval_inputs(), client, "m", num_examples=0)
    assert server.requests == []
    assert len(env.evaluate_sync(client, "m", num_examples=None).reward) == 2
    assert len(env.generate_sync(env.get_eval_inputs(), client, "m", num_examples=1).reward) == 1


@pytest.mark.parametrize("num_examples", [1.5, "2", True])
def test_a_num_examples_that_is_no_whole_number_is_refused(server, num_examples: Any) -> None:
    """generate compared it with 0 ("'>' not supported" for a text, True as 1)."""
    env = vf.SingleTurnEnv(dataset=[{"question": "a"}])
    with pytest.raises(TypeError, match="n must be a whole number of rows"):
        env.generate_sync(
            env.get_eval_inputs(), server.sync_client(), "m", num_examples=num_examples
        )


def test_generate_inputs_completion_opens_the_rollout(server) -> None:
    env = Feedback(dataset=[{"question": "unused"}], max_turns=1)
    opening = [{"role": "user", "content": "a hint before the first turn"}]
    inputs = vf.GenerateInputs(prompt=[QUESTION], completion=[opening])
    out = env.generate_sync(inputs, server.sync_client(), "m")
    assert out.completion[0][0] == opening[0]


def test_a_ready_prompt_rows_answer_is_text_as_a_question_rows_is() -> None:
    env = vf.SingleTurnEnv(dataset=[{"question": "q"}], rubric=vf.Rubric(funcs=[exact]))
    rows = [
        {"prompt": QUESTION, "answer": 42, "task": 7},
        {"prompt": QUESTION, "answer": None},
    ]
    with ModelServer(say_42).running() as own:
        out = env.generate_sync(rows, own.sync_client(), "m")
    assert out.answer == ["42", ""]
    assert out.reward == [1.0, 0.0]
    assert out.task == ["7", "default"]


def test_a_question_rows_completion_opens_the_rollout_too(server) -> None:
    env = vf.SingleTurnEnv(dataset=[{"question": "unused"}])
    opening = [{"role": "user", "content": "an opening"}]
    out = env.generate_sync([{"question": "q", "completion": opening}], server.sync_client(), "m")
    assert out.completion[0][0] == opening[0] and out.completion[0][1]["role"] == "assistant"
    assert opening == [{"role": "user", "content": "an opening"}]  # the caller's, unchanged


@pytest.mark.parametrize(
    ("message_type", "row", "error"),
    [
        ("chat", {"prompt": QUESTION, "completion": "text"}, "in chat give a list"),
        ("chat", {"question": "q", "completion": {"role": "user"}}, "in chat give a list"),
        ("completion", {"prompt": "Q:", "completion": QUESTION}, "give one str"),
    ],
)
def test_an_opening_of_the_wrong_form_is_refused_before_any_request(
    server, message_type: str, row: dict[str, Any], error: str
) -> None:
    env = vf.SingleTurnEnv(dataset=[{"question": "unused"}], message_type=message_type)
    server.clear_requests()
    with pytest.raises(TypeError, match=rf"input row 0: 'completion'.*{error}"):
        env.generate_sync([row], server.sync_client(), "m")
    assert server.requests == []


async def test_sampling_args_n_above_one_is_refused_before_any_request(model_server) -> None:
    """A rollout plays one conversation: with n=3 the server wrote three answers, the
    rollout kept the first, and the token budget counted all three."""
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(ValueError, match=r"sampling_args 'n' is 3.*rollouts_per_example=3"):
        await env.evaluate(server.client(), "m", sampling_args={"n": 3})
    assert server.requests == []


async def test_sampling_args_stream_is_refused_before_the_batch_starts(
    model_server, tmp_path
) -> None:
    """Refused only at each request, every rollout errored and a results file was
    written that only a resume with the same settings could read."""
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(ValueError, match="does not stream"):
        await env.evaluate(
            server.client(), "m", sampling_args={"stream": True}, results_path=tmp_path / "r"
        )
    assert server.requests == [] and not (tmp_path / "r").exists()


def test_an_environment_default_n_above_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"sampling_args 'n' is 2.*rollouts_per_example"):
        SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"n": 2})


async def test_sampling_args_n_of_one_is_still_accepted(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"n": 1})
    out = await env.evaluate(server.client(), "m", sampling_args={"n": 1})
    assert out.state[0]["stop_reason"] == "completed"
    assert "n" not in server.requests[0]


async def test_a_callers_extra_body_value_overrides_the_environments_top_level_one(
    model_server,
) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"top_k": 20})
    await env.evaluate(server.client(), "m", sampling_args={"extra_body": {"top_k": 50}})
    assert server.requests[0]["top_k"] == 50


async def test_a_callers_top_level_value_overrides_the_environments_extra_body_one(
    model_server,
) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}], sampling_args={"extra_body": {"top_k": 20}})
    await env.evaluate(server.client(), "m", sampling_args={"top_k": 50})
    assert server.requests[0]["top_k"] == 50


async def test_run_rollouts_checks_max_concurrent_as_generate_does(model_server) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "q"}])
    with pytest.raises(TypeError, match="max_concurrent must be a whole number"):
        await env.run_rollouts(server.client(), "m", [GO], max_concurrent="4")
    done = await env.run_rollouts(server.client(), "m", [GO], max_concurrent=None)
    assert done[0][1]["stop_reason"] == "completed"
