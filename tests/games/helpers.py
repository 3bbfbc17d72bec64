"""What the catalogue's tests share: a direct episode loop and the policies over HTTP.

`play` drives one episode of a text game with the same hooks the rollout loop
calls, with no server, so a test can play hundreds of games in a second.
`evaluate_over_http` runs the reference (and the random) policy through the real
model server and `env.evaluate`, the path a model under evaluation takes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from vfgym.envs.environment import new_state
from vfgym.server import ModelServer
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
