"""Results on disk: lines streamed as rollouts finish, metadata, refusing overwrites, resume."""

from __future__ import annotations

import asyncio
import codecs
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import no_configured_model  # noqa: F401 (the fixture is autouse)
from scripted_models import say_ok

from vfgym.envs import SingleTurnEnv
from vfgym.errors import ResultsBusy
from vfgym.inference.client import RetryPolicy
from vfgym.results.jsonl import (
    METADATA_FILE,
    RESULTS_FILE,
    ResultsWriter,
    load_finished,
    make_record,
    read_results,
)
from vfgym.results.report import write_report
from vfgym.rubrics import Rubric
from vfgym.types import Messages

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox"]


FAST_RETRY = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.002)


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def make_env(**kwargs: Any) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper()} for w in WORDS]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]), retry=FAST_RETRY, **kwargs)


class HeldPolicy:
    """Answers at once, except for the words in `held`, which wait for `release`."""

    def __init__(self, held: set[str]) -> None:
        self.held = held
        self.release = asyncio.Event()

    async def __call__(self, messages: Messages) -> str:
        word = messages[-1]["content"]
        if word in self.held:
            await self.release.wait()
        return word.upper()


def lines(directory: Path) -> list[dict[str, Any]]:
    path = directory / RESULTS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def wait_for_lines(directory: Path, count: int) -> list[dict[str, Any]]:
    for _ in range(1000):
        found = lines(directory)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.005)
    raise AssertionError(f"expected {count} result lines, found {len(lines(directory))}")


async def test_each_rollout_is_on_disk_as_soon_as_it_finishes(model_server, tmp_path) -> None:
    policy = HeldPolicy(held={"ant", "bee"})
    server = await model_server(policy)
    run = asyncio.create_task(make_env().evaluate(server.client(), "m", results_path=tmp_path))
    written = await wait_for_lines(tmp_path, 4)
    assert not run.done()  # two rollouts are still waiting for the model
    assert sorted(r["answer"] for r in written) == ["CAT", "DOG", "EEL", "FOX"]
    assert json.loads((tmp_path / METADATA_FILE).read_text())["status"] == "running"
    policy.release.set()
    out = await run
    final = lines(tmp_path)
    assert sorted(r["index"] for r in final) == list(range(6))
    assert out.reward == [1.0] * 6


async def test_result_lines_and_metadata(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env(
        env_id="spelling", env_args={"level": 2}, sampling_args={"extra_body": {"top_k": 5}}
    )
    out = await env.evaluate(
        server.client(),
        "tiny-model",
        sampling_args={"temperature": 0.3, "max_tokens": 32},
        num_examples=2,
        rollouts_per_example=2,
        results_path=tmp_path,
        state_columns=["responses_start_idx", "answer"],
    )
    meta, records = read_results(tmp_path)
    assert meta["model"] == "tiny-model"
    assert meta["base_url"] == server.base_url + "/"
    assert meta["env_id"] == "spelling"
    assert meta["env_args"] == {"level": 2}
    assert meta["sampling_args"] == {
        "temperature": 0.3,
        "max_tokens": 32,
        "extra_body": {"top_k": 5},
    }
    assert meta["num_inputs"] == 4 and meta["rollouts_per_example"] == 2
    assert meta["status"] == "complete"
    assert meta["num_rollouts"] == 4 and meta["num_errored"] == 0
    assert meta["avg_reward"] == 1.0
    assert {"python", "vfgym", "openai", "pydantic"} <= set(meta["versions"])
    assert meta["started_at"] <= meta["finished_at"]
    assert meta["duration_s"] >= 0
    assert out.metadata["model"] == "tiny-model"

    by_index = sorted(records, key=lambda r: r["index"])
    first = by_index[0]
    assert first["example_id"] == 0 and by_index[1]["example_id"] == 0
    assert first["prompt"] == [{"role": "user", "content": "ant"}]
    assert first["completion"] == [{"role": "assistant", "content": "ANT"}]
    assert first["answer"] == "ANT"
    assert first["reward"] == 1.0
    assert first["metrics"]["matches"] == 1.0
    assert first["stop_reason"] == "completed"
    assert first["is_truncated"] is False
    assert first["turn"] == 1
    assert first["completion_tokens"] == 3
    assert set(first["timing"]) == {"generation_ms", "scoring_ms", "total_ms"}
    assert first["state"] == {"answer": "ANT"}  # asked-for state keys that exist


async def test_an_existing_results_file_is_not_overwritten(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env()
    await env.evaluate(server.client(), "m", num_examples=2, results_path=tmp_path)
    before = (tmp_path / RESULTS_FILE).read_text()
    requests = len(server.requests)
    with pytest.raises(FileExistsError, match="pass resume=True"):
        await env.evaluate(server.client(), "m", num_examples=2, results_path=tmp_path)
    assert (tmp_path / RESULTS_FILE).read_text() == before
    assert len(server.requests) == requests


async def test_resume_skips_finished_rollouts_and_redoes_errored_ones(
    model_server, tmp_path
) -> None:
    policy = HeldPolicy(held={"eel", "fox"})

    async def first_policy(messages: Messages) -> str:
        if messages[-1]["content"] == "dog":
            raise RuntimeError("flaky GPU")
        return await policy(messages)

    first_server = await model_server(first_policy)
    env = make_env()
    run = asyncio.create_task(env.evaluate(first_server.client(), "m", results_path=tmp_path))
    await wait_for_lines(tmp_path, 4)  # ant, bee, cat done; dog errored
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    meta, records = read_results(tmp_path)
    assert meta["status"] == "interrupted"
    errored = [r for r in records if r.get("error")]
    assert [r["answer"] for r in errored] == ["DOG"]

    second_server = await model_server(lambda messages: messages[-1]["content"].upper())
    out = await env.evaluate(second_server.client(), "m", results_path=tmp_path, resume=True)
    redone = sorted(r["messages"][-1]["content"] for r in second_server.requests)
    assert redone == ["dog", "eel", "fox"]
    assert out.reward == [1.0] * 6
    assert [c[-1]["content"] for c in out.completion] == [w.upper() for w in WORDS]
    assert [s.get("error") for s in out.state] == [None] * 6
    assert out.metadata["num_errored"] == 0
    meta, records = read_results(tmp_path)
    assert meta["status"] == "complete"
    assert meta["resumed_rollouts"] == 3
    assert meta["num_errored"] == 0

    # Resuming a finished run asks the model nothing more.
    third_server = await model_server(lambda messages: "unused")
    again = await env.evaluate(third_server.client(), "m", results_path=tmp_path, resume=True)
    assert third_server.requests == []
    assert again.reward == out.reward
    assert again.completion == out.completion


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"model": "other-model"}, "model"),
        ({"num_examples": 3}, "num_inputs"),
        ({"num_examples": 3, "rollouts_per_example": 2}, "rollouts_per_example"),
        ({"sampling_args": {"temperature": 1.5}}, "sampling_args"),
    ],
)
async def test_resume_of_a_different_run_is_refused(
    model_server, tmp_path, change: dict[str, Any], key: str
) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env(env_id="spelling")
    await env.evaluate(server.client(), "m", results_path=tmp_path)
    count = len(server.requests)
    args: dict[str, Any] = {"model": "m", **change}
    model = args.pop("model")
    with pytest.raises(ValueError, match=f"cannot resume .* it was run with {key}="):
        await env.evaluate(server.client(), model, results_path=tmp_path, resume=True, **args)
    assert len(server.requests) == count


async def test_resume_with_other_env_args_is_refused(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    await make_env(env_args={"level": 1}).evaluate(server.client(), "m", results_path=tmp_path)
    with pytest.raises(ValueError, match="env_args"):
        await make_env(env_args={"level": 2}).evaluate(
            server.client(), "m", results_path=tmp_path, resume=True
        )


async def test_resume_with_other_prompts_is_refused(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    await make_env().evaluate(server.client(), "m", results_path=tmp_path)
    reversed_rows = [{"question": w, "answer": w.upper()} for w in reversed(WORDS)]
    other = SingleTurnEnv(dataset=reversed_rows, rubric=Rubric(funcs=[matches]))
    with pytest.raises(ValueError, match="it was run with inputs_digest="):
        await other.evaluate(server.client(), "m", results_path=tmp_path, resume=True)
    assert len(server.requests) == 6


async def test_resume_compares_arguments_as_they_read_back_from_disk(
    model_server, tmp_path
) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env(env_args={"sizes": (3, 4)}, sampling_args={"stop": ("\n",)})
    await env.evaluate(server.client(), "m", num_examples=2, results_path=tmp_path)
    out = await env.evaluate(
        server.client(), "m", num_examples=2, results_path=tmp_path, resume=True
    )
    assert len(server.requests) == 2
    assert out.reward == [1.0, 1.0]


async def test_resume_into_an_empty_directory_starts_fresh(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    out = await make_env().evaluate(
        server.client(), "m", results_path=tmp_path / "new", resume=True
    )
    assert len(server.requests) == 6
    assert len(lines(tmp_path / "new")) == 6
    assert not any(math.isnan(r) for r in out.reward)


def test_a_damaged_results_file_is_refused(tmp_path) -> None:

    (tmp_path / RESULTS_FILE).write_text('{"index": 0, "reward": 1.0}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"results.jsonl:2 is not a vfgym result line"):
        load_finished(tmp_path)
    (tmp_path / RESULTS_FILE).write_text('{"index": 0, "reward": 1.0}\n{"index": 1, "rew')
    assert list(load_finished(tmp_path)) == [0]  # a line cut off by a kill is skipped


async def test_resume_after_a_line_cut_off_by_a_kill(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env()
    await env.evaluate(server.client(), "m", num_examples=3, results_path=tmp_path)
    path = tmp_path / RESULTS_FILE
    kept = path.read_text().splitlines()
    path.write_text("\n".join(kept[:2]) + "\n" + kept[2][:25])  # killed mid-write
    server.clear_requests()
    out = await env.evaluate(
        server.client(), "m", num_examples=3, results_path=tmp_path, resume=True
    )
    assert len(server.requests) == 1  # only the rollout whose line was cut off
    _, records = read_results(tmp_path)
    assert sorted(r["index"] for r in records) == [0, 1, 2]
    assert out.reward == [1.0, 1.0, 1.0]


async def test_a_byte_order_mark_is_not_part_of_the_first_record(model_server, tmp_path) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "a"}, {"question": "b"}])
    directory = tmp_path / "run"
    await env.evaluate(server.client(), "m", results_path=directory)
    _, before = read_results(directory)
    path = directory / RESULTS_FILE
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    _, after = read_results(directory)
    assert len(before) == 2
    assert after == before
    page = write_report(directory).read_text(encoding="utf-8")
    assert 'id="damaged"' not in page


SECRET = "sk-live-0123456789abcdef"


def make_word_env(words: list[str], **kwargs: Any) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper()} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]), retry=FAST_RETRY, **kwargs)


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """Each line parsed as strict JSON, as jq or a browser would: no NaN, no Infinity."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{path} holds {name}, which is not JSON")

    text = path.read_bytes().decode("utf-8")  # strict: the file must be valid UTF-8
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines() if line]


async def test_a_lone_surrogate_in_model_output_does_not_stop_the_run(
    model_server, tmp_path
) -> None:
    """A model's reply can decode to a lone surrogate (`"\\ud800"` in the server's JSON);
    UTF-8 cannot encode it, and writing that line must not end the batch."""
    server = await model_server(lambda messages: "broken \ud800 reply")
    env = make_word_env(["ant", "bee"])
    out = await env.evaluate(server.client(), "m", results_path=tmp_path)
    assert out.reward == [0.0, 0.0]
    records = strict_lines(tmp_path / RESULTS_FILE)
    assert [r["completion"][-1]["content"] for r in records] == ["broken \ud800 reply"] * 2
    assert json.loads((tmp_path / METADATA_FILE).read_text())["status"] == "complete"


def test_nan_infinity_and_numpy_values_are_written_as_strict_json(tmp_path) -> None:
    state = {
        "info": {"count": np.int64(3), "ratio": np.float32(0.5), "nan": float("nan")},
        "timing": {"total_ms": float("inf")},
        "reward_errors": np.array([1.0, 2.0]),
    }
    record = make_record(0, {"prompt": "p"}, "c", state, float("nan"), {"m": np.float32(0.25)})
    with ResultsWriter(tmp_path, {"model": "m", "avg_reward": float("inf")}) as writer:
        writer.write(record)
    (line,) = strict_lines(tmp_path / RESULTS_FILE)
    assert line["info"] == {"count": 3, "ratio": 0.5, "nan": None}
    assert line["timing"] == {"total_ms": None}
    assert line["reward_errors"] == [1.0, 2.0]
    assert line["reward"] is None
    assert line["metrics"] == {"m": 0.25}  # a numpy metric is a number, not a missing one
    meta = json.loads((tmp_path / METADATA_FILE).read_text(), parse_constant=pytest.fail)
    assert meta["avg_reward"] is None


async def test_metadata_never_holds_api_keys(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_word_env(["ant", "bee"], env_args={"token_budget": 9, "search_api_key": SECRET})
    client = server.client().with_options(base_url=server.base_url.replace("//", f"//u:{SECRET}@"))
    sampling = {"extra_headers": {"Authorization": f"Bearer {SECRET}"}, "max_tokens": 32}
    await env.evaluate(client, "m", sampling_args=sampling, results_path=tmp_path)
    text = (tmp_path / METADATA_FILE).read_text()
    assert SECRET not in text
    meta = json.loads(text)
    assert meta["env_args"] == {"token_budget": 9, "search_api_key": "<redacted>"}
    assert meta["sampling_args"]["max_tokens"] == 32  # `max_tokens` is no token
    assert meta["sampling_args"]["extra_headers"] == {"Authorization": "<redacted>"}
    assert meta["base_url"].startswith("http://u:<redacted>@127.0.0.1")

    # The same run, secrets and all, still resumes (the comparison is of redacted values).
    out = await env.evaluate(
        client, "m", sampling_args=sampling, results_path=tmp_path, resume=True
    )
    assert out.reward == [1.0, 1.0]
    assert SECRET not in (tmp_path / METADATA_FILE).read_text()


def test_a_second_writer_on_the_same_directory_is_refused(tmp_path) -> None:
    first_record = make_record(0, {"prompt": "p"}, "first", {}, 1.0, {})
    with ResultsWriter(tmp_path, {"model": "m"}) as first:
        first.write(first_record)
        with pytest.raises(ResultsBusy, match="another run is writing to"):
            with ResultsWriter(tmp_path, {"model": "m"}, resume=True):
                pass
        with pytest.raises(ResultsBusy):  # and, above all, it must not truncate the file
            with ResultsWriter(tmp_path, {"model": "m"}):
                pass
        first.write(make_record(1, {"prompt": "p"}, "second", {}, 1.0, {}))
    assert [r["completion"] for r in strict_lines(tmp_path / RESULTS_FILE)] == [
        "first",
        "second",
    ]
    with ResultsWriter(tmp_path, {"model": "m"}, resume=True) as again:  # released at the end
        assert sorted(again.finished) == [0, 1]
