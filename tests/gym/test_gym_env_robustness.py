"""GymEnv under misuse: notebooks, copies, token budgets, hooks and inputs that misbehave."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gym_test_envs
import gymnasium as gym
import pytest
from gym_test_envs import SYSTEM, AsyncGuessEnv, GuessEnv, completion_sum_env
from gymnasium.utils.env_checker import check_env

from vfgym.gym import GymEnv, GymVectorEnv, MessagesSpace
from vfgym.types import Messages, State

# Where gym_test_envs lives, for a child process that imports it.
SUPPORT = Path(gym_test_envs.__file__).parent


class LoopBoundGuessEnv(GuessEnv):
    """Opens a future on the event loop at setup and awaits it every turn, as a
    sandbox session or an HTTP client would use what it opened on its loop."""

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        GuessEnv.setup_state(self, state)
        self.ready = asyncio.get_running_loop().create_future()
        self.ready.set_result("open")
        state["loops"] = [id(asyncio.get_running_loop())]
        return state

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        await self.ready  # raises when awaited from another loop
        state["loops"].append(id(asyncio.get_running_loop()))
        return GuessEnv.env_response(self, messages, state)


def test_sync_steps_in_a_notebook_keep_using_the_loop_their_episode_opened():
    async def notebook_cell() -> State:
        env = GymEnv(LoopBoundGuessEnv())
        try:
            env.reset(seed=0)
            for guess in ("3", "4", "5"):
                env.step(guess)
            return env.state
        finally:
            env.close()

    state = asyncio.run(notebook_cell())
    assert state.get("error") is None and state["turn"] == 3
    assert len(set(state["loops"])) == 1


class AsyncStepReward(GuessEnv):
    async def step_reward(self, state: State) -> float:
        await asyncio.sleep(0)
        return -0.25


def test_an_async_step_reward_works_in_sync_step_when_the_other_hooks_are_sync():
    env = GymEnv(AsyncStepReward(), per_step_reward=True)
    try:
        assert env.needs_loop
        env.reset(seed=0)
        _, reward, terminated, truncated, _ = env.step("1")
        assert (reward, terminated, truncated) == (-0.25, False, False)
    finally:
        env.close()


class NoneStepReward(GuessEnv):
    def step_reward(self, state: State) -> Any:
        return None


def test_a_step_reward_that_is_not_a_number_is_named_in_the_error():
    env = GymEnv(NoneStepReward(), per_step_reward=True)
    try:
        env.reset(seed=0)
        with pytest.raises(TypeError, match=r"NoneStepReward.step_reward\(state\) must return a"):
            env.step("1")
        assert env.episode_over and env.state["stop_reason"] == "error"
    finally:
        env.close()


def test_reset_options_must_be_a_dict():
    env = GymEnv(GuessEnv())
    try:
        with pytest.raises(TypeError, match=r"options must be a dict such as \{'index': 3\}"):
            env.reset(options="index")  # type: ignore[arg-type]
    finally:
        env.close()


class SlowSetupGuessEnv(GuessEnv):
    async def setup_state(self, state: State, **kwargs: Any) -> State:
        await asyncio.sleep(0.01)
        return GuessEnv.setup_state(self, state)


async def test_a_refused_areset_leaves_the_seed_alone():
    env = GymEnv(SlowSetupGuessEnv())
    try:
        first = asyncio.create_task(env.areset(seed=1))
        await asyncio.sleep(0)  # the first reset is under way
        with pytest.raises(RuntimeError, match="still running"):
            await env.areset(seed=2)
        await first
        assert env.np_random_seed == 1
    finally:
        await env.aclose()


def test_a_step_after_close_says_the_env_was_closed():
    env = GymEnv(GuessEnv())
    env.reset(seed=0)
    env.close()
    with pytest.raises(gym.error.ResetNeeded, match="this env was closed; call reset"):
        env.step("1")
    env.reset(seed=0)  # and a reset starts over, as the message says
    assert env.step("1")[4]["turn"] == 1
    env.close()


class PartsGuessEnv(GuessEnv):
    """Answers in content parts (the OpenAI list form), with a control character."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        reply = [{"type": "text", "text": "again"}, {"type": "text", "text": " \x00!"}]
        return [{"role": "user", "content": reply}], state


def test_content_parts_become_clean_text_in_messages_observations():
    env = GymEnv(PartsGuessEnv(), observation_mode="messages")
    try:
        env.reset(seed=0)
        observation, *_, info = env.step("1")
        assert observation == [{"role": "user", "content": "again ␀!"}]
        assert MessagesSpace().contains(observation)
        assert info["messages"][-1]["content"][1]["text"] == " \x00!"  # kept as it was
    finally:
        env.close()


@pytest.mark.parametrize("factory", [GuessEnv, AsyncGuessEnv])
def test_deepcopy_copies_an_episode_in_play_and_the_copies_go_their_own_ways(factory):
    env = GymEnv(factory())
    try:
        env.reset(options={"index": 0})  # the number is 1
        env.step("5")
        twin = copy.deepcopy(env)
        try:
            assert twin.step("1")[2] is True  # the copy wins...
            assert env.step("2")[2] is False  # ...the original plays on
            assert env.state["turn"] == twin.state["turn"] == 2
            assert env.state["completion"][-2]["content"] == "2"
            assert twin.state["completion"][-2]["content"] == "1"
        finally:
            twin.close()
    finally:
        env.close()


def test_deepcopy_shares_the_dataset_and_each_copy_starts_from_its_own_row_copy():
    """Copies share the dataset rows (copying them cost more than the rest of a copy);
    every reset still starts from a fresh copy of its row, so no episode reaches them."""
    env = gym.make("vfgym/Wordle-v0").unwrapped
    try:
        env.reset(seed=0)
        twin = copy.deepcopy(env)
        assert twin.rows is env.rows
        assert twin.environment.dataset is env.environment.dataset
        assert twin.environment is not env.environment  # the rest is copied as before
        row_prompt = env.rows[0]["prompt"]
        before = copy.deepcopy(row_prompt)
        _, info = twin.reset(options={"index": 0})
        info["state"]["prompt"][-1]["content"] += " (changed by the copy's episode)"
        assert env.rows[0]["prompt"] == before
        twin.close()
    finally:
        env.close()


def test_pickling_a_gym_env_says_what_to_send_instead():
    env = GymEnv(GuessEnv())
    try:
        with pytest.raises(TypeError, match=r"send a function that makes one"):
            pickle.dumps(env)
    finally:
        env.close()


class BudgetGuessEnv(GuessEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_turns=20, rollout_token_budget=10, **kwargs)


def test_count_tokens_lets_the_token_budget_end_an_episode():
    env = GymEnv(BudgetGuessEnv(), count_tokens=lambda text: len(text.split()))
    try:
        env.reset(options={"index": 0})
        steps = 0
        truncated = False
        while not truncated:
            _, _, terminated, truncated, info = env.step("maybe it is 7")  # 4 tokens
            steps += 1
            assert not terminated
        assert steps == 3 and info["stop_reason"] == "token_budget"
        assert env.state["completion_tokens"] == 12
    finally:
        env.close()


def test_count_tokens_assigned_after_making_counts_from_the_next_step():
    with pytest.warns(UserWarning, match="count_tokens="):
        env = GymEnv(BudgetGuessEnv())
    try:
        env.reset(options={"index": 0})
        env.step("maybe it is 7")  # not counted: no counter yet
        assert env.state["completion_tokens"] == 0
        env.count_tokens = lambda text: len(text.split())
        assert env.count_tokens("a b") == 2
        env.step("maybe it is 7")
        env.step("maybe it is 7")
        *_, truncated, info = env.step("maybe it is 7")
        assert env.state["completion_tokens"] == 12
        assert truncated and info["stop_reason"] == "token_budget"
        env.count_tokens = None  # and back to none
        env.reset(options={"index": 0})
        env.step("maybe it is 7")
        assert env.state["completion_tokens"] == 0
        with pytest.raises(TypeError, match="count_tokens must be a function"):
            env.count_tokens = 5  # type: ignore[assignment]
        assert env.count_tokens is None
    finally:
        env.close()


def test_a_gym_env_subclass_keeps_attributes_of_its_own_and_copies_them():
    class Noted(GymEnv):
        def __init__(self, env: Any) -> None:
            super().__init__(env)
            self.notes: list[str] = []

    env = Noted(GuessEnv())
    try:
        env.reset(options={"index": 0})
        env.step("5")
        env.notes.append("tried 5")
        twin = copy.deepcopy(env)
        twin.notes.append("copy")
        assert env.notes == ["tried 5"] and twin.notes == ["tried 5", "copy"]
        assert twin.step("1")[2] is True and twin.state["turn"] == 2
        assert env.state["turn"] == 1
        twin.close()
    finally:
        env.close()


def test_a_token_budget_without_count_tokens_is_warned_about():
    with pytest.warns(UserWarning, match="rollout_token_budget=10.*count_tokens="):
        env = GymEnv(BudgetGuessEnv())
    env.close()


def test_count_tokens_must_count():
    env = GymEnv(BudgetGuessEnv(), count_tokens=lambda text: "many")
    try:
        env.reset(seed=0)
        with pytest.raises(TypeError, match="count_tokens must return a token count"):
            env.step("7")
    finally:
        env.close()
    with pytest.raises(TypeError, match="count_tokens must be a function"):
        GymEnv(BudgetGuessEnv(), count_tokens=5)  # type: ignore[arg-type]


def test_a_misspelt_adapter_keyword_of_gym_make_lists_the_adapters_keywords():
    with pytest.raises(TypeError, match=r"\['per_step_rewards'\].*adapter's own keywords are: "):
        gym.make("vfgym-test/Guess-v0", per_step_rewards=True)


class FloodEnv(GuessEnv):
    """Answers with four replies, each as long as the text bound allows."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        reply = {"role": "user", "content": 'a "quoted"\nline ' * 400}
        return [dict(reply) for _ in range(4)], state


@pytest.mark.parametrize("vectorization_mode", ["sync", "async"])
def test_a_messages_observation_fits_the_shared_memory_of_an_async_vector_env(
    vectorization_mode,
):
    from vfgym.gym import register

    register("vfgym-test/Flood-v0", FloodEnv)
    try:
        vec = gym.make_vec(
            "vfgym-test/Flood-v0",
            2,
            vectorization_mode=vectorization_mode,
            observation_mode="messages",
            max_text_length=6000,
        )
        try:
            vec.reset(seed=0)
            observations, *_ = vec.step(["1", "2"])
            space = vec.single_observation_space
            assert not space.contains([{"role": "user", "content": "x" * 6000}] * 5)
            for observation in observations:
                assert len(observation) == 4 and space.contains(observation)
                assert len(json.dumps(observation, ensure_ascii=False)) <= 4 * 6000 + 4096
                assert "the full text is in info['messages']" in observation[0]["content"]
        finally:
            vec.close()
    finally:
        gym.registry.pop("vfgym-test/Flood-v0", None)


class ConnectedGuessEnv(GuessEnv):
    """Holds a live resource, as a sandbox env holds its connection."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connection = threading.Lock()


def test_copying_an_env_with_live_resources_says_what_to_do_instead():
    env = GymEnv(ConnectedGuessEnv())
    try:
        env.reset(seed=0)
        with pytest.raises(TypeError, match="ConnectedGuessEnv holds something that cannot be"):
            copy.deepcopy(env)
        assert env.step("1")[4]["turn"] == 1  # the original plays on
    finally:
        env.close()


class HangingGuessEnv(GuessEnv):
    """Its answer waits far longer than any test: only an interrupt ends it."""

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        await asyncio.sleep(60)
        return GuessEnv.env_response(self, messages, state)


def _ctrl_c_soon() -> threading.Timer:
    """A real SIGINT to the main thread shortly, as Ctrl-C sends one."""
    timer = threading.Timer(
        0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)
    )
    timer.start()
    return timer


def _as_in_a_notebook(play: Any) -> None:
    """Run `play` inside a running event loop, with Python's own Ctrl-C handling (a
    kernel's; `asyncio.run` would install a handler that cancels instead)."""

    async def cell() -> None:
        play()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(cell())
    finally:
        loop.close()


@pytest.mark.parametrize("where", ["script", "notebook"])
def test_ctrl_c_during_a_waiting_step_unwinds_it_and_the_env_stays_usable(where):
    env = GymEnv(HangingGuessEnv())

    def play() -> None:
        env.reset(seed=0)
        timer = _ctrl_c_soon()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                env.step("5")
        finally:
            timer.cancel()
        assert time.monotonic() - started < 30
        assert env.episode_over and env.state["stop_reason"] == "error"
        assert env.environment.events[-1] == ("cleanup", env.state["example_id"])
        with pytest.raises(gym.error.ResetNeeded):
            env.step("6")
        env.reset(seed=1)  # the env's loop is free again: nothing half-run resumes
        assert env.state["turn"] == 0 and env.state["completion"] == []

    try:
        _as_in_a_notebook(play) if where == "notebook" else play()
    finally:
        env.close()


def test_ctrl_c_during_an_async_vector_step_leaves_it_ready_for_a_reset():
    vec = GymVectorEnv([GymEnv(HangingGuessEnv()) for _ in range(2)], mode="async")
    try:
        vec.reset(seed=0)
        timer = _ctrl_c_soon()
        try:
            with pytest.raises(KeyboardInterrupt):
                vec.step(("5", "6"))
        finally:
            timer.cancel()
        assert [state["stop_reason"] for state in vec.get_attr("state")] == ["error", "error"]
        with pytest.raises(gym.error.ResetNeeded, match="interrupted"):
            vec.step(("5", "6"))
        observations, _ = vec.reset(seed=0)
        assert all(observation.startswith(SYSTEM) for observation in observations)
    finally:
        vec.close()


def test_an_episode_is_stepped_on_the_loop_it_started_on():
    env = GymEnv(AsyncGuessEnv())
    try:
        env.reset(seed=0)

        async def astep_it() -> None:
            with pytest.raises(
                RuntimeError, match=r"started with reset\(\).*call step\(\), not astep\(\)"
            ):
                await env.astep("5")

        asyncio.run(astep_it())
        assert env.step("5")[4]["turn"] == 1  # refused before anything changed

        loop = asyncio.new_event_loop()  # still open, and holding the episode
        try:
            loop.run_until_complete(env.areset(seed=0))
            with pytest.raises(RuntimeError, match="started on another event loop"):
                env.step("5")
            assert loop.run_until_complete(env.astep("5"))[4]["turn"] == 1
        finally:
            loop.close()
        # Its loop closed, nothing of the episode is held anywhere: step() goes on.
        assert env.step("6")[4]["turn"] == 2
    finally:
        env.close()


def test_an_episode_left_by_an_async_policy_can_be_stepped_on():
    from vfgym.gym import play_episode

    async def policy(observation: str) -> str:
        return "5"

    for factory in (GuessEnv, AsyncGuessEnv):  # stepped without a loop, and with one
        env = GymEnv(factory())
        try:
            trajectory = play_episode(env, policy, seed=0, max_steps=1)  # on a loop now gone
            assert trajectory.length == 1 and not trajectory.done
            assert env.step("6")[4]["turn"] == 2
            asyncio.run(env.astep("7"))
            assert env.state["turn"] == 3
        finally:
            env.close()


def test_close_and_deepcopy_wait_for_a_running_step():
    env = GymEnv(HangingGuessEnv())

    async def mid_step() -> None:
        await env.areset(seed=0)
        step = asyncio.create_task(env.astep("5"))
        await asyncio.sleep(0.01)  # the step waits inside env_response
        with pytest.raises(RuntimeError, match="cannot copy an env while a reset/step"):
            copy.deepcopy(env)
        with pytest.raises(RuntimeError, match=r"close\(\) was called while a reset/step"):
            env.close()
        assert not env.episode_over  # nothing changed under the running step
        step.cancel()
        with pytest.raises(asyncio.CancelledError):
            await step
        await env.aclose()

    asyncio.run(mid_step())
    assert env.state["stop_reason"] == "error"


class CleanupInterruptedOnce(GuessEnv):
    def cleanup_state(self, state: State, **kwargs: Any) -> None:
        if not any(event == "cleanup" for event, _ in self.events):
            self.events.append(("cleanup", -1))
            raise KeyboardInterrupt  # Ctrl-C during the cleanup
        super().cleanup_state(state)


def test_a_cleanup_interrupted_by_ctrl_c_runs_again_on_the_next_close():
    env = GymEnv(CleanupInterruptedOnce())
    env.reset(seed=0)
    with pytest.raises(KeyboardInterrupt):
        env.close()
    env.close()
    assert [event for event in env.environment.events if event[0] == "cleanup"] == [
        ("cleanup", -1),
        ("cleanup", env.state["example_id"]),
    ]


class ReleaseFailsOnce(GuessEnv):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.releases = 0

    async def aclose(self) -> None:
        self.releases += 1
        if self.releases == 1:
            raise OSError("the server did not answer")


def test_a_close_that_failed_can_be_called_again():
    env = GymEnv(ReleaseFailsOnce(), owns_environment=True)
    env.reset(seed=0)
    with pytest.raises(OSError, match="did not answer"):
        env.close()
    env.close()
    assert env.environment.releases == 2
    env.close()  # closed now: nothing more happens
    assert env.environment.releases == 2


def test_human_mode_prints_each_part_of_an_episode_once(capsys):
    env = GymEnv(GuessEnv(), render_mode="human")
    try:
        env.reset(options={"index": 1})
        opening = capsys.readouterr().out
        assert "[system]" in opening and "board: guesses=[] won=False" in opening
        env.step("3")
        step = capsys.readouterr().out
        assert "[system]" not in step and "[assistant]\n3" in step and "3: go higher." in step
        assert "board: guesses=[3] won=False" in step
        assert env.render() is None and capsys.readouterr().out == ""  # nothing new
        for guess in ("4", "5", "6", "7", "8"):
            env.step(guess)
        ending = capsys.readouterr().out
        assert ending.count("[assistant]") == 5 and "(episode over: completed)" in ending
    finally:
        env.close()


def test_human_mode_prints_on_a_terminal_that_is_not_unicode():
    script = (
        "from gym_test_envs import GuessEnv\n"
        "from vfgym.gym import GymEnv\n"
        "env = GymEnv(GuessEnv(), render_mode='human')\n"
        "env.reset(seed=0)\n"
        "env.step('3\\x07')\n"
        "env.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(SUPPORT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "[assistant]\n3?" in done.stdout  # the bell's stand-in, replaced


class WindowGuessEnv(GuessEnv):
    """Keeps only the last exchange of its history, as a context-trimming env does."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        replies, state = GuessEnv.env_response(self, messages, state)
        del state["completion"][:-1]  # (the reply is appended after this returns)
        return replies, state


def test_human_mode_prints_every_turn_of_an_env_that_trims_its_history(capsys):
    env = GymEnv(WindowGuessEnv(), render_mode="human")
    try:
        env.reset(options={"index": 1})
        capsys.readouterr()
        for guess in ("3", "4"):
            env.step(guess)
            printed = capsys.readouterr().out
            assert f"[assistant]\n{guess}" in printed and f"{guess}: go higher." in printed
    finally:
        env.close()


def test_sub_env_errors_survive_pickle_and_copy():
    from vfgym.errors import SubEnvError

    error = SubEnvError("step() failed in sub-env 1", errors={1: ValueError("x")}, results=(1,))
    for twin in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error), copy.copy(error)):
        assert str(twin) == str(error) and twin.results == (1,)
        assert list(twin.errors) == [1] and isinstance(twin.errors[1], ValueError)


def test_a_completion_envs_action_space_holds_text_alone():
    env = GymEnv(completion_sum_env())
    try:
        message = {"role": "assistant", "content": "5"}
        assert env.action_space.contains("5") and not env.action_space.contains(message)
        env.reset(seed=0)
        with pytest.raises(TypeError, match="completion-style"):
            env.step(message)
    finally:
        env.close()


@pytest.mark.parametrize("factory", [GuessEnv, AsyncGuessEnv], ids=["sync-hooks", "async-hooks"])
def test_truncate_scores_an_episode_a_step_limit_outside_the_env_cut_short(factory):
    inner = factory()
    env = GymEnv(inner)
    with pytest.raises(gym.error.ResetNeeded):
        env.truncate()
    env.reset(seed=0, options={"index": 1})  # target 8
    env.step("20")
    env.step("8")
    env.reset(options={"index": 2})  # target 15: two misses, then the limit
    env.step("1")
    env.step("2")
    with pytest.raises(ValueError, match="completed"):
        env.truncate("completed")  # not a truncation: refused before anything changes
    assert not env.episode_over
    episode_reward, metrics = env.truncate()
    state = env.state
    assert (episode_reward, metrics["guesses"], metrics["won"]) == (0.0, 2.0, 0.0)
    assert state["stop_reason"] == "max_turns" and state["is_truncated"] is True
    assert inner.events[-1] == ("cleanup", 2)
    with pytest.raises(gym.error.ResetNeeded, match="max_turns"):
        env.step("3")
    with pytest.raises(gym.error.ResetNeeded):
        env.truncate()
    env.close()
    assert inner.events.count(("cleanup", 2)) == 1


async def test_atruncate_cleans_up_and_scores_on_the_callers_loop():
    inner = LoopBoundGuessEnv()
    env = GymEnv(inner)
    await env.areset(seed=0, options={"index": 3})  # target 2
    await env.astep("1")
    assert await env.atruncate("token_budget") == (
        0.0,
        {"won": 0.0, "guesses": 1.0, "reward_errors": 0.0},
    )
    assert env.state["stop_reason"] == "token_budget"
    assert inner.events[-1] == ("cleanup", 3)
    await env.aclose()


def test_truncate_of_an_episode_started_on_another_loop_says_which_call_to_use():
    env = GymEnv(LoopBoundGuessEnv())

    async def start() -> None:
        await env.areset(seed=0)

    asyncio.run(start())  # that loop is closed now: nothing of the episode is held
    env.reset(seed=0)  # an episode on the env's own loop
    with pytest.raises(RuntimeError, match=r"call truncate\(\), not atruncate\(\)"):
        asyncio.run(env.atruncate())
    assert not env.episode_over  # refused before anything changed
    assert env.truncate()[1]["guesses"] == 0.0
    env.close()


class SlowCleanupGuessEnv(GuessEnv):
    """Its cleanup waits, as returning a sandbox to its pool does."""

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        self.events.append(("cleanup started", state["example_id"]))
        await asyncio.sleep(0.2)
        self.events.append(("cleanup", state["example_id"]))


@pytest.mark.parametrize("vector", [False, True], ids=["env", "vector-env"])
async def test_an_aclose_cancelled_during_cleanup_runs_it_when_called_again(vector):
    inner = SlowCleanupGuessEnv()
    single = GymEnv(inner)
    env: Any = GymVectorEnv([single], mode="async") if vector else single
    await env.areset(seed=0)
    closing = asyncio.ensure_future(env.aclose())
    await asyncio.sleep(0.05)
    closing.cancel()  # a shutdown timeout, say
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert "cleanup" not in [kind for kind, _ in inner.events]
    await env.aclose()
    assert [kind for kind, _ in inner.events].count("cleanup") == 1


def test_step_reward_may_be_any_number_a_reward_function_may_return():
    from fractions import Fraction

    import numpy as np

    class Judged(GuessEnv):
        def step_reward(self, state: State) -> Any:
            won = np.array([state["game_state"]["won"]])
            return np.all(won == True) if state["turn"] == 1 else Fraction(1, 4)  # noqa: E712

    env = GymEnv(Judged(), per_step_reward=True)
    env.reset(seed=0, options={"index": 1})  # target 8
    assert env.step("3")[1] == 0.0  # np.False_
    assert env.step("8")[1:3] == (1.25, True)  # Fraction(1, 4) + the episodic 1.0
    env.close()


def test_a_rubric_that_cannot_score_raises_and_the_state_records_it():
    inner = GuessEnv()
    inner.rubric.reward_funcs.append(lambda state: 1.0)  # a function without a weight
    env = GymEnv(inner)
    env.reset(seed=0, options={"index": 1})  # target 8
    with pytest.raises(ValueError, match="weight"):
        env.step("8")
    assert env.state["error"]["type"] == "ValueError"  # as generate records it
    assert env.episode_over
    env.reset(seed=0)  # and the env goes on
    env.close()


class ReferenceShapedStateGuessEnv(GuessEnv):
    """`init_state` as the type reference's example writes it: no engine bookkeeping
    (`completion_tokens`, `timing`, `stop_reason`, ...)."""

    async def init_state(self, prompt, completion, answer, task, info, example_id, **kwargs):
        return {
            "prompt": prompt,
            "completion": completion,
            "answer": answer,
            "info": info,
            "task": task,
            "responses": [],
            "turn": 0,
        }


@pytest.mark.parametrize("drive", ["sync", "async"])
def test_an_init_state_without_the_engine_keys_plays_to_a_score(drive: str) -> None:
    env = GymEnv(
        ReferenceShapedStateGuessEnv(rollout_token_budget=10_000, max_turns=2),
        count_tokens=len,
    )

    async def episode() -> tuple[Any, ...]:
        await env.areset(seed=0, options={"index": 1})
        await env.astep("1")
        return await env.astep("2")

    try:
        if drive == "sync":
            env.reset(seed=0, options={"index": 1})
            env.step("1")
            *_, truncated, info = env.step("2")
        else:
            *_, truncated, info = asyncio.run(episode())
        assert truncated and info["stop_reason"] == "max_turns"
        assert info["state"]["completion_tokens"] == 2
        assert "error" not in info["state"] and set(info["metrics"]) >= {"won", "guesses"}
    finally:
        env.close()


def test_an_env_dropped_without_close_releases_its_event_loop():
    """Gymnasium's check_env never closes the env it checks; the private loop an env
    with async hooks made was left open, its sockets reported as leaked at exit."""
    env = GymEnv(AsyncGuessEnv())
    check_env(env, skip_render_check=True)
    loop = env._loop
    assert loop is not None and not loop.is_closed()
    del env
    gc.collect()
    assert loop.is_closed()


def test_a_vector_env_dropped_without_close_releases_its_event_loop():
    vec = gym.make_vec("vfgym-test/AsyncGuess-v0", num_envs=2, mode="async")
    vec.reset(seed=0)
    loop = vec.unwrapped._loop
    assert loop is not None and not loop.is_closed()
    for env in vec.unwrapped.envs:
        env.close()  # (the sub-envs' own loops are not the vector env's)
    del vec
    gc.collect()
    assert loop.is_closed()
