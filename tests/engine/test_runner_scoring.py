"""`generate` / `evaluate` run a rubric's `score_group` hook over each example's group.

A ranking hook compares the rollouts of one example, so those rollouts are scored
together once all of them have finished: the hook first, then each rollout's
reward functions, which read what the hook wrote into the states. A rubric without
a hook keeps scoring and recording each rollout the moment it ends. Every test plays
against the project's model server on loopback.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from vfgym.envs import EnvGroup, SingleTurnEnv
from vfgym.rubrics import Rubric, RubricGroup
from vfgym.types import GenerateOutputs, Messages, State

QUESTIONS = ["alpha", "beta", "gamma"]


PER = 3


COLUMNS = {"prompts", "completions", "answers", "tasks", "infos", "example_ids"}


def half(completion: Messages) -> float:
    return 0.5


def seven(completion: Messages) -> float:
    return 7.0


def exact(completion: Messages, answer: str) -> float:
    return float(text_of(completion) == answer)


def rank(state: State) -> float:
    """The reward a ranking hook decided: the rollout's place in its group."""
    return state["rank"]


def text_of(completion: Messages) -> str:
    return completion[-1]["content"] if completion else ""


class Ranked(Rubric):
    """Ranks each group's answers by length (shortest first); errored ones are left out."""

    def __init__(self) -> None:
        super().__init__(funcs=[rank])
        self.groups: list[list[Any]] = []
        self.sizes: list[int] = []

    async def score_group(self, states: list[State], **columns: Any) -> None:
        assert set(columns) == COLUMNS
        assert all(len(column) == len(states) for column in columns.values())
        self.groups.append(list(columns["example_ids"]))
        self.sizes.append(len(states))
        completions = columns["completions"]
        ok = [i for i, state in enumerate(states) if not state.get("error")]
        for place, i in enumerate(sorted(ok, key=lambda i: len(text_of(completions[i])))):
            states[i]["rank"] = float(place)


class SyncRanked(Ranked):
    """The same ranking from a plain (not async) hook method."""

    def score_group(self, states: list[State], **columns: Any) -> None:  # type: ignore[override]
        completions = columns["completions"]
        self.groups.append(list(columns["example_ids"]))
        order = sorted(range(len(states)), key=lambda i: len(text_of(completions[i])))
        for place, i in enumerate(order):
            states[i]["rank"] = float(place)


def growing(fail: set[tuple[str, int]] = frozenset(), counts: Counter | None = None):
    """A model that answers the n-th request for a question with the question and n
    marks, so the copies of one example differ in length; the requests named in
    `fail` (question, n) raise, which the server answers with a 500 not to retry."""
    counts = Counter() if counts is None else counts

    async def policy(messages: Messages) -> str:
        text = messages[-1]["content"]
        counts[text] += 1
        n = counts[text]
        if (text, n) in fail:
            raise RuntimeError(f"no answer for {text} #{n}")
        await asyncio.sleep(0.01 * ((n * 2) % 3))  # copies finish out of order
        return text + "!" * n

    return policy


def make_env(rubric: Rubric) -> SingleTurnEnv:
    return SingleTurnEnv(dataset=[{"question": q, "answer": q} for q in QUESTIONS], rubric=rubric)


def check_ranked(out: GenerateOutputs, per: int = PER) -> None:
    """Each group's rewards are its answers' places by length; errored rollouts NaN."""
    for start in range(0, len(out.reward), per):
        block = range(start, start + per)
        ok = [i for i in block if not out.state[i].get("error")]
        order = sorted(ok, key=lambda i: len(text_of(out.completion[i])))
        assert [out.reward[i] for i in order] == [float(p) for p in range(len(ok))]
        assert [out.metrics["rank"][i] for i in order] == [float(p) for p in range(len(ok))]
        assert all(out.metrics["reward_errors"][i] == 0.0 for i in ok)
        assert all(math.isnan(out.reward[i]) for i in block if i not in ok)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def latest(path: Path) -> dict[int, dict[str, Any]]:
    return {record["index"]: record for record in lines(path)}


async def test_generate_scores_each_example_group_with_the_hook(model_server, tmp_path) -> None:
    rubric = Ranked()
    env = make_env(rubric)
    server = await model_server(growing())
    records: list[dict[str, Any]] = []
    out = await env.generate(
        env.get_eval_inputs(-1, PER),
        server.client(),
        "m",
        rollouts_per_example=PER,
        results_path=tmp_path,
        on_result=records.append,
    )
    check_ranked(out)
    assert sorted(rubric.groups) == [[i] * PER for i in range(len(QUESTIONS))]
    assert out.metadata["num_errored"] == 0
    # What on_result saw and results.jsonl holds are the ranked rewards.
    assert sorted((r["index"], r["reward"]) for r in records) == list(enumerate(out.reward))
    assert sorted((r["index"], r["reward"]) for r in lines(tmp_path)) == list(enumerate(out.reward))
    # A group's records arrive together: each example's copies are adjacent.
    ids = [r["example_id"] for r in records]
    assert all(len(set(ids[k : k + PER])) == 1 for k in range(0, len(ids), PER))


async def test_evaluate_runs_the_hooks_of_a_rubric_group_and_a_plain_method_hook(
    model_server,
) -> None:
    ranked = SyncRanked()
    env = make_env(RubricGroup([Rubric(funcs=[half]), ranked]))
    server = await model_server(growing())
    out = await env.evaluate(server.client(), "m", rollouts_per_example=PER)
    assert sorted(ranked.groups) == [[i] * PER for i in range(len(QUESTIONS))]
    for start in range(0, len(out.reward), PER):
        block = list(range(start, start + PER))
        order = sorted(block, key=lambda i: len(text_of(out.completion[i])))
        assert [out.reward[i] for i in order] == [0.5, 1.5, 2.5]


async def test_one_rollout_per_example_is_a_group_of_one(
    model_server,
) -> None:
    rubric = Ranked()
    server = await model_server(growing())
    out = await make_env(rubric).evaluate(server.client(), "m")
    assert out.reward == [0.0, 0.0, 0.0]
    assert sorted(rubric.groups) == [[0], [1], [2]]
    assert out.metadata["num_errored"] == 0


async def test_an_env_group_ranks_only_its_ranked_members_task(model_server) -> None:
    ranked_rubric = Ranked()
    ranked = SingleTurnEnv(dataset=[{"question": "alpha"}], rubric=ranked_rubric)
    plain = SingleTurnEnv(dataset=[{"question": "beta"}], rubric=Rubric(funcs=[seven]))
    group = EnvGroup([ranked, plain], env_names=["ranked", "plain"])
    server = await model_server(growing())
    out = await group.evaluate(server.client(), "m", rollouts_per_example=2)
    assert out.task == ["ranked", "ranked", "plain", "plain"]
    order = sorted([0, 1], key=lambda i: len(text_of(out.completion[i])))
    assert [out.reward[i] for i in order] == [0.0, 1.0]
    assert out.reward[2:] == [7.0, 7.0]
    assert ranked_rubric.groups == [[0, 0]]


async def test_an_errored_rollout_in_a_group_is_nan_and_the_rest_are_ranked(
    model_server, tmp_path
) -> None:
    rubric = Ranked()
    server = await model_server(growing(fail={("beta", 2)}))
    records: list[dict[str, Any]] = []
    out = await make_env(rubric).evaluate(
        server.client(),
        "m",
        rollouts_per_example=PER,
        results_path=tmp_path,
        on_result=records.append,
    )
    failed = [i for i, s in enumerate(out.state) if s.get("error")]
    assert len(failed) == 1 and out.example_id[failed[0]] == 1
    assert out.state[failed[0]]["error"]["type"] == "ModelCallError"
    check_ranked(out)
    assert rubric.sizes == [PER] * len(QUESTIONS)  # the hook saw the errored one too
    assert out.metadata["num_errored"] == 1
    assert len(records) == len(QUESTIONS) * PER
    written = latest(tmp_path)
    assert written[failed[0]]["reward"] is None and written[failed[0]]["error"]


async def test_a_hook_that_raises_errors_its_group_only(model_server) -> None:
    class Broken(Ranked):
        async def score_group(self, states: list[State], **columns: Any) -> None:
            if columns["example_ids"][0] == 1:
                raise ValueError("cannot rank beta")
            await super().score_group(states, **columns)

    server = await model_server(growing())
    out = await make_env(Broken()).evaluate(server.client(), "m", rollouts_per_example=2)
    assert out.metadata["num_errored"] == 2
    for i in (2, 3):
        error = out.state[i]["error"]
        assert error["type"] == "ValueError"
        assert "score_group" in error["message"] and "cannot rank beta" in error["message"]
        assert math.isnan(out.reward[i])
    check_ranked(out, 2)


async def test_a_group_is_written_only_once_all_its_rollouts_finished_and_resume_plays_it_whole(
    model_server, tmp_path
) -> None:
    release = asyncio.Event()
    counts: Counter = Counter()
    base = growing(counts=counts)

    async def gamma_hangs(messages: Messages) -> str:
        if messages[-1]["content"] == "gamma" and counts["gamma"] == PER - 1:
            counts["gamma"] += 1
            await release.wait()  # the last copy of gamma never answers in this session
            return "gamma"
        return await base(messages)

    server = await model_server(gamma_hangs)
    rubric = Ranked()
    env = make_env(rubric)
    records: list[dict[str, Any]] = []
    task = asyncio.ensure_future(
        env.evaluate(
            server.client(),
            "m",
            rollouts_per_example=PER,
            results_path=tmp_path,
            on_result=records.append,
        )
    )
    for _ in range(500):
        if len(records) >= 2 * PER and counts["gamma"] == PER:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # gamma's other copies have long finished
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    release.set()
    assert sorted(r["example_id"] for r in records) == [0] * PER + [1] * PER
    assert sorted(r["example_id"] for r in lines(tmp_path)) == [0] * PER + [1] * PER

    again = await model_server(growing())
    resumed: list[dict[str, Any]] = []
    out = await env.evaluate(
        again.client(),
        "m",
        rollouts_per_example=PER,
        results_path=tmp_path,
        resume=True,
        on_result=resumed.append,
    )
    assert [r["messages"][-1]["content"] for r in again.requests] == ["gamma"] * PER
    assert sorted(r["example_id"] for r in resumed) == [2] * PER
    check_ranked(out)
    assert out.metadata["status"] == "complete"
    assert {i: r["reward"] for i, r in latest(tmp_path).items()} == dict(enumerate(out.reward))


async def test_resume_plays_again_the_whole_group_of_an_errored_rollout(
    model_server, tmp_path
) -> None:
    rubric = Ranked()
    env = make_env(rubric)
    first = await model_server(growing(fail={("beta", 2)}))
    out = await env.evaluate(first.client(), "m", rollouts_per_example=PER, results_path=tmp_path)
    assert out.metadata["num_errored"] == 1

    rubric.groups.clear()
    again = await model_server(growing())
    resumed: list[dict[str, Any]] = []
    out = await env.evaluate(
        again.client(),
        "m",
        rollouts_per_example=PER,
        results_path=tmp_path,
        resume=True,
        on_result=resumed.append,
    )
    # beta's group is ranked again as one: its restored copies are not mixed with a new one.
    assert [r["messages"][-1]["content"] for r in again.requests] == ["beta"] * PER
    assert rubric.groups == [[1] * PER]
    assert sorted(r["index"] for r in resumed) == [3, 4, 5]
    check_ranked(out)
    assert out.metadata["num_errored"] == 0
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["resumed_rollouts"] == 2 * PER
    assert {i: r["reward"] for i, r in latest(tmp_path).items()} == dict(enumerate(out.reward))


async def test_resume_plays_again_a_group_with_a_line_missing(model_server, tmp_path) -> None:
    """A kill can cut the last line of a group; that group is played again in full."""
    env = make_env(Ranked())
    first = await model_server(growing())
    await env.evaluate(first.client(), "m", rollouts_per_example=PER, results_path=tmp_path)
    kept = [line for line in lines(tmp_path) if line["index"] != 7]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))

    again = await model_server(growing())
    out = await env.evaluate(
        again.client(), "m", rollouts_per_example=PER, results_path=tmp_path, resume=True
    )
    assert [r["messages"][-1]["content"] for r in again.requests] == ["gamma"] * PER
    check_ranked(out)


async def test_without_a_hook_each_rollout_is_recorded_as_it_ends(model_server) -> None:
    """The first copy's result is delivered while its sibling is still waiting for it."""
    seen = asyncio.Event()
    counts: Counter = Counter()

    async def policy(messages: Messages) -> str:
        counts["n"] += 1
        if counts["n"] == 2:
            await asyncio.wait_for(seen.wait(), 5)
        return "done"

    env = SingleTurnEnv(
        dataset=[{"question": "q", "answer": "done"}],
        rubric=Rubric(funcs=[exact]),
    )
    server = await model_server(policy)
    out = await env.evaluate(
        server.client(), "m", rollouts_per_example=2, on_result=lambda record: seen.set()
    )
    assert out.reward == [1.0, 1.0]
    assert out.metadata["num_errored"] == 0


async def test_the_hook_is_not_run_when_scoring_is_off(model_server) -> None:
    rubric = Ranked()
    server = await model_server(growing())
    out = await make_env(rubric).evaluate(
        server.client(), "m", rollouts_per_example=2, score_rollouts=False
    )
    assert rubric.groups == []
    assert all(math.isnan(r) for r in out.reward)


def test_which_rubrics_have_a_group_hook() -> None:
    plain = SingleTurnEnv(dataset=[{"question": "q"}])
    ranked = SingleTurnEnv(dataset=[{"question": "q"}], rubric=Ranked())
    assert Rubric().has_group_hook() is False
    assert Ranked().has_group_hook() is True
    assert SyncRanked().has_group_hook() is True
    assert RubricGroup([Rubric(), Rubric()]).has_group_hook() is False
    assert RubricGroup([Rubric(), Ranked()]).has_group_hook() is True
    assert EnvGroup([plain, plain], env_names=["a", "b"]).rubric.has_group_hook() is False
    assert EnvGroup([plain, ranked], env_names=["a", "b"]).rubric.has_group_hook() is True

    class OwnHook(RubricGroup):
        async def score_group(self, states: list[State], **columns: Any) -> None:
            return None

    assert OwnHook([Rubric()]).has_group_hook() is True


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def length(completion: Messages) -> float:
    return float(len(completion[-1]["content"]))


def echo(messages: Messages) -> str:
    return messages[-1]["content"]


def same(a: list[float], b: list[float]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


async def test_a_metric_a_rollout_lacks_is_nan_in_generate_and_in_score_rollouts(
    model_server: Any,
) -> None:
    """An EnvGroup's tasks have their own rubrics: a rollout of one task has no value
    for another task's metric. `generate` gave NaN there (no value, left out of the
    summary's statistics) and `score_rollouts` 0.0 (a score the rollout never got,
    pulling the mean down)."""
    server = await model_server(echo)
    first = SingleTurnEnv(dataset=[{"question": "a", "answer": "a"}], rubric=Rubric([matches]))
    second = SingleTurnEnv(dataset=[{"question": "bb", "answer": "x"}], rubric=Rubric([length]))
    group = EnvGroup([first, second], env_names=["first", "second"])
    out = await group.evaluate(server.client(), "m")
    assert out.task == ["first", "second"]
    assert out.metrics["matches"][0] == 1.0 and math.isnan(out.metrics["matches"][1])
    assert math.isnan(out.metrics["length"][0]) and out.metrics["length"][1] == 2.0

    again = await group.rubric.score_rollouts(
        out.prompt, out.completion, out.answer, out.state, out.task, out.info
    )
    assert set(again.metrics) == set(out.metrics)
    for name, column in out.metrics.items():
        assert same(again.metrics[name], column), (name, again.metrics[name], column)
