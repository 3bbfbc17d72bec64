"""GymEnv over real environments: the episode, rewards, tools, hygiene, async, errors."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import gymnasium as gym
import pytest
from countdown_env import Countdown, countdown
from gym_test_envs import (
    AsyncGuessEnv,
    BrokenEnv,
    CalculatorEnv,
    GuessEnv,
    QAEnv,
    bisect_policy,
    completion_sum_env,
)
from gymnasium.utils.env_checker import check_env

import vfgym as vf
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.gym import GymEnv, StateView, Trajectory, aplay_episode, play_episode
from vfgym.gym.text import observation_text
from vfgym.rubrics import REWARD_ERRORS, Rubric, RubricGroup
from vfgym.types import Messages, RolloutScore, State


# Without a spec (no gym.make) check_env cannot make the env in other render modes
# and says so; the render check of the mode it was given still runs.
@pytest.mark.filterwarnings("ignore:.*Not able to test alternative render modes")
@pytest.mark.parametrize("mode", ["text", "messages"])
@pytest.mark.parametrize("factory", [GuessEnv, AsyncGuessEnv, CalculatorEnv, QAEnv])
def test_check_env_passes_on_the_test_environments(factory, mode):
    env = GymEnv(factory(), observation_mode=mode, render_mode="ansi")
    try:
        check_env(env, skip_render_check=False)
    finally:
        env.close()


@pytest.mark.parametrize("gym_id", ["vfgym-test/Guess-v0", "vfgym-test/Calculator-v0"])
def test_check_env_passes_through_gym_make(gym_id):
    env = gym.make(gym_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_reset_returns_the_prompt_as_text_and_the_state_in_info(guess):
    observation, info = guess.reset(seed=3)
    state = info["state"]
    assert isinstance(state, StateView)
    assert observation.startswith(GuessEnv().system_prompt)
    assert state["prompt"][-1]["content"] in observation
    assert "Ünïcödé ✓" in observation
    assert state["completion"] == [] and state["turn"] == 0
    assert state["game_state"]["guesses"] == []  # setup_state ran
    assert info["messages"] == state["prompt"]
    assert observation in guess.observation_space


def test_a_winning_episode_terminates_with_the_episodic_reward(guess):
    _, info = guess.reset(options={"index": 2})
    target = info["state"]["info"]["target"]
    wrong = 1 if target != 1 else 2
    observation, reward, terminated, truncated, info = guess.step(str(wrong))
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert observation.startswith(f"{wrong}: go")
    observation, reward, terminated, truncated, info = guess.step(f"It is {target}")
    assert observation == f"{target} is right!"
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["stop_reason"] == "completed"
    assert info["episode_reward"] == 1.0
    assert info["metrics"] == {"won": 1.0, "guesses": 2.0, REWARD_ERRORS: 0.0}
    assert info["state"]["stop_reason"] == "completed"
    assert [m["role"] for m in info["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_max_turns_truncates_and_scores(guess):
    guess.reset(options={"index": 0})
    results = [guess.step("0") for _ in range(6)]
    *_, (_obs, reward, terminated, truncated, info) = results
    assert all(not r[2] and not r[3] for r in results[:-1])
    assert (terminated, truncated) == (False, True)
    assert info["stop_reason"] == "max_turns" and info["state"]["is_truncated"] is True
    assert reward == 0.0 and info["metrics"]["guesses"] == 6.0


def test_single_turn_env_ends_after_one_step(qa):
    _, info = qa.reset(options={"index": 4})
    obs, reward, terminated, truncated, info = qa.step("12")
    assert (obs, reward, terminated, truncated) == ("", 1.0, True, False)
    assert info["messages"][-1] == {"role": "assistant", "content": "12"}


def test_step_after_the_end_and_before_reset_raise_reset_needed(qa):
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        qa.step("1")
    qa.reset()
    qa.step("1")
    with pytest.raises(gym.error.ResetNeeded, match="episode has ended"):
        qa.step("2")


def test_completion_style_environment_plays_in_text_mode():
    env = completion_sum_env()
    gym_env = GymEnv(env)
    observation, _ = gym_env.reset(seed=0)
    assert observation == "2 + 2 ="
    _, reward, terminated, _, info = gym_env.step(" 4")
    assert reward == 1.0 and terminated and info["messages"] == "2 + 2 = 4"
    with pytest.raises(TypeError, match="completion-style"):
        gym_env.reset()
        gym_env.step({"role": "assistant", "content": "4"})
    with pytest.raises(ValueError, match="needs a chat environment"):
        GymEnv(env, observation_mode="messages")


def _replay(env: GymEnv, seed: int, actions: list[str]) -> list:
    observation, info = env.reset(seed=seed)
    out = [observation, info["state"]["info"]["round"]]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        out.append((observation, reward, terminated, truncated))
        if terminated or truncated:
            break
    return out


def test_same_seed_same_episode_and_unseeded_resets_follow_the_seed():
    actions = ["5", "10", "15", "3"]
    a, b = GymEnv(GuessEnv()), GymEnv(GuessEnv())
    assert _replay(a, 11, actions) == _replay(b, 11, actions)
    follow_a = [a.reset()[1]["state"]["example_id"] for _ in range(5)]
    follow_b = [b.reset()[1]["state"]["example_id"] for _ in range(5)]
    assert follow_a == follow_b
    rounds = {GymEnv(GuessEnv()).reset(seed=s)[1]["state"]["example_id"] for s in range(40)}
    assert len(rounds) > 5  # seeds spread over the dataset


def test_rows_follow_the_np_random_generator_in_use():
    """Rows are drawn from `np_random`: a generator the user sets (Gymnasium's
    `np_random` setter) takes over from the next reset, as a reseed does."""
    import numpy as np

    def rows_after(setup) -> list[int]:
        env = GymEnv(GuessEnv())
        env.reset(seed=3)
        setup(env)
        return [env.reset()[1]["state"]["example_id"] for _ in range(8)]

    seeded = rows_after(lambda env: None)
    assert seeded == rows_after(lambda env: None)
    set_7 = rows_after(lambda env: setattr(env, "np_random", np.random.default_rng(7)))
    assert set_7 == rows_after(lambda env: setattr(env, "np_random", np.random.default_rng(7)))
    assert set_7 != seeded
    # a seed given again restarts the same draws
    env = GymEnv(GuessEnv())
    env.reset(seed=3)
    first = [env.reset()[1]["state"]["example_id"] for _ in range(8)]
    env.reset(seed=3)
    assert [env.reset()[1]["state"]["example_id"] for _ in range(8)] == first == seeded


@pytest.mark.parametrize(
    "gym_id", ["vfgym/GuessTheNumber-v0", "vfgym/TicTacToe-v0", "vfgym/Wordle-v0"]
)
def test_a_text_action_and_the_same_message_play_the_same_episode(gym_id):
    """A text action is played by the game's fused `text_turn_sync`, a message dict is
    recorded and advanced: the same moves must give the same results and States."""
    by_text, by_message = gym.make(gym_id), gym.make(gym_id)
    assert by_text.unwrapped.environment._fused_turn
    policy = by_text.unwrapped.environment.make_random_policy(seed=3)
    for episode in range(3):
        observations = [env.reset(seed=episode)[0] for env in (by_text, by_message)]
        assert observations[0] == observations[1]
        for _ in range(40):
            move = policy(by_text.unwrapped.state["prompt"] + by_text.unwrapped.state["completion"])
            got = by_text.step(move["content"])
            expected = by_message.step(dict(move))
            assert got[:4] == expected[:4]
            assert got[4] == expected[4]  # equal views, messages, turn (and metrics)
            if got[2] or got[3]:
                break
        assert by_text.unwrapped.state["stop_reason"] is not None
    by_text.close()
    by_message.close()


def test_options_index_picks_the_row_and_bad_options_are_refused(guess):
    _, info = guess.reset(options={"index": 5})
    assert info["state"]["example_id"] == 5
    _, info = guess.reset(options={"index": -1})
    assert info["state"]["example_id"] == len(guess.rows) - 1
    with pytest.raises(IndexError, match="outside the 12 dataset rows"):
        guess.reset(options={"index": 12})
    with pytest.raises(ValueError, match="unknown option"):
        guess.reset(options={"row": 1})
    with pytest.raises(TypeError, match="must be an int"):
        guess.reset(options={"index": "3"})


def test_train_and_eval_datasets_are_selectable():
    rows = [{"question": "q", "answer": "a"}]
    env = QAEnv()
    env.eval_dataset = env.format_dataset(rows)
    assert GymEnv(env).rows[0]["prompt"][-1]["content"] == "q"
    assert GymEnv(env, dataset="train").rows[0]["prompt"][-1]["content"] == "What is 0 * 3?"
    with pytest.raises(ValueError, match="'eval' or 'train'"):
        GymEnv(env, dataset="test")


def test_history_never_leaks_across_resets(guess):
    _, first = guess.reset(options={"index": 1})
    guess.step("3")
    guess.step("4")
    old_view = first["state"]
    observation, info = guess.reset(options={"index": 1})
    assert info["state"]["completion"] == [] and info["state"]["turn"] == 0
    assert info["state"]["game_state"]["guesses"] == []
    assert len(info["messages"]) == 2
    assert "go higher" not in observation and "go lower" not in observation
    assert old_view["turn"] == 2 and len(old_view["completion"]) == 4  # still the old episode
    assert info["state"]["info"] is not old_view["info"]
    assert guess.rows[1]["info"] == {"target": 8, "round": 1}  # the dataset is untouched


def test_cleanup_runs_exactly_once_per_episode(guess):
    events = guess.environment.events
    guess.reset(options={"index": 0})  # ended by a win below
    guess.step("1")
    assert events == [("setup", 0), ("cleanup", 0)]
    guess.reset(options={"index": 1})  # abandoned in mid-episode by the next reset
    guess.step("1")
    guess.reset(options={"index": 2})  # still running at close()
    guess.close()
    guess.close()
    assert events == [
        ("setup", 0),
        ("cleanup", 0),
        ("setup", 1),
        ("cleanup", 1),
        ("setup", 2),
        ("cleanup", 2),
    ]


def test_info_is_new_data_every_step(guess):
    _, info_0 = guess.reset(seed=1)
    _, _, _, _, info_1 = guess.step("2")
    assert info_0 is not info_1
    assert info_0["messages"] is not info_1["messages"]
    assert len(info_0["messages"]) + 2 == len(info_1["messages"])
    with pytest.raises(TypeError):
        info_1["state"]["turn"] = 99  # a view, not a handle on the running episode
    assert guess.state is not None and guess.state["turn"] == 1


def test_the_state_view_is_live_within_an_episode_and_kept_after_it(guess):
    _, info_0 = guess.reset(seed=1)
    view = info_0["state"]
    guess.step("2")
    assert view["turn"] == 1 and view["completion"][-2]["content"] == "2"
    _, info_1 = guess.reset(seed=2)
    assert info_1["state"] is not view and info_1["state"]["turn"] == 0
    assert view["turn"] == 1  # the old view keeps showing the old episode


def test_an_exception_in_the_environment_ends_the_episode_cleanly():
    env = GymEnv(BrokenEnv())
    env.reset(options={"index": 0})
    env.step("5")
    with pytest.raises(RuntimeError, match="crashed on 13"):
        env.step("13")
    assert env.state["stop_reason"] == "error"
    assert env.state["error"]["message"] == "the game engine crashed on 13"
    assert env.environment.events[-1] == ("cleanup", 0)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("6")
    env.reset()
    env.close()
    assert [e for e, _ in env.environment.events].count("cleanup") == 2


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        (42, TypeError, "got int"),
        (None, TypeError, "got NoneType"),
        (b"5", TypeError, "got bytes"),
        ({"role": "user", "content": "5"}, ValueError, "must be 'assistant'"),
        ({"role": "assistant", "content": 5}, TypeError, "'content' must be a str"),
        ({"role": "assistant", "tool_calls": "add"}, TypeError, "'tool_calls' must be a list"),
        ({"role": "assistant"}, ValueError, "neither 'content' nor 'tool_calls'"),
    ],
)
def test_bad_actions_raise_before_anything_changes(guess, action, error, match):
    guess.reset(options={"index": 3})  # target 2
    guess.step("9")
    before = json.dumps(dict(guess.state), default=str)
    with pytest.raises(error, match=match):
        guess.step(action)
    assert json.dumps(dict(guess.state), default=str) == before
    observation, *_ = guess.step("10")  # the episode goes on
    assert observation == "10: go lower."


def test_actions_are_copied_so_the_caller_cannot_rewrite_history(guess):
    guess.reset(options={"index": 3})
    action = {"role": "assistant", "content": "4"}
    guess.step(action)
    action["content"] = "changed"
    assert guess.state["completion"][0]["content"] == "4"


def _call(name: str, arguments: str, call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_calls_run_through_step(calculator):
    observation, info = calculator.reset(options={"index": 2})
    assert "What is 12 + 32?" in observation
    turn = {"role": "assistant", "content": "", "tool_calls": [_call("add", '{"a": 12, "b": 32}')]}
    observation, reward, terminated, truncated, info = calculator.step(turn)
    assert (observation, reward, terminated, truncated) == ("44", 0.0, False, False)
    assert info["messages"][-1] == {"role": "tool", "content": "44", "tool_call_id": "call_1"}
    assert info["state"]["tools_called"] == ["add"]
    observation, reward, terminated, truncated, info = calculator.step("The answer is 44.")
    assert (observation, reward, terminated, truncated) == ("", 1.0, True, False)


def test_malformed_tool_calls_come_back_as_tool_errors(calculator):
    calculator.reset(options={"index": 0})
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            _call("add", "{not json", "c1"),
            _call("multiply", "{}", "c2"),
            _call("add", '{"a": "x", "b": 1}', "c3"),
        ],
    }
    observation, reward, terminated, truncated, info = calculator.step(turn)
    assert not terminated and not truncated and reward == 0.0
    errors = observation.split("\n\n")
    assert len(errors) == 3 and all(e.startswith("Error:") for e in errors)
    assert "not valid JSON" in errors[0] and "unknown tool 'multiply'" in errors[1]
    assert [e["ok"] for e in info["state"]["tool_call_log"]] == [False, False, False]
    observation, *_ = calculator.step(
        {"role": "assistant", "tool_calls": [_call("add", '{"a": 1, "b": 2}')]}
    )
    assert observation == "3"


def test_messages_mode_gives_message_dicts(calculator):
    env = GymEnv(CalculatorEnv(), observation_mode="messages")
    observation, _ = env.reset(options={"index": 1})
    assert observation[-1] == {"role": "user", "content": "What is 11 + 31? Use the add tool."}
    assert observation in env.observation_space
    observation, *_ = env.step(
        {"role": "assistant", "tool_calls": [_call("add", '{"a":11,"b":31}')]}
    )
    assert observation == [{"role": "tool", "content": "42", "tool_call_id": "call_1"}]
    observation[0]["content"] = "tampered"
    assert env.state["completion"][-1]["content"] == "42"
    env.close()


def test_per_step_reward_is_opt_in():
    plain = GymEnv(GuessEnv())
    plain.reset(options={"index": 0})  # target 1
    assert [plain.step(a)[1] for a in ("5", "1")] == [0.0, 1.0]

    shaped = GymEnv(GuessEnv(), per_step_reward=True)
    shaped.reset(options={"index": 0})
    rewards = [shaped.step(a)[1] for a in ("5", "6", "1")]
    assert rewards == [-0.1, -0.1, 1.0]  # step_reward each step, + episodic at the end

    with pytest.raises(ValueError, match="step_reward"):
        GymEnv(QAEnv(), per_step_reward=True)


def test_sync_scoring_matches_the_rubric():
    """The loop-free scoring a sync step uses gives what score_rollout gives."""

    def good(state) -> float:
        return 0.5

    def broken(completion) -> float:
        raise ValueError("no")

    def not_a_number() -> str:
        return "x"

    async def later(answer) -> float:
        return 0.25

    def deferred(answer):  # a sync function handing back an awaitable
        return later(answer)

    rubric = Rubric(funcs=[good, broken, not_a_number, deferred], weights=[2.0, 1.0, 1.0, 4.0])
    assert rubric.can_score_sync()
    state_a = {"prompt": [], "completion": [], "answer": "", "timing": {}}
    state_b = {"prompt": [], "completion": [], "answer": "", "timing": {}}
    inline = rubric.score_rollout_sync([], [], "", state_a)
    reference = asyncio.run(rubric.score_rollout([], [], "", state_b))
    assert inline.reward == reference.reward == 2.0
    assert inline.metrics.keys() == reference.metrics.keys()
    for key, value in inline.metrics.items():
        assert value == reference.metrics[key] or (
            math.isnan(value) and math.isnan(reference.metrics[key])
        )
    assert state_a[REWARD_ERRORS] == state_b[REWARD_ERRORS]

    async def judged(completion) -> float:
        return 1.0

    judging = Rubric(funcs=[judged])
    assert not judging.can_score_sync()
    with pytest.raises(TypeError, match="async reward function"):
        judging.score_rollout_sync([], [], "", {})


def test_async_reward_functions_still_score_through_a_sync_step():
    async def won_async(state) -> float:
        return 1.0 if state["game_state"]["won"] else 0.0

    env = GymEnv(GuessEnv())
    env.environment.rubric.add_reward_func(won_async, 0.5)  # added after the adapter was made
    env.reset(options={"index": 0})  # target 1
    _, reward, terminated, _, info = env.step("1")
    assert (reward, terminated) == (1.5, True)
    assert info["metrics"] == {"won": 1.0, "guesses": 1.0, "won_async": 1.0, REWARD_ERRORS: 0.0}
    env.close()


def test_a_rubric_that_scores_its_own_way_scores_through_a_sync_step():
    def tries(state) -> float:
        return float(state["turn"])

    game = GuessEnv()
    game.rubric = RubricGroup([game.rubric, Rubric(funcs=[tries], weights=[0.5])])
    assert not game.rubric.can_score_sync()  # RubricGroup overrides score_rollout
    with pytest.raises(TypeError, match="overrides score_rollout"):
        game.rubric.score_rollout_sync([], [], "", {})
    env = GymEnv(game)
    env.reset(options={"index": 0})  # target 1
    _, reward, terminated, _, info = env.step("1")
    assert (reward, terminated) == (1.5, True)  # won 1.0, plus 0.5 x one turn
    assert info["metrics"]["tries"] == 1.0 and info["metrics"]["won"] == 1.0
    env.close()


def test_render_ansi_shows_the_conversation_and_the_board(guess):
    guess.reset(options={"index": 1})
    guess.step("3")
    text = guess.render()
    assert "[system]" in text and "[assistant]\n3" in text and "[user]\n3: go higher." in text
    assert text.rstrip().endswith("board: guesses=[3] won=False")


def test_render_shows_a_board_the_reply_already_showed_once():
    """Wordle's reply ends with the board, and its render adds "(playing)": the render
    adds only that line, not every row again."""
    env = gym.make("vfgym/Wordle-v0", render_mode="ansi")
    try:
        env.reset(seed=0)
        env.step("<move>crane</move>")
        text = env.render()
        assert text.count("1. CRANE") == 1
        last_lines = text.split("\n")[-2:]
        assert last_lines[0].startswith("1. CRANE  ") and last_lines[1] == "(playing)"
        env.step("<move>xxxxx</move>")  # an invalid move's reply shows no board: all of it is added
        text = env.render()
        assert text.count("1. CRANE") == 2 and text.endswith("(playing)")
    finally:
        env.close()


def test_render_human_prints(capsys):
    env = GymEnv(GuessEnv(), render_mode="human")
    env.reset(options={"index": 1})
    assert env.render() is None
    assert "board: guesses=[] won=False" in capsys.readouterr().out
    with pytest.raises(ValueError, match="render_mode"):
        GymEnv(GuessEnv(), render_mode="rgb_array")


def test_play_episode_returns_the_trajectory(guess):
    trajectory = play_episode(guess, bisect_policy, seed=4)
    assert isinstance(trajectory, Trajectory) and trajectory.done
    assert len(trajectory.observations) == trajectory.length + 1 == len(trajectory.infos)
    assert trajectory.actions[0] == "10"
    assert trajectory.total_reward == trajectory.final_info["episode_reward"]
    assert trajectory.state["turn"] == trajectory.length
    short = play_episode(guess, bisect_policy, seed=4, max_steps=1)
    assert short.length == 1 and not short.done


def test_play_episode_with_an_async_policy(guess):
    async def policy(observation: str) -> str:
        await asyncio.sleep(0)
        return bisect_policy(observation)

    assert (
        play_episode(guess, policy, seed=4).actions
        == play_episode(guess, bisect_policy, seed=4).actions
    )


async def test_async_api_drives_async_hooks_on_the_callers_loop():
    env = GymEnv(AsyncGuessEnv())
    observation, info = await env.areset(options={"index": 0})
    assert "between 1 and 20" in observation
    observation, reward, terminated, *_ = await env.astep("3")
    assert observation == "3: go lower." and not terminated
    assert env.state["loop_seen"] == id(asyncio.get_running_loop())
    _, reward, terminated, _, info = await env.astep("1")
    assert (reward, terminated) == (1.0, True) and info["metrics"]["won"] == 1.0
    env.close()


async def test_concurrent_steps_on_one_env_are_refused():
    env = GymEnv(AsyncGuessEnv())
    await env.areset(options={"index": 0})
    first = asyncio.ensure_future(env.astep("3"))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="one env plays one episode at a time"):
        await env.astep("4")
    await first
    env.close()


async def test_sync_step_works_inside_a_running_loop():
    for factory in (GuessEnv, AsyncGuessEnv):  # inline hooks, then hooks needing a loop
        env = GymEnv(factory())
        env.reset(options={"index": 0})
        assert env.step("4")[0] == "4: go lower."
        _, reward, terminated, _, _ = env.step("1")
        assert (reward, terminated) == (1.0, True)
        env.close()


async def test_aplay_episode_matches_the_sync_play():
    env = GymEnv(AsyncGuessEnv())
    played = await aplay_episode(env, bisect_policy, seed=9)
    again = play_episode(GymEnv(AsyncGuessEnv()), bisect_policy, seed=9)
    assert played.observations == again.observations and played.rewards == again.rewards
    env.close()


def test_sync_step_without_a_loop_reuses_one_private_loop():
    env = GymEnv(AsyncGuessEnv())
    env.reset(options={"index": 1})  # target 8
    env.step("2")
    first = env.state["loop_seen"]
    env.step("3")
    assert env.state["loop_seen"] == first
    env.close()
    assert env._loop is None


def test_a_rubric_that_overrides_sync_scoring_is_honoured_by_a_sync_step():
    """The adapter takes the pair from `score_values_sync` only when `score_rollout_sync`
    is Rubric's own; a subclass's version is what scores."""

    class Curved(Rubric):
        def score_rollout_sync(self, *args: Any, **kwargs: Any) -> RolloutScore:
            verdict = super().score_rollout_sync(*args, **kwargs)
            return RolloutScore(reward=verdict.reward * 10, metrics={**verdict.metrics, "x": 1})

    game = GuessEnv()
    game.rubric = Curved(funcs=game.rubric.get_reward_funcs(), weights=[1.0, 0.0])
    env = GymEnv(game)
    env.reset(options={"index": 0})  # target 1
    _, reward, terminated, _, info = env.step("1")
    assert (reward, terminated, info["episode_reward"]) == (10.0, True, 10.0)
    assert info["metrics"]["x"] == 1.0
    env.close()


def test_an_environment_that_redefines_finish_has_it_called_at_a_sync_steps_end():
    """The sync end of an episode inlines `finish` only while it is MultiTurnEnv's own."""

    class Noting(GuessEnv):
        def finish(self, state: Any, stop_reason: str) -> None:
            super().finish(state, stop_reason)
            state["finished_by"] = stop_reason

    env = GymEnv(Noting(max_turns=2))
    env.reset(options={"index": 0})  # target 1
    env.step("5")
    _, _, terminated, truncated, info = env.step("6")
    assert (terminated, truncated, info["stop_reason"]) == (False, True, "max_turns")
    assert env.state["finished_by"] == "max_turns" and env.state["is_truncated"] is True
    env.close()


def test_every_episode_gets_metrics_of_its_own():
    """Each episode's end hands out a new metrics dict: changing one changes no other."""
    env = GymEnv(GuessEnv())
    ends = []
    for _ in range(2):
        env.reset(options={"index": 0})  # target 1
        ends.append(env.step("1")[4]["metrics"])
    ends[0]["won"] = -1.0
    assert ends[1]["won"] == 1.0 and ends[0] is not ends[1]
    env.close()


class ShapedRepliesEnv(GuessEnv):
    """Sync hooks (so `step` takes its shortest path) answering each turn in another
    shape: the action names the shape."""

    REPLIES: dict[str, Any] = {
        "two": [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}],
        "none": [],
        "parts": [{"role": "user", "content": [{"type": "text", "text": "in parts"}]}],
        "no-content": [{"role": "user"}],
        "null-content": [{"role": "user", "content": None}],
        "control": [{"role": "user", "content": "bell\x07 and\ttab"}],
        "long": [{"role": "user", "content": "x" * 300}],
    }

    def env_response(self, messages: Any, state: Any, **kwargs: Any) -> tuple[Any, Any]:
        return self.REPLIES[messages[-1]["content"]], state


class OneLetterEnv(MultiTurnEnv):
    """A completion-style game answering each turn with one letter: a reply that
    unpacks as a one-item sequence, and is no message."""

    def __init__(self) -> None:
        super().__init__(
            dataset=[{"prompt": "Say a letter:", "answer": "x"}],
            message_type="completion",
            rubric=Rubric(funcs=[lambda completion: 0.0]),
            max_turns=3,
        )

    def env_response(self, messages: Any, state: Any, **kwargs: Any) -> tuple[Any, Any]:
        return "?", state


def test_a_one_letter_text_reply_is_the_observation():
    env = GymEnv(OneLetterEnv())
    try:
        env.reset(seed=0)
        observation, _, _, _, info = env.step(" a")
        assert observation == "?"
        assert info["messages"] == "Say a letter: a?"
    finally:
        env.close()


@pytest.mark.parametrize("shape", sorted(ShapedRepliesEnv.REPLIES))
def test_every_shape_of_reply_is_observed_as_observation_text_says(shape):
    env = GymEnv(ShapedRepliesEnv(max_turns=5), max_text_length=200)
    try:
        env.reset(seed=0)
        observation, *_ = env.step(shape)
        expected = observation_text(ShapedRepliesEnv.REPLIES[shape], 200)
        assert observation == expected
        assert env.observation_space.contains(observation)
    finally:
        env.close()


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


SAY_HI = [{"role": "user", "content": "Say hi."}]


class FrozenMetricsRubric(Rubric):
    """A rubric whose own `score_values_sync` hands back a read-only view of its metrics."""

    def score_values_sync(self, *args: Any, **kwargs: Any) -> tuple[float, Mapping[str, float]]:
        reward, metrics = super().score_values_sync(*args, **kwargs)
        return reward, MappingProxyType(metrics)


def said_hi(completion: Messages) -> float:
    return 1.0 if "hi" in str(completion) else 0.0


class OneTurn(vf.MultiTurnEnv):
    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return state["turn"] >= 1

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Any:
        return [{"role": "user", "content": "again"}], state


def test_the_gym_adapter_hands_out_a_plain_dict_of_metrics() -> None:
    """A mapping proxy in `info["metrics"]` cannot be edited, copied with
    `copy.deepcopy` or pickled into a vector env's worker pipe."""
    env = OneTurn(dataset=[{"prompt": SAY_HI, "answer": ""}], rubric=FrozenMetricsRubric([said_hi]))
    gym_env = GymEnv(env)
    gym_env.reset(seed=0)
    _, reward, terminated, _, info = gym_env.step("hi")
    assert terminated and reward == 1.0
    assert type(info["metrics"]) is dict and info["metrics"]["said_hi"] == 1.0
    gym_env.close()
