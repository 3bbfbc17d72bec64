"""Environments against the project's model server: data, the turn loop, hooks, budgets."""

from __future__ import annotations

import asyncio
from typing import Any

import datasets
import pytest

from vfgym.engine.seeds import rollout_seed
from vfgym.engine.state import new_state
from vfgym.envs import MultiTurnEnv, SingleTurnEnv
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State

ROWS = [
    {"question": "What is 2+2?", "answer": "4"},
    {"question": "What is 3+3?", "answer": "6"},
    {"question": "What is 4+4?", "answer": "8"},
]


GO = [{"role": "user", "content": "go"}]


FEW_SHOT = [
    {"role": "user", "content": "What is 1+1?"},
    {"role": "assistant", "content": "2"},
]


def answer_sum(messages: Messages) -> str:
    """A model that can add: reads 'What is a+b?' from the first user turn."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    if question.startswith("What is") and "+" in question:
        a, b = question.removeprefix("What is ").rstrip("?").split("+")
        return str(int(a) + int(b))
    return "?"


def exact(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


@pytest.mark.parametrize("kind", ["list", "datasets"])
def test_question_becomes_prompt_with_system_prompt_and_few_shot(kind: str) -> None:
    data: Any = list(ROWS) if kind == "list" else datasets.Dataset.from_list(ROWS)
    env = SingleTurnEnv(dataset=data, system_prompt="Answer with a number.", few_shot=FEW_SHOT)
    rows = env.get_dataset()
    assert len(rows) == 3
    assert rows[1]["prompt"] == [
        {"role": "system", "content": "Answer with a number."},
        *FEW_SHOT,
        {"role": "user", "content": "What is 3+3?"},
    ]
    assert [r["answer"] for r in rows] == ["4", "6", "8"]
    assert [r["example_id"] for r in rows] == [0, 1, 2]
    assert all(r["task"] == "default" and r["info"] == {} for r in rows)


def test_ready_prompt_gets_the_system_prompt_once() -> None:
    rows = [
        {"prompt": [{"role": "user", "content": "hi"}], "answer": "x"},
        {"prompt": [{"role": "system", "content": "own"}, {"role": "user", "content": "yo"}]},
    ]
    env = SingleTurnEnv(dataset=rows, system_prompt="sys")
    first, second = env.get_dataset()
    assert first["prompt"][0] == {"role": "system", "content": "sys"}
    assert second["prompt"][0] == {"role": "system", "content": "own"}
    assert second["answer"] == ""


def test_info_stored_as_json_text_in_a_dataset_is_read_back_as_a_dict() -> None:
    data = datasets.Dataset.from_list([{"question": "q", "answer": "a", "info": '{"level": 2}'}])
    env = SingleTurnEnv(dataset=data)
    assert env.get_dataset()[0]["info"] == {"level": 2}


def test_unknown_keyword_is_refused_with_its_name() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['max_turn'\]"):
        SingleTurnEnv(dataset=ROWS, max_turn=3)


def test_verifiers_tuning_knobs_are_accepted() -> None:
    env = SingleTurnEnv(dataset=ROWS, max_workers=8, map_kwargs={"num_proc": 2})
    assert len(env.get_dataset()) == 3
    assert not hasattr(env, "map_kwargs")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give a dataset or an eval_dataset"),
        ({"dataset": ROWS, "message_type": "json"}, "'chat' or 'completion'"),
        ({"dataset": ROWS, "message_type": "completion", "system_prompt": "s"}, "need"),
        ({"dataset": [{"answer": "1"}]}, "neither 'prompt' nor 'question'"),
        ({"dataset": ROWS, "rollout_token_budget": 0}, "positive number of tokens"),
        ({"dataset": ["What is 1+1?"]}, "expected a dict"),
    ],
)
def test_bad_construction_says_what_is_wrong(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        SingleTurnEnv(**kwargs)


def test_eval_dataset_falls_back_to_the_training_rows() -> None:
    train_only = SingleTurnEnv(dataset=ROWS)
    assert [r["answer"] for r in train_only.get_eval_dataset()] == ["4", "6", "8"]
    both = SingleTurnEnv(dataset=ROWS, eval_dataset=[{"question": "What is 9+9?", "answer": "18"}])
    assert [r["answer"] for r in both.get_eval_dataset()] == ["18"]
    eval_only = SingleTurnEnv(eval_dataset=ROWS)
    with pytest.raises(ValueError, match="no training dataset"):
        eval_only.get_dataset()
    assert len(eval_only.get_eval_dataset(n=2)) == 2


def test_seeded_dataset_shuffle_is_reproducible_and_keeps_the_rows() -> None:
    env = SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": str(i)} for i in range(20)])
    first = [r["answer"] for r in env.get_dataset(seed=3)]
    assert first == [r["answer"] for r in env.get_dataset(seed=3)]
    assert sorted(first, key=int) == [str(i) for i in range(20)]
    assert first != [str(i) for i in range(20)]


async def test_evaluate_keeps_copies_of_an_example_adjacent(model_server) -> None:
    server = await model_server(answer_sum)
    env = SingleTurnEnv(dataset=ROWS, rubric=Rubric(funcs=[exact]))
    out = await env.evaluate(server.client(), "m", num_examples=3, rollouts_per_example=3)
    assert out.example_id == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert out.answer == ["4"] * 3 + ["6"] * 3 + ["8"] * 3
    assert [p[-1]["content"] for p in out.prompt[::3]] == [r["question"] for r in ROWS]
    assert out.reward == [1.0] * 9
    assert out.metrics["exact"] == [1.0] * 9
    assert out.metrics["reward_errors"] == [0.0] * 9


async def test_completion_message_type_sends_text_prompts(model_server) -> None:
    server = await model_server(lambda prompt: f" => {prompt[::-1]}")
    env = SingleTurnEnv(dataset=[{"prompt": "abc", "answer": ""}], message_type="completion")
    out = await env.evaluate(server.client(), "m")
    assert server.requests[0]["prompt"] == "abc"
    assert out.completion == [" => cba"]
    assert out.state[0]["stop_reason"] == "completed"
    assert out.state[0]["responses_start_idx"] == [0]


class CountdownSync(MultiTurnEnv):
    """Plain sync hooks: the environment counts down from info['n'] and ends at zero."""

    def setup_state(self, state: State, **kwargs: Any) -> State:
        state["left"] = state["info"]["n"]
        return state

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["left"] == 0

    def env_response(self, messages: Messages, state: State, **kwargs: Any):
        state["left"] -= 1
        return [{"role": "user", "content": f"{state['left']} left"}], state


class CountdownAsync(MultiTurnEnv):
    """The same game with async hooks."""

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        await asyncio.sleep(0)
        state["left"] = state["info"]["n"]
        return state

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        await asyncio.sleep(0)
        return state["left"] == 0

    async def env_response(self, messages: Messages, state: State, **kwargs: Any):
        await asyncio.sleep(0)
        state["left"] -= 1
        return [{"role": "user", "content": f"{state['left']} left"}], state


def countdown_rows(*ns: int) -> list[dict[str, Any]]:
    return [{"prompt": [{"role": "user", "content": "go"}], "info": {"n": n}} for n in ns]


@pytest.mark.parametrize("env_class", [CountdownSync, CountdownAsync])
async def test_sync_and_async_hooks_drive_the_same_episode(model_server, env_class) -> None:
    server = await model_server(lambda messages: f"turn {len(messages)}")
    env = env_class(dataset=countdown_rows(2), max_turns=10)
    completion, state = await env.rollout(
        server.client(), "m", env.get_dataset()[0]["prompt"], info={"n": 2}
    )
    assert [(m["role"], m["content"]) for m in completion] == [
        ("assistant", "turn 1"),
        ("user", "1 left"),
        ("assistant", "turn 3"),
        ("user", "0 left"),
    ]
    assert state["turn"] == 2
    assert state["stop_reason"] == "completed"
    assert state["is_truncated"] is False
    assert len(state["responses"]) == 2
    assert state["responses"][0].choices[0].message.content == "turn 1"
    assert len(server.requests) == 2


async def test_an_episode_done_before_the_first_turn_calls_no_model(model_server) -> None:
    server = await model_server(lambda messages: "unused")
    env = CountdownSync(dataset=countdown_rows(0))
    completion, state = await env.rollout(server.client(), "m", GO, info={"n": 0})
    assert completion == []
    assert state["stop_reason"] == "completed"
    assert server.requests == []


async def test_max_turns_lets_the_env_answer_then_truncates(model_server) -> None:
    server = await model_server(lambda messages: "again")
    env = CountdownSync(dataset=countdown_rows(100), max_turns=3)
    completion, state = await env.rollout(server.client(), "m", GO, info={"n": 100})
    assert [m["role"] for m in completion] == ["assistant", "user"] * 3
    assert completion[-1]["content"] == "97 left"
    assert state["turn"] == 3
    assert state["stop_reason"] == "max_turns"
    assert state["is_truncated"] is True
    assert "error" not in state
    assert len(server.requests) == 3


async def test_natural_end_on_the_last_allowed_turn_is_not_truncation(model_server) -> None:
    server = await model_server(lambda messages: "go")
    env = CountdownSync(dataset=countdown_rows(3), max_turns=3)
    _, state = await env.rollout(server.client(), "m", GO, info={"n": 3})
    assert state["turn"] == 3
    assert state["stop_reason"] == "completed"
    assert state["is_truncated"] is False


async def test_env_response_may_return_a_new_state_dict(model_server) -> None:
    class Replaces(MultiTurnEnv):
        async def is_completed(self, messages, state, **kwargs):
            return state.get("done", False)

        async def env_response(self, messages, state, **kwargs):
            return [{"role": "user", "content": "ok"}], {**state, "done": True}

    server = await model_server(lambda messages: "hi")
    _, state = await Replaces(dataset=countdown_rows(1)).rollout(server.client(), "m", GO)
    assert state["done"] is True
    assert state["stop_reason"] == "completed"


async def test_env_response_returning_text_in_chat_mode_is_an_error(model_server) -> None:
    class Wrong(MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            return "not a list", state

    server = await model_server(lambda messages: "hi")
    _, state = await Wrong(dataset=countdown_rows(1)).rollout(server.client(), "m", GO)
    assert state["error"]["type"] == "TypeError"
    assert "must return (list of messages, state)" in state["error"]["message"]


class Tracked(MultiTurnEnv):
    """Records setup and cleanup calls; `info['fail']` makes env_response raise."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.setups: list[int] = []
        self.cleanups: list[tuple[int, str | None]] = []

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        self.setups.append(state["example_id"])
        return state

    async def is_completed(self, messages, state, **kwargs):
        return state["turn"] >= 2

    async def env_response(self, messages, state, **kwargs):
        if state["info"].get("fail"):
            raise RuntimeError("the game engine broke")
        return [{"role": "user", "content": "next"}], state

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        self.cleanups.append((state["example_id"], state["stop_reason"]))


def tracked_rows() -> list[dict[str, Any]]:
    return [
        {"prompt": [{"role": "user", "content": "a"}], "info": {}},
        {"prompt": [{"role": "user", "content": "b"}], "info": {"fail": True}},
        {"prompt": [{"role": "user", "content": "c"}], "info": {}},
    ]


async def test_cleanup_runs_once_on_normal_end_and_on_error(model_server) -> None:
    server = await model_server(lambda messages: "move")
    env = Tracked(dataset=tracked_rows())
    out = await env.evaluate(server.client(), "m")
    assert sorted(env.setups) == [0, 1, 2]
    assert sorted(env.cleanups) == [(0, "completed"), (1, "error"), (2, "completed")]
    ok, failed, ok2 = out.state
    assert failed["error"] == {"type": "RuntimeError", "message": "the game engine broke"}
    assert failed["stop_reason"] == "error" and failed["is_truncated"] is False
    assert "error" not in ok and "error" not in ok2
    assert out.metadata["num_errored"] == 1
    assert out.metadata["status"] == "complete_with_errors"


async def test_cleanup_runs_once_when_the_rollout_is_cancelled(model_server) -> None:
    reached = asyncio.Event()

    async def slow_policy(messages):
        reached.set()
        await asyncio.sleep(30)
        return "never"

    server = await model_server(slow_policy)
    env = Tracked(dataset=tracked_rows())
    task = asyncio.create_task(env.rollout(server.client(), "m", GO, example_id=5))
    await asyncio.wait_for(reached.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.setups == [5]
    assert env.cleanups == [(5, None)]


async def test_cleanup_runs_when_cancelled_during_a_slow_server_fault(model_server) -> None:
    server = await model_server(lambda messages: "late")
    server.inject_faults(("slow", 30))
    env = Tracked(dataset=tracked_rows())
    task = asyncio.create_task(env.rollout(server.client(), "m", GO, example_id=1))
    for _ in range(500):
        if server.requests:
            break
        await asyncio.sleep(0.01)
    assert server.requests, "the rollout never reached the server"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.cleanups == [(1, None)]


async def test_a_failing_cleanup_is_recorded_without_hiding_the_result(model_server) -> None:
    class BadCleanup(SingleTurnEnv):
        async def cleanup_state(self, state, **kwargs):
            raise OSError("could not release the board")

    server = await model_server(lambda messages: "4")
    out = await BadCleanup(dataset=ROWS[:1], rubric=Rubric(funcs=[exact])).evaluate(
        server.client(), "m"
    )
    assert out.reward == [1.0]
    assert out.state[0]["cleanup_error"]["message"] == "could not release the board"
    assert "error" not in out.state[0]


async def test_setup_state_that_returns_nothing_keeps_the_state(model_server) -> None:
    class Forgetful(SingleTurnEnv):
        async def setup_state(self, state, **kwargs):
            state["prepared"] = True  # and forgets `return state`

    server = await model_server(lambda messages: "4")
    _, state = await Forgetful(dataset=ROWS[:1]).rollout(server.client(), "m", GO)
    assert state["prepared"] is True
    assert state["stop_reason"] == "completed"


async def test_token_budget_clamps_each_turn_and_ends_the_rollout(model_server) -> None:
    server = await model_server(lambda messages: "0123456789")  # 10 byte tokens
    env = CountdownSync(dataset=countdown_rows(100), rollout_token_budget=25)
    _, state = await env.rollout(
        server.client(), "m", GO, info={"n": 100}, sampling_args={"max_tokens": 20}
    )
    assert [r["max_completion_tokens"] for r in server.requests] == [20, 15, 5]
    assert state["completion_tokens"] == 25
    assert state["stop_reason"] == "token_budget"
    assert state["is_truncated"] is True
    assert state["completion"][-2]["content"] == "01234"
    assert state["completion"][-1]["content"] == "97 left"  # the env answered the last turn


async def test_token_budget_without_max_tokens_sets_one(model_server) -> None:
    server = await model_server(lambda messages: "0123456789")
    env = CountdownSync(dataset=countdown_rows(100), rollout_token_budget=12)
    _, state = await env.rollout(server.client(), "m", GO, info={"n": 100})
    assert [r["max_completion_tokens"] for r in server.requests] == [12, 2]
    assert state["stop_reason"] == "token_budget"


async def test_sampling_args_reach_the_server(model_server) -> None:
    server = await model_server(lambda messages: "ok")
    env = SingleTurnEnv(
        dataset=ROWS[:1],
        sampling_args={"temperature": 0.2, "extra_body": {"skip_special_tokens": False}},
    )
    await env.evaluate(
        server.client(),
        "my-model",
        sampling_args={
            "temperature": 0.7,
            "top_p": 0.9,
            "max_tokens": 64,
            "top_k": 50,
            "min_p": 0.05,
            "seed": 11,
            "extra_body": {
                "top_logprobs": 5,
                "logprobs": True,
                "guided_decoding": {"regex": r"\d+"},
            },
        },
    )
    [body] = server.requests
    assert body["model"] == "my-model"
    assert body["temperature"] == 0.7
    assert body["top_p"] == 0.9
    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body
    assert body["top_k"] == 50
    assert body["min_p"] == 0.05
    assert body["seed"] == rollout_seed(11, 0)  # the rollout's own, derived from the given one
    assert body["skip_special_tokens"] is False
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["guided_decoding"] == {"regex": r"\d+"}
    assert "n" not in body and "extra_body" not in body


async def test_completion_requests_keep_max_tokens(model_server) -> None:
    server = await model_server(lambda prompt: "x")
    env = SingleTurnEnv(dataset=[{"prompt": "p"}], message_type="completion")
    await env.evaluate(server.client(), "m", sampling_args={"max_tokens": 7, "top_k": 3})
    [body] = server.requests
    assert body["max_tokens"] == 7
    assert body["top_k"] == 3
    assert "max_completion_tokens" not in body


async def test_environment_defaults_do_not_leak_between_calls(model_server) -> None:
    server = await model_server(lambda messages: "ok")
    env = SingleTurnEnv(dataset=ROWS[:1], sampling_args={"extra_body": {"a": 1}})
    await env.evaluate(server.client(), "m", sampling_args={"extra_body": {"b": 2}})
    await env.evaluate(server.client(), "m")
    first, second = server.requests
    assert (first["a"], first["b"]) == (1, 2)
    assert second["a"] == 1 and "b" not in second
    assert env.sampling_args["extra_body"] == {"a": 1}


async def test_completion_mode_multi_turn_concatenates_text(model_server) -> None:
    class Story(MultiTurnEnv):
        async def is_completed(self, messages, state, **kwargs):
            return state["turn"] >= 2

        async def env_response(self, messages, state, **kwargs):
            return f" [env {state['turn']}]", state

    server = await model_server(lambda prompt: f" <{len(prompt)}>")
    env = Story(dataset=[{"prompt": "Once"}], message_type="completion", rollout_token_budget=50)
    out = await env.evaluate(server.client(), "m")
    assert [r["prompt"] for r in server.requests] == ["Once", "Once <4> [env 1]"]
    assert [r["max_tokens"] for r in server.requests] == [50, 46]
    assert out.completion == [" <4> [env 1] <16>"]
    assert out.state[0]["responses_start_idx"] == [0, 12]
    assert out.state[0]["stop_reason"] == "completed"


def test_text_turn_sync_records_the_turn_and_answers_it_in_chat_and_completion_mode() -> None:
    class Echo(MultiTurnEnv):
        def is_completed(self, messages, state, **kwargs):
            return state["turn"] >= 2

        def env_response(self, messages, state, **kwargs):
            said = messages[-1]["content"] if isinstance(messages, list) else messages
            reply = f"heard {said!r} at turn {state['turn']}"
            return (
                [{"role": "user", "content": reply}] if isinstance(messages, list) else reply
            ), state

    chat = Echo(dataset=[{"prompt": [{"role": "user", "content": "go"}]}])
    state = new_state([{"role": "user", "content": "go"}], [], "", "default", {}, 0)
    assert chat.text_turn_sync(state, "a") == (
        [{"role": "user", "content": "heard 'a' at turn 1"}],
        None,
    )
    assert chat.text_turn_sync(state, "b")[1] == "completed"
    assert [m["role"] for m in state["completion"]] == ["assistant", "user", "assistant"]

    text = Echo(dataset=[{"prompt": "Once"}], message_type="completion")
    state = new_state("Once", "", "", "default", {}, 0)
    assert text.text_turn_sync(state, " a") == ("heard 'Once a' at turn 1", None)
    assert state["completion"] == " aheard 'Once a' at turn 1"
    assert state["responses_start_idx"] == [0]
