"""EnvGroup: nested groups, tasks and env names its members claim, processing with each
member's tools, settings the group refuses to hold of its own (a token budget,
max_turns), raw rows formatted by their members, its rubric and close, and sync members'
blocking hooks under an event loop (the Gym adapter's `areset`/`astep`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from endless_env import Again
from gym_test_envs import CalculatorEnv, GuessEnv
from scripted_models import say_ok

import vfgym as vf
import vfgym.gym as vgym
from vfgym.envs import EnvGroup, MultiTurnEnv, SingleTurnEnv, ToolEnv
from vfgym.inference.server import ByteTokenizer
from vfgym.rubrics import Rubric
from vfgym.types import Messages, State


def exact(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def single(question: str, answer: str) -> SingleTurnEnv:
    return SingleTurnEnv(
        dataset=[{"question": question, "answer": answer}], rubric=Rubric(funcs=[exact])
    )


async def test_a_member_that_is_an_env_group_plays_its_own_tasks(model_server) -> None:
    server = await model_server(lambda messages: "4")
    inner = EnvGroup(
        [single("a", "4"), single("b", "5")],
        env_names=["a", "b"],
        sampling_args={"temperature": 0.3},
    )
    outer = EnvGroup([inner, single("c", "4")], env_names=["inner", "c"])
    assert [row["task"] for row in outer.get_eval_dataset()] == ["a", "b", "c"]
    out = await outer.evaluate(server.client(), "m", rollouts_per_example=2)
    assert [state.get("error") for state in out.state] == [None] * 6
    assert out.task == ["a", "a", "b", "b", "c", "c"]
    assert out.reward == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    temperatures = [request.get("temperature") for request in server.requests]
    assert sorted(temperatures, key=str) == [0.3] * 4 + [None] * 2  # the inner group's


def test_gym_steps_a_row_of_a_nested_group_through_its_member() -> None:
    inner = EnvGroup([SlowSetup(), Quick()], env_names=["slow", "quick"])
    env = vgym.GymEnv(EnvGroup([inner, Quick()], env_names=["inner", "top"]))
    try:
        _, info = env.reset(options={"index": 1})
        assert info["state"]["task"] == "quick"
        _, reward, terminated, _, info = env.step("done")
        assert terminated and reward == 1.0 and info["metrics"]["said_done"] == 1.0
    finally:
        env.close()


def test_a_task_two_members_would_claim_is_refused() -> None:
    inner = EnvGroup([single("a", "4"), single("c", "4")], env_names=["a", "c"])
    with pytest.raises(ValueError, match=r"task 'c' is claimed by both 'inner' and 'c'"):
        EnvGroup([inner, single("c", "4")], env_names=["inner", "c"])


class SlowSetup(MultiTurnEnv):
    """A sync setup that blocks (a sandbox acquired, a request made)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dataset=[{"question": "go", "answer": ""}], max_turns=2, **kwargs)

    def setup_state(self, state: State, **kwargs: Any) -> State:
        time.sleep(0.3)
        return state

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return False

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        return [{"role": "user", "content": "again"}], state

    def cleanup_state(self, state: State, **kwargs: Any) -> None:
        time.sleep(0.3)


def said_done(completion: Messages) -> float:
    return 1.0 if completion[-1]["content"] == "done" else 0.0


class Quick(MultiTurnEnv):
    """Ends when the model says "done"."""

    def __init__(self) -> None:
        rubric = Rubric(funcs=[said_done])
        super().__init__(dataset=[{"question": "say done"}], max_turns=3, rubric=rubric)

    def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        return bool(state["completion"]) and state["completion"][-1]["content"] == "done"

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        return [{"role": "user", "content": "say done"}], state


async def ticks_while(work: Any) -> int:
    """How often a 10 ms ticker ran on the loop while `work` was awaited."""
    count = 0
    done = False

    async def tick() -> None:
        nonlocal count
        while not done:
            await asyncio.sleep(0.01)
            count += 1

    ticker = asyncio.ensure_future(tick())
    try:
        await work
    finally:
        done = True
        await ticker
    return count


@pytest.mark.parametrize("grouped", [False, True], ids=["member", "group"])
async def test_areset_runs_a_sync_members_blocking_hooks_off_the_loop(grouped: bool) -> None:
    member = SlowSetup()
    env = vgym.GymEnv(EnvGroup([member, SlowSetup()], ["a", "b"]) if grouped else member)
    try:
        assert await ticks_while(env.areset(options={"index": 0})) >= 10
        await env.astep("x")
        assert await ticks_while(env.astep("y")) >= 10  # the end: cleanup runs
    finally:
        await env.aclose()


@pytest.mark.parametrize(
    ("names", "error", "says"),
    [
        (["", "x"], ValueError, r"env_names\[0\] is an empty name"),
        ([0, "x"], TypeError, r"env_names\[0\] is 0 \(int\), not a str"),
        (["x", None], TypeError, r"env_names\[1\] is None \(NoneType\), not a str"),
    ],
)
def test_env_names_that_no_row_could_carry_are_refused(names, error, says) -> None:
    with pytest.raises(error, match=says):
        EnvGroup([single("a", "4"), single("b", "4")], env_names=names)


async def test_odd_but_real_env_names_play_and_resume(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: "4")
    names = ["a/b c", 'ü\n"x']
    group = EnvGroup([single("a", "4"), single("b", "5")], env_names=names)
    out = await group.evaluate(server.client(), "m", rollouts_per_example=2, results_path=tmp_path)
    assert out.task == [names[0]] * 2 + [names[1]] * 2 and out.reward == [1.0, 1.0, 0.0, 0.0]
    again = await group.evaluate(
        server.client(), "m", rollouts_per_example=2, results_path=tmp_path, resume=True
    )
    assert again.task == out.task and again.reward == out.reward
    assert len(server.requests) == 4  # the resumed run asked the model nothing


async def test_a_ready_prompt_row_whose_task_names_no_member_is_refused_up_front(
    model_server,
) -> None:
    """Rows without a prompt were refused before anything ran; rows with one failed
    each rollout on its own with UnknownTaskError."""
    server = await model_server(say_ok)
    group = EnvGroup([SingleTurnEnv(dataset=[{"question": "q"}])], env_names=["one"])
    inputs = {"prompt": [[{"role": "user", "content": "hi"}]], "task": ["two"]}
    with pytest.raises(ValueError, match=r"input row 0: no environment for task 'two'"):
        await group.generate(inputs, server.client(), "m")
    assert server.requests == []


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


def test_env_group_refuses_a_token_budget_of_its_own() -> None:
    """The members' rollouts (and turn-by-turn API) enforce their own budgets: one
    given to the group was silently never enforced."""
    member = Again(dataset=[{"question": "q"}], max_turns=10)
    with pytest.raises(TypeError, match=r"EnvGroup takes no rollout_token_budget.*member"):
        EnvGroup([member], env_names=["a"], rollout_token_budget=4)


def calc_and_guess() -> tuple[EnvGroup, CalculatorEnv, GuessEnv]:
    calc, guess = CalculatorEnv(num_examples=2), GuessEnv(num_examples=2, max_turns=2)
    return EnvGroup([calc, guess], env_names=["calc", "guess"]), calc, guess


def echo_system(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"] if messages[0]["role"] == "system" else "(no system prompt)"


class Ranked(Rubric):
    """Ranks the batch's answers by length in `score_group`, then rewards the rank."""

    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        answers = kwargs["completions"]
        order = sorted(range(len(states)), key=lambda i: len(answers[i][-1]["content"]))
        for rank, i in enumerate(order):
            states[i]["rank"] = float(rank)


def rank(state: State) -> float:
    return state["rank"]


class Closing(GuessEnv):
    """A member holding something to release (as a SandboxEnv holds containers)."""

    def __init__(self, closed: list[str], name: str, fail: bool = False) -> None:
        super().__init__(num_examples=1)
        self.closed, self.name, self.fail = closed, name, fail

    async def aclose(self) -> None:
        self.closed.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} could not release")


def test_env_group_step_reward_only_when_every_member_has_one():
    with_both = EnvGroup([GuessEnv(num_examples=1), GuessEnv(num_examples=1)], ["a", "b"])
    env = vgym.GymEnv(with_both, per_step_reward=True)
    try:
        env.reset(options={"index": 1})
        _, reward, *_ = env.step("5")  # the target is 1: a miss
        assert reward == pytest.approx(-0.1)
    finally:
        env.close()
    mixed, *_ = calc_and_guess()
    with pytest.raises(ValueError, match="step_reward"):
        vgym.GymEnv(mixed, per_step_reward=True)


def test_env_group_refuses_a_max_turns_of_its_own():
    with pytest.raises(TypeError, match="each member environment keeps its own"):
        EnvGroup([GuessEnv(num_examples=1)], ["g"], max_turns=3)


async def test_env_group_generate_formats_raw_rows_with_their_members_prompts(model_server):
    tools = ToolEnv(tools=[add], dataset=[{"question": "q"}], system_prompt="Use tools.")
    plain = SingleTurnEnv(dataset=[{"question": "q"}], system_prompt="Be brief.")
    group = EnvGroup([tools, plain], env_names=["tools", "plain"])
    server = await model_server(echo_system)
    rows = [{"question": "hi", "task": "plain"}, {"question": "yo", "task": "tools"}]
    out = await group.generate(rows, server.client(), "m")
    assert [c[-1]["content"] for c in out.completion] == ["Be brief.", "Use tools."]
    assert out.task == ["plain", "tools"] and out.example_id == [0, 1]
    assert "tools" not in server.requests[0] and "tools" in server.requests[1]


@pytest.mark.parametrize("row", [{"question": "hi"}, {"question": "hi", "task": "chess"}])
async def test_env_group_generate_refuses_a_raw_row_without_a_member(model_server, row):
    group = EnvGroup([SingleTurnEnv(dataset=[{"question": "q"}])], env_names=["plain"])
    server = await model_server(echo_system)
    with pytest.raises(ValueError, match=r"input row 0 has no .prompt.*tasks are \[.plain.\]"):
        await group.generate([row], server.client(), "m")
    assert server.requests == []


async def test_env_group_rubric_runs_each_members_score_group():
    ranked = SingleTurnEnv(dataset=[{"question": "q"}], rubric=Ranked(funcs=[rank]))
    group = EnvGroup([ranked, SingleTurnEnv(dataset=[{"question": "q"}])], ["ranked", "plain"])
    texts, tasks = ["xxx", "y", "zz", "w"], ["ranked", "plain", "ranked", "plain"]
    states = [
        {"prompt": [], "completion": [{"role": "assistant", "content": t}], "task": task}
        for t, task in zip(texts, tasks, strict=True)
    ]
    scores = await group.rubric.score_rollouts(
        [[]] * 4, [s["completion"] for s in states], [""] * 4, states, tasks, [{}] * 4
    )
    assert scores.reward[0] == 1.0 and scores.reward[2] == 0.0  # ranked within its task
    assert not any(s.get("reward_errors") for s in states)


async def test_env_group_aclose_releases_every_member_even_when_one_fails():
    closed: list[str] = []
    group = EnvGroup(
        [Closing(closed, "a", fail=True), GuessEnv(num_examples=1), Closing(closed, "b")],
        ["a", "plain", "b"],
    )
    with pytest.raises(RuntimeError, match="a could not release"):
        await group.aclose()
    assert closed == ["a", "b"]
    # A Gym env that owns the group releases it on close.
    closed.clear()
    owner = vgym.GymEnv(EnvGroup([Closing(closed, "c")], ["c"]), owns_environment=True)
    owner.reset(seed=0)
    owner.close()
    assert closed == ["c"]


def test_member_hooks_reached_through_the_group_are_the_members():
    """The group's hook API (what `vfgym play` and the adapter call) is the member's."""
    group, _, guess = calc_and_guess()
    assert isinstance(group, MultiTurnEnv)
    state = {"task": "guess", "game_state": {"guesses": [1], "won": False}}
    assert group.render_state(state) == guess.render_state(state)
    assert group.render_state({"task": "calc"}) == ""


ROWS = [
    {"question": "What is 2+2?", "answer": "4"},
    {"question": "What is 3+3?", "answer": "6"},
    {"question": "What is 4+4?", "answer": "8"},
]


def answer_sum(messages: Messages) -> str:
    """A model that can add: reads 'What is a+b?' from the first user turn."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    if question.startswith("What is") and "+" in question:
        a, b = question.removeprefix("What is ").rstrip("?").split("+")
        return str(int(a) + int(b))
    return "?"


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


def turns_taken(state: State) -> float:
    return float(state["turn"])


async def test_env_group_routes_rollouts_and_scoring_by_task(model_server) -> None:
    from vfgym.envs import EnvGroup

    server = await model_server(answer_sum)
    math_env = SingleTurnEnv(
        dataset=ROWS[:2], rubric=Rubric(funcs=[exact]), sampling_args={"temperature": 0.1}
    )
    count_env = CountdownSync(
        dataset=[
            {"prompt": [{"role": "user", "content": "count"}], "info": {"n": n}} for n in (1, 2)
        ],
        rubric=Rubric(funcs=[turns_taken]),
        sampling_args={"temperature": 0.9},
    )
    group = EnvGroup([math_env, count_env], env_names=["math", "count"])
    rows = group.get_eval_dataset()
    assert [r["task"] for r in rows] == ["math", "math", "count", "count"]
    assert [r["example_id"] for r in rows] == [0, 1, 2, 3]

    out = await group.evaluate(server.client(), "m", rollouts_per_example=2)
    assert out.task == ["math"] * 4 + ["count"] * 4
    assert out.example_id == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [s["turn"] for s in out.state] == [1, 1, 1, 1, 1, 1, 2, 2]
    assert out.reward == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0]
    exact_column = out.metrics["exact"]
    assert exact_column[:4] == [1.0] * 4
    assert out.metrics["turns_taken"][4:] == [1.0, 1.0, 2.0, 2.0]
    assert all(v != v for v in exact_column[4:])  # NaN: not a metric of that task
    temperatures = {r["messages"][-1]["content"]: r["temperature"] for r in server.requests}
    assert temperatures["What is 2+2?"] == 0.1
    assert temperatures["count"] == 0.9


def test_env_group_refuses_an_unknown_task_and_bad_names() -> None:
    from vfgym.envs import EnvGroup

    group = EnvGroup([SingleTurnEnv(dataset=ROWS)], env_names=["math"])
    with pytest.raises(KeyError, match=r"no environment for task 'chess'; tasks are \['math'\]"):
        group.get_env_for_task("chess")
    with pytest.raises(ValueError, match="unique"):
        EnvGroup([SingleTurnEnv(dataset=ROWS)] * 2, env_names=["a", "a"])
    with pytest.raises(ValueError, match="2 environments but 1 env_names"):
        EnvGroup([SingleTurnEnv(dataset=ROWS)] * 2, env_names=["a"])
    with pytest.raises(ValueError, match="at least one"):
        EnvGroup([])


def test_env_group_refuses_chat_and_completion_members_together() -> None:
    from vfgym.envs import EnvGroup

    chat, text = SingleTurnEnv(dataset=ROWS), SingleTurnEnv(dataset=ROWS, message_type="completion")
    with pytest.raises(ValueError) as caught:
        EnvGroup([chat, text, chat], env_names=["a", "b", "c"])
    message = str(caught.value)
    assert "['a', 'c'] use 'chat' and ['b'] use 'completion'" in message
    assert "separately" in message
