"""The rollout core at its edges: EnvGroup token processing, hand-written States, batches
whose rollouts raise, and errored rollouts of completion-style environments."""

from __future__ import annotations

import math
from typing import Any

import pytest

import vfgym as vf
from vfgym.envs import EnvGroup, MultiTurnEnv, SingleTurnEnv
from vfgym.inference.server import ByteTokenizer
from vfgym.results.jsonl import read_results
from vfgym.types import Messages, State

TOKENIZER = ByteTokenizer()
WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def add_then_answer(messages: list[dict[str, Any]]) -> Any:
    """Calls `add` once when tools are on offer, then repeats the tool's result."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    if "2+3" not in messages[-1]["content"]:
        return "plain answer"
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    }


def rendered(prompt: Messages, completion: Messages, tools: Any) -> str:
    conversation = list(prompt) + list(completion)
    return TOKENIZER.apply_chat_template(conversation, tools=tools, tokenize=False)


# -- EnvGroup: token processing ------------------------------------------------------------


async def _tool_and_plain_group(model_server) -> tuple[EnvGroup, vf.GenerateOutputs]:
    tool_env = vf.ToolEnv(tools=[add], dataset=[{"question": "2+3?", "answer": "5"}])
    plain_env = SingleTurnEnv(dataset=[{"question": "hello", "answer": "hi"}])
    group = EnvGroup([tool_env, plain_env], env_names=["tools", "plain"])
    server = await model_server(add_then_answer)
    out = await group.evaluate(server.client(), "m", sampling_args=WANT_IDS)
    assert out.task == ["tools", "plain"] and not any(s.get("error") for s in out.state)
    return group, out


async def test_env_group_vllm_processing_tokenizes_with_each_members_tools(model_server) -> None:
    """Trainers written for verifiers call `process_env_results_vllm` by keyword."""
    group, out = await _tool_and_plain_group(model_server)
    batch = group.process_env_results_vllm(
        prompts=out.prompt,
        completions=out.completion,
        states=out.state,
        rewards=out.reward,
        processing_class=TOKENIZER,
        max_seq_len=-1,
        mask_env_responses=True,
    )
    tools = [group.envs[0].oai_tools, None]
    for k in range(2):
        ids = batch.prompt_ids[k] + batch.completion_ids[k]
        assert TOKENIZER.decode(ids) == rendered(out.prompt[k], out.completion[k], tools[k])


async def test_env_group_processing_takes_its_options_by_position_too(model_server) -> None:
    group, out = await _tool_and_plain_group(model_server)
    full = group.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)
    limit = len(full.prompt_ids[0]) + 3
    cut = group.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER, limit
    )
    assert len(cut.prompt_ids[0]) + len(cut.completion_ids[0]) == limit
    assert cut.is_truncated[0] is True


# -- States written by hand ---------------------------------------------------------------


class ReferenceStateEnv(MultiTurnEnv):
    """`init_state` as the type reference's "State Initialization" pattern writes it:
    the fields it lists, none of the engine's bookkeeping (token count, timing, ...)."""

    async def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
        return {
            "prompt": prompt,
            "completion": completion,
            "answer": answer,
            "info": info or {},
            "task": info.get("task", "default") if info else "default",
            "responses": [],
            "turn": 0,
            "history": [],
        }

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] >= 2

    def env_response(self, messages: Messages, state: State, **kwargs: Any):
        state["history"].append(messages[-1]["content"])
        return [{"role": "user", "content": "again"}], state


def said_twice(state: State) -> float:
    return float(state["history"] == ["x"])


async def test_an_init_state_in_the_type_references_shape_plays_normally(model_server) -> None:
    server = await model_server(lambda messages: "x")
    env = ReferenceStateEnv(
        dataset=[{"question": "go", "answer": "a"}],
        rubric=vf.Rubric(funcs=[said_twice]),
        rollout_token_budget=1000,
    )
    out = await env.evaluate(server.client(), "m")
    state = out.state[0]
    assert "error" not in state, state.get("error")
    assert [m["content"] for m in out.completion[0]] == ["x", "again", "x"]
    assert state["stop_reason"] == "completed" and state["is_truncated"] is False
    assert state["completion_tokens"] > 0 and state["timing"]["total_ms"] > 0
    assert out.reward == [1.0]


async def test_a_rollout_given_a_partial_state_keeps_its_fields(model_server) -> None:
    server = await model_server(lambda messages: "x")
    env = ReferenceStateEnv(dataset=[{"question": "go", "answer": "a"}])
    prompt = [{"role": "user", "content": "go"}]
    given = {"prompt": prompt, "completion": [], "turn": 0, "history": [], "mine": 1}
    completion, state = await env.rollout(server.client(), "m", prompt, state=given)
    assert "error" not in state, state.get("error")
    assert state is given and state["mine"] == 1 and len(completion) == 3
    assert state["stop_reason"] == "completed"


# -- run_rollouts: one failure does not sink the batch ------------------------------------


class FailsOnBadAnswer(SingleTurnEnv):
    async def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
        if answer == "bad":
            raise RuntimeError("no state for this row")
        return await super().init_state(prompt, completion, answer, task, info, example_id)


async def test_run_rollouts_reports_a_failed_rollout_and_keeps_the_others(model_server) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = FailsOnBadAnswer(dataset=[{"question": "q"}])
    prompts = [[{"role": "user", "content": q}] for q in ("a", "b", "c")]
    pairs = await env.run_rollouts(
        server.client(), "m", prompts, answers=["A", "bad", "C"], max_concurrent=2
    )
    assert [c[-1]["content"] if c else None for c, _ in pairs] == ["A", None, "C"]
    failed = pairs[1][1]
    assert failed["error"] == {"type": "RuntimeError", "message": "no state for this row"}
    assert failed["stop_reason"] == "error" and failed["answer"] == "bad"
    assert not pairs[0][1].get("error") and not pairs[2][1].get("error")


# -- errored rollouts of a completion-style environment ------------------------------------


class TextRolloutFails(SingleTurnEnv):
    async def rollout(self, *args: Any, **kwargs: Any):
        raise RuntimeError("custom rollout broke")


async def test_an_errored_text_rollout_has_a_text_completion(model_server) -> None:
    server = await model_server(lambda prompt: "never asked")
    env = TextRolloutFails(dataset=[{"prompt": "Once"}], message_type="completion")
    out = await env.evaluate(server.client(), "m")
    assert out.state[0]["error"]["message"] == "custom rollout broke"
    assert out.completion == [""] and out.state[0]["completion"] == ""
    assert math.isnan(out.reward[0])
    processed = env.process_env_results(
        out.prompt, out.completion, out.state, out.reward, TOKENIZER
    )
    assert processed.completion_ids == [[]] and processed.rewards == [0.0]


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_errored_state_matches_the_message_type(kind: str) -> None:
    from vfgym.engine.state import errored_state

    prompt: Messages = "Once" if kind == "completion" else [{"role": "user", "content": "q"}]
    state = errored_state(kind, prompt, "a", "t", {"k": 1}, 3, ValueError("boom"))
    assert state["completion"] == ("" if kind == "completion" else [])
    assert state["error"] == {"type": "ValueError", "message": "boom"}
    assert (state["stop_reason"], state["is_truncated"], state["example_id"]) == ("error", False, 3)


# -- outputs report the episode as played --------------------------------------------------


class Hinted(SingleTurnEnv):
    """A `setup_state` that adds a turn to the prompt and draws a hint into the info."""

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["info"]["hint"] = state["answer"]
        state["prompt"] = [*state["prompt"], {"role": "user", "content": "Shout it."}]
        return state


def shout_question(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"].upper()


def hinted(info: dict[str, Any], prompt: Messages) -> float:
    return float(info.get("hint") is not None and len(prompt) == 2)


async def test_outputs_hold_the_prompt_the_model_saw(model_server, tmp_path) -> None:
    server = await model_server(shout_question)
    env = Hinted(dataset=[{"question": "hi", "answer": "HI"}], rubric=vf.Rubric(funcs=[hinted]))
    out = await env.evaluate(
        server.client(), "m", sampling_args=WANT_IDS, results_path=tmp_path / "run"
    )
    assert out.reward == [1.0]
    assert out.prompt[0] == out.state[0]["prompt"] and len(out.prompt[0]) == 2
    assert out.info[0]["hint"] == "HI"
    batch = env.process_env_results(out.prompt, out.completion, out.state, out.reward, TOKENIZER)
    ids = batch.prompt_ids[0] + batch.completion_ids[0]
    assert TOKENIZER.decode(ids) == rendered(out.state[0]["prompt"], out.completion[0], None)
    # re-scoring the outputs gives what generate gave
    again = await env.rubric.score_rollouts(
        out.prompt, out.completion, out.answer, [{}], out.task, out.info
    )
    assert again.reward == out.reward
    # and the result line on disk says the same, as does a resumed run
    record = read_results(tmp_path / "run")[1][0]
    assert record["prompt"] == out.prompt[0] and record["info"]["hint"] == "HI"
    resumed = await env.evaluate(
        server.client(), "m", sampling_args=WANT_IDS, results_path=tmp_path / "run", resume=True
    )
    assert resumed.prompt == out.prompt and resumed.info == out.info


# -- env_response that forgets to return the State ----------------------------------------


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
