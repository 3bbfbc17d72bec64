"""A game's fused turn (what the Gym adapter steps) against the engine's general one.

Every game in the catalogue is played twice from the same row with the same moves:
through the game's fused `text_turn_sync` (the model's turn recorded and answered in
one call), and through `record_model_turn` then `MultiTurnEnv.advance_sync`, the
engine's general turn over the same hooks. Messages, stop reasons and whole States
must match at every turn.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from vfgym.games import guess_the_number as gtn
from vfgym.games._base import TextGame, game_rows

from vfgym.engine.state import new_state
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.envs.registry import list_environments, load_environment

GAMES = sorted(info.name for info in list_environments() if info.kind == "game")


def fresh_state(env: TextGame, row: dict[str, Any]) -> dict[str, Any]:
    state = new_state(
        copy.deepcopy(row["prompt"]), [], row["answer"], row["task"], dict(row["info"]), 0
    )
    return env.setup_state(state)


def moves_for(env: TextGame, messages: list[dict[str, Any]], rng: random.Random) -> str:
    """A mix of the moves a model makes: random legal-looking, untagged, empty, garbage."""
    roll = rng.random()
    if roll < 0.7:
        return f"<move>{env.random_move(messages, rng)}</move>"
    if roll < 0.8:
        return env.random_move(messages, rng)  # untagged
    if roll < 0.9:
        return "<move></move>"
    return "I am not sure what to play."


@pytest.mark.parametrize("name", GAMES)
def test_fused_turn_matches_the_engines_turn(name: str) -> None:
    env = load_environment(name, num_examples=6)
    assert isinstance(env, TextGame) and env._fused_turn
    rng = random.Random(name)
    turns = 0
    for row in env.get_eval_dataset():
        fused, general = fresh_state(env, row), fresh_state(env, row)
        stop = None
        while stop is None:
            move = moves_for(env, fused["prompt"] + fused["completion"], rng)
            replies, stop = env.text_turn_sync(fused, move)
            env.record_model_turn(general, {"role": "assistant", "content": move})
            assert (replies, stop) == MultiTurnEnv.advance_sync(env, general)
            assert fused == general
            turns += 1
    assert turns > 6  # every row played at least one turn, most several


def test_a_game_over_before_its_first_move_ends_it_unanswered_as_the_engine_does() -> None:
    """The fused turn checks for the game's end before the move on the first turn only
    (later, the check that ended the last turn holds): a game set up already over
    still ends at once there, with no reply, as in the engine's turn."""

    class AlreadyWon(gtn.GuessTheNumberEnv):
        def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
            return {**super().new_game(info), "won": True}

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = AlreadyWon(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert env._fused_turn
    row = env.get_dataset()[0]
    fused, general = fresh_state(env, row), fresh_state(env, row)
    assert env.text_turn_sync(fused, "<move>5</move>") == ([], "completed")
    env.record_model_turn(general, {"role": "assistant", "content": "<move>5</move>"})
    assert MultiTurnEnv.advance_sync(env, general) == ([], "completed")
    assert fused == general and fused["game_state"]["guesses"] == []


def test_a_game_that_counts_each_turn_reads_its_moves_through_the_fused_turn() -> None:
    """`start_turn` runs before every move the fused turn reads, tagged or not."""
    started: list[int] = []

    class Counting(gtn.GuessTheNumberEnv):
        def start_turn(self, game: dict[str, Any]) -> None:
            started.append(len(game["guesses"]))

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = Counting(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert env._fused_turn and env._starts_turns
    state = fresh_state(env, env.get_dataset()[0])
    for move in ("<move>0</move>", "<move>1</move>", "2"):
        env.text_turn_sync(state, move)
    assert started == [0, 0, 1] and state["tagged_moves"] == 2


def test_a_game_that_redefines_a_hook_gets_the_engines_turn() -> None:
    calls: list[int] = []

    class Impatient(gtn.GuessTheNumberEnv):
        def is_completed(self, messages: Any, state: Any, **kwargs: Any) -> bool:
            calls.append(len(messages))  # the engine hands it the context
            return state["turn"] >= 2 or super().is_completed(messages, state)

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = Impatient(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert not env._fused_turn
    state = fresh_state(env, env.get_dataset()[0])
    for expected_stop in (None, "completed"):
        env.record_model_turn(state, {"role": "assistant", "content": "<move>0</move>"})
        assert env.advance_sync(state)[1] == expected_stop
    assert calls == [2, 3, 4]  # prompt + 1 turn, + its reply, + turn 2
    calls.clear()
    state = fresh_state(env, env.get_dataset()[0])
    assert [env.text_turn_sync(state, "<move>0</move>")[1] for _ in range(2)] == [
        None,
        "completed",
    ]
    assert calls == [2, 3, 4]


def test_a_game_that_redefines_how_a_model_turn_is_recorded_gets_the_engines_turn() -> None:
    class Counting(gtn.GuessTheNumberEnv):
        def record_model_turn(self, state: Any, message: Any, response: Any = None) -> None:
            state["recorded"] = state.get("recorded", 0) + 1
            super().record_model_turn(state, message, response)

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = Counting(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert not env._fused_turn
    state = fresh_state(env, env.get_dataset()[0])
    env.text_turn_sync(state, "<move>0</move>")
    env.text_turn_sync(state, "<move>1</move>")
    assert state["recorded"] == 2 and state["turn"] == 2 and len(state["completion"]) == 4


def test_a_game_with_its_own_advance_sync_gets_it_for_a_text_turn() -> None:
    class Announcing(gtn.GuessTheNumberEnv):
        def advance_sync(self, state: Any, **kwargs: Any) -> Any:
            replies, stop = super().advance_sync(state, **kwargs)
            return [*replies, {"role": "user", "content": "(announced)"}], stop

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = Announcing(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert not env._fused_turn
    state = fresh_state(env, env.get_dataset()[0])
    replies, stop = env.text_turn_sync(state, "<move>0</move>")
    assert [m["content"] for m in replies][-1] == "(announced)" and stop is None
    assert state["turn"] == 1 and state["completion"][0]["content"] == "<move>0</move>"


def test_a_game_with_its_own_invalid_move_rule_gets_the_engines_turn() -> None:
    class Strict(gtn.GuessTheNumberEnv):
        def lost_on_invalid_moves(self, state: Any) -> bool:
            return state.get("invalid_moves", 0) >= 1  # one strike

    make = lambda rng, i: gtn.generate_item(rng, 1, 100)  # noqa: E731
    env = Strict(dataset=game_rows("guess-the-number", make, 2, 0), max_turns=10)
    assert not env._fused_turn
    state = fresh_state(env, env.get_dataset()[0])
    assert env.text_turn_sync(state, "<move>banana</move>")[1] == "completed"


class _MoveRecorder(TextGame):
    """A game that only records the moves it is given, to check how replies are read."""

    game_name = "move-recorder"

    def new_game(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"moves": []}

    def apply_move(self, game: dict[str, Any], move: str) -> str:
        game["moves"].append(move)
        return "ok"

    def is_over(self, game: dict[str, Any]) -> bool:
        return False

    def score(self, game: dict[str, Any]) -> float:
        return 0.0

    def render(self, game: dict[str, Any]) -> str:
        return ""

    def reference_policy(self, messages: Any) -> Any:
        raise NotImplementedError

    def random_move(self, messages: Any, rng: random.Random) -> str:
        return "x"


@pytest.mark.parametrize(
    "reply",
    [
        "<move>5</move>",
        "<move> 5 </move>",
        "<move>\n5\n</move>",
        "<move><move>5</move>",  # the regex's one match holds the inner opening tag
        "<move>5</b></move>",  # a "</" inside: the regex decides
        "<move>5</MOVE></move>",
        "<move>a</move> then <move>b</move>",
        "<MOVE>5</MOVE>",
        "<Move>5</move>",
        "<move></move>",
        "<move>/move>",
        "<move>5</move>\n",
        " <move>5</move>",
        "5",
        "",
    ],
)
def test_a_reply_is_read_as_extract_move_reads_it(reply: str) -> None:
    """The turn reads a reply that is exactly one tag pair without the regex; every
    reply must still give the move and the tagged count that `extract_move` gives."""
    from vfgym.games._base import extract_move

    env = _MoveRecorder(dataset=[{"question": "play", "answer": ""}], max_turns=5)
    state = env.setup_state(new_state([], [], "", "default", {}, 0))
    feedback = env._answer(reply, state)
    move, tagged = extract_move(reply)
    assert state["tagged_moves"] == int(tagged)
    if move:
        assert (feedback, state["game_state"]["moves"]) == ("ok", [move])
    else:  # an empty move is refused before the rules see it
        assert state["game_state"]["moves"] == [] and "holds no move" in feedback
