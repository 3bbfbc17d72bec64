"""The rollout State: what an init state may look like and what a rollout keeps of a partial one."""

from __future__ import annotations

from typing import Any

import vfgym as vf
from vfgym.envs import MultiTurnEnv
from vfgym.types import Messages, State


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
