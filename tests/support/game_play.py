"""What the catalogue's tests share: a direct episode loop and the policies over HTTP.

`play` drives one episode of a text game with the same hooks the rollout loop
calls, with no server, so a test can play hundreds of games in a second.
`evaluate_over_http` runs the reference (and the random) policy through the real
model server and `env.evaluate`, the path a model under evaluation takes.
`reference_in_sandbox` plays a tool task's reference policy by hand in one
sandbox, so many problems can be checked without a sandbox each.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from vfgym.engine.state import new_state
from vfgym.inference.server import ModelServer
from vfgym.sandbox import DockerSandbox
from vfgym.sandbox.result import ExecResult
from vfgym.types import ChatMessage, GenerateOutputs, Messages, State

Policy = Callable[[Messages], ChatMessage]


POLICIES = ("reference", "random")


def play(env: Any, row: dict[str, Any], policy: Policy) -> State:
    """One episode driven directly (no server): the same hooks the rollout loop calls.

    The State comes back with the conversation as `state["messages"]` and the
    episodic reward as `state["reward"]` (0 for a game lost on invalid moves or
    left unfinished when `max_turns` ran out).
    """
    state = new_state(row["prompt"], [], row["answer"], row["task"], row["info"], 0)
    env.setup_state(state)
    messages = list(row["prompt"])
    while not env.is_completed(messages, state) and state["turn"] < env.max_turns:
        messages.append(policy(messages))
        state["turn"] += 1
        feedback, state = env.env_response(messages, state)
        messages.extend(feedback)
    lost = env.lost_on_invalid_moves(state) or not env.is_over(state["game_state"])
    state["reward"] = 0.0 if lost else env.score(state["game_state"])
    state["messages"] = messages
    return state


def won(env: Any, state: State) -> bool:
    """True when the episode's game is over with the full score and was not lost on invalid
    moves (an over game is not always a won one: a Minesweeper blast ends it too)."""
    game = state["game_state"]
    return env.is_over(game) and env.score(game) == 1.0 and not env.lost_on_invalid_moves(state)


async def evaluate_over_http(
    env: Any, num_examples: int, *policies: str
) -> tuple[GenerateOutputs, ...]:
    """`env.evaluate` of each named policy ("reference", "random" with seed 0; both when
    none is named) through the real model server, in the order named. A sandboxed env is
    entered, so its sandboxes are destroyed after."""
    policies = policies or POLICIES
    unknown = [name for name in policies if name not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}: name some of {list(POLICIES)}")
    served = {"reference": env.reference_policy, "random": env.make_random_policy(0)}
    async with AsyncExitStack() as stack:
        if hasattr(env, "__aenter__"):
            await stack.enter_async_context(env)
        server = await stack.enter_async_context(ModelServer(served))
        client = server.client()
        return tuple(
            [await env.evaluate(client, name, num_examples=num_examples) for name in policies]
        )


async def reference_in_sandbox(
    env: Any, sandbox: DockerSandbox, text: str
) -> tuple[str, ExecResult, str | None]:
    """A tool task's reference policy on the task `text`: its one tool call (python code or
    a bash command) run in `sandbox`, then its answer to what that printed.

    Returns the code or command, the run's result and the final answer as the task reads it.
    """
    prompt = [{"role": "user", "content": text}]
    call = env.reference_policy(prompt)["tool_calls"][0]
    tool, arguments = call["function"]["name"], json.loads(call["function"]["arguments"])
    if tool == "python":
        source, result = arguments["code"], await sandbox.run_python(arguments["code"])
    elif tool == "bash":
        source, result = arguments["command"], await sandbox.run_shell(arguments["command"])
    else:
        raise ValueError(f"the reference called {tool!r}; only python and bash run here")
    reply = {"role": "tool", "content": result.summary(), "tool_call_id": call["id"]}
    final = env.reference_policy([*prompt, {"role": "assistant", "content": ""}, reply])
    return source, result, env.final_answer([final])


def slips_then(policy: Any, slips: int) -> Any:
    """A policy that first sends `slips` unreadable replies, then plays `policy`."""
    sent = [0]

    def play_on(messages: list[dict[str, Any]]) -> dict[str, str]:
        if sent[0] < slips:
            sent[0] += 1
            return {"role": "assistant", "content": "<move>?</move>"}
        return policy(messages)

    return play_on


def fresh_state(env: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A State set up for `row`, as the rollout loop makes it."""
    state = new_state(row["prompt"], [], row["answer"], row["task"], row["info"], 0)
    return env.setup_state(state)


def reference_after_a_slip(env: Any, moves: list[str], slip: str) -> tuple[str, str]:
    """The reference's next move after `moves`, without and with a refused `slip` after them."""
    row = env.get_dataset()[0]
    state = fresh_state(env, row)
    messages = list(row["prompt"])
    for move in moves:
        messages.append({"role": "assistant", "content": f"<move>{move}</move>"})
        reply, state = env.env_response(messages, state)
        messages.extend(reply)
    clean = env.reference_policy(messages)["content"]
    messages.append({"role": "assistant", "content": f"<move>{slip}</move>"})
    reply, state = env.env_response(messages, state)
    assert reply[0]["content"].startswith("Invalid move:")
    messages.extend(reply)
    return clean, env.reference_policy(messages)["content"]
