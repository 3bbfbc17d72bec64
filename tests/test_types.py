"""The verifiers type reference as a contract: GenerateOutputs, RolloutScores,
GenerateInputs and ProcessedOutputs keep the reference's shapes and load back from JSON.
Each check runs real rollouts against the project's own model server on loopback."""

from __future__ import annotations

import math
from typing import Any

import pytest

import vfgym as vf
from vfgym.inference.server import ByteTokenizer, ModelServer
from vfgym.rubrics import REWARD_ERRORS

WANT_IDS = {"extra_body": {"return_token_ids": True}, "logprobs": True}


QUESTION = [{"role": "user", "content": "q"}]


def echo(messages: Any) -> str:
    """Answers with the text of the last message (the raw text of content parts)."""
    return f"ans:{messages[-1]['content']}"


def exact(completion: vf.Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def broken(completion: vf.Messages) -> float:
    raise RuntimeError("this reward function always fails")


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


def test_generate_outputs_with_a_failed_reward_function_load_back_from_json(server) -> None:
    """A failed reward function's metric is NaN, which JSON writes as null (as
    results.jsonl does); loading that JSON back into GenerateOutputs failed with
    'Input should be a valid number', though the model is meant to round-trip."""
    env = vf.SingleTurnEnv(
        dataset=[{"question": "q", "answer": "ans:q"}],
        rubric=vf.Rubric(funcs=[exact, broken]),
    )
    out = env.evaluate_sync(server.sync_client(), "m")
    assert math.isnan(out.metrics["broken"][0])

    loaded = vf.GenerateOutputs.model_validate_json(out.model_dump_json())

    assert loaded.reward == [1.0]
    assert math.isnan(loaded.metrics["broken"][0])
    assert loaded.metrics["exact"] == [1.0]
    assert loaded.metrics[REWARD_ERRORS] == [1.0]
    assert loaded.completion == out.completion


async def test_rollout_scores_of_an_errored_rollout_load_back_from_json() -> None:
    """An errored rollout's reward is NaN: `RolloutScores` dumped it as null and
    refused that null when loading the JSON back."""
    rubric = vf.Rubric(funcs=[exact])
    scores = await rubric.score_rollouts(
        [QUESTION, QUESTION],
        [[{"role": "assistant", "content": "a"}], []],
        ["a", "a"],
        [{}, {"error": {"type": "ModelCallError", "message": "server down"}}],
        ["default", "default"],
        [{}, {}],
    )
    loaded = vf.RolloutScores.model_validate_json(scores.model_dump_json())
    assert loaded.reward[0] == 1.0 and math.isnan(loaded.reward[1])
    assert math.isnan(loaded.metrics["exact"][1])
    single = vf.RolloutScore(reward=math.nan, metrics={"exact": math.nan})
    again = vf.RolloutScore.model_validate_json(single.model_dump_json())
    assert math.isnan(again.reward) and math.isnan(again.metrics["exact"])


def test_a_reward_that_is_not_a_number_is_still_refused() -> None:
    """Only null reads as "no value"; text is still an error that names the field."""
    with pytest.raises(ValueError, match="reward"):
        vf.RolloutScore.model_validate_json('{"reward": "high"}')


def test_generate_inputs_keep_content_parts_and_extra_message_fields(server) -> None:
    """A prompt of content parts (the OpenAI format for images and text) was refused by
    GenerateInputs, though a dataset row with the same prompt ran; and a message field
    outside ChatMessage's keys (`reasoning_content`) was silently dropped, so the server
    never saw it."""
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    history = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "earlier", "reasoning_content": "because"},
        {"role": "user", "content": "second"},
    ]
    inputs = vf.GenerateInputs(prompt=[parts, history], answer=["x", "y"])
    assert inputs.prompt[0][0]["content"] == [{"type": "text", "text": "hello"}]
    assert inputs.prompt[1][1]["reasoning_content"] == "because"

    env = vf.SingleTurnEnv(dataset=[{"question": "unused"}])
    server.clear_requests()
    out = env.generate_sync(inputs, server.sync_client(), "m")

    assert [s.get("error") for s in out.state] == [None, None]
    sent = {str(r["messages"][0]["content"]): r["messages"] for r in server.requests}
    assert sent["first"][1]["reasoning_content"] == "because"
    assert "hello" in out.completion[0][-1]["content"]
    outputs = vf.GenerateOutputs.model_validate(out.model_dump())
    assert outputs.prompt[1][1]["reasoning_content"] == "because"
    assert outputs.prompt[0][0]["content"][0]["text"] == "hello"


def test_a_message_that_is_not_a_dict_is_still_refused() -> None:
    with pytest.raises(ValueError, match="prompt"):
        vf.GenerateInputs(prompt=[["not a message"]])


def test_processed_outputs_built_as_the_reference_shows_have_one_flag_per_rollout() -> None:
    """Built with the reference's six fields, `is_truncated` was an empty list beside
    two rollouts' rows: a trainer zipping the columns lost every rollout."""
    processed = vf.ProcessedOutputs(
        prompt_ids=[[1, 2], [3]],
        prompt_mask=[[0, 0], [0]],
        completion_ids=[[4], [5, 6]],
        completion_mask=[[1], [1, 0]],
        completion_logprobs=[[-0.1], [-0.2, 0.0]],
        rewards=[1.0, 0.0],
    )
    assert processed.is_truncated == [False, False]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("completion_mask", [[1], [1]], r"rollout 1: completion_ids has 2 .* completion_mask 1"),
        ("completion_logprobs", [[-0.1], []], r"rollout 1: .*completion_logprobs 0"),
        ("prompt_mask", [[0], [0]], r"rollout 0: prompt_ids has 2 .* prompt_mask 1"),
        ("rewards", [1.0], r"rewards has 1 row"),
        ("is_truncated", [False], r"is_truncated has 1 row"),
    ],
)
def test_processed_outputs_whose_columns_do_not_line_up_are_refused(
    field: str, value: Any, message: str
) -> None:
    """A ProcessedOutputs whose masks or logprobs are shorter than their ids was
    accepted, and a trainer masked the wrong tokens (or failed far from the cause)."""
    columns: dict[str, Any] = {
        "prompt_ids": [[1, 2], [3]],
        "prompt_mask": [[0, 0], [0]],
        "completion_ids": [[4], [5, 6]],
        "completion_mask": [[1], [1, 0]],
        "completion_logprobs": [[-0.1], [-0.2, 0.0]],
        "rewards": [1.0, 0.0],
        field: value,
    }
    with pytest.raises(ValueError, match=message):
        vf.ProcessedOutputs(**columns)


@pytest.mark.parametrize("message_type", ["chat", "completion"])
def test_process_env_results_lines_up_every_column(server, message_type: str) -> None:
    """process_env_results over real multi-turn rollouts, cut or not by max_seq_len:
    one row per rollout in every column, each mask and logprob row as long as its ids."""

    class TextFeedback(Feedback):
        def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> Any:
            return "\nok\n", state

    if message_type == "chat":
        env: vf.MultiTurnEnv = Feedback(dataset=[{"question": "q"}])
        args: dict[str, Any] = WANT_IDS
    else:

        def text(prompt: Any) -> str:
            return "more"

        env = TextFeedback(dataset=[{"prompt": "P:"}], message_type="completion")
        args = {"extra_body": {"return_token_ids": True}, "logprobs": 1}
    with ModelServer(echo if message_type == "chat" else text).running() as own:
        out = env.evaluate_sync(own.sync_client(), "m", sampling_args=args, rollouts_per_example=2)
    assert [s.get("error") for s in out.state] == [None, None]
    for max_seq_len in (-1, 12):
        processed = env.process_env_results(
            out.prompt,
            out.completion,
            out.state,
            out.reward,
            ByteTokenizer(),
            max_seq_len=max_seq_len,
            mask_env_responses=True,
        )
        columns = processed.model_dump()
        assert {len(column) for column in columns.values()} == {2}
        for k in range(2):
            assert len(processed.prompt_ids[k]) == len(processed.prompt_mask[k])
            size = len(processed.completion_ids[k])
            assert size > 0
            assert (
                len(processed.completion_mask[k]) == len(processed.completion_logprobs[k]) == size
            )
            assert 1 in processed.completion_mask[k]
            if message_type == "chat" or max_seq_len < 0:
                assert 0 in processed.completion_mask[k]  # the environment's turns
        assert processed.is_truncated == [max_seq_len > 0] * 2
