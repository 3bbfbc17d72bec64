"""Edge cases of results on disk: values JSON cannot hold, credentials, cut-off lines,
two writers at once, and `vfgym eval` output directories it cannot use."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import no_configured_model, run  # noqa: F401 (the fixture is autouse)

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
from vfgym.rubrics import Rubric
from vfgym.types import Messages

FAST_RETRY = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.002)
SECRET = "sk-live-0123456789abcdef"


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


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


async def test_resume_after_a_kill_cut_a_line_inside_a_multibyte_character(
    model_server, tmp_path
) -> None:
    server = await model_server(lambda messages: "日本語の答え " + messages[-1]["content"])
    env = make_word_env(["ant", "bee", "cat"])
    await env.evaluate(server.client(), "m", results_path=tmp_path)
    path = tmp_path / RESULTS_FILE
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = data.index("語".encode(), last) + 1  # inside the three bytes of one character
    path.write_bytes(data[:cut])
    cut_index = json.loads(data[last:].decode())["index"]

    assert sorted(load_finished(tmp_path)) == sorted({0, 1, 2} - {cut_index})
    _, records = read_results(tmp_path)  # what `vfgym view` reads
    assert len(records) == 2

    server.clear_requests()
    out = await env.evaluate(server.client(), "m", results_path=tmp_path, resume=True)
    assert len(server.requests) == 1  # only the rollout whose line was cut
    assert out.completion[cut_index][-1]["content"].startswith("日本語")
    assert sorted(load_finished(tmp_path)) == [0, 1, 2]


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


def test_eval_into_a_directory_another_run_is_writing_says_so(tmp_path, capsys) -> None:
    busy = tmp_path / "busy"
    with ResultsWriter(busy, {"model": "reference"}):
        code, _, err = run(
            ["eval", "guess-the-number", "-n", "1", "-r", "1", "-o", str(busy)], capsys
        )
    assert code == 2
    assert "another run is writing to" in err
    assert "unexpected" not in err


def test_eval_when_outputs_is_a_file_says_what_to_do(tmp_path, capsys) -> None:
    (tmp_path / "outputs").write_text("not a directory\n")
    code, _, err = run(["eval", "guess-the-number", "-n", "1", "-r", "1"], capsys)
    assert code == 2
    assert "outputs is a file" in err and "-o/--output-dir" in err
    assert "unexpected" not in err


def unwritable_directory(tmp_path: Path) -> Path:
    """A directory no run can write in, for whoever runs the tests (root included)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        return locked / "run"
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root without /sys: no directory is unwritable")
    return Path("/sys/kernel/vfgym-test-run")


def test_eval_into_an_unwritable_directory_says_what_to_do(tmp_path, capsys) -> None:
    target = unwritable_directory(tmp_path)
    code, _, err = run(
        ["eval", "guess-the-number", "-n", "1", "-r", "1", "-o", str(target)], capsys
    )
    assert code == 2
    assert f"cannot write results to {target}" in err
    assert "-o/--output-dir" in err
    assert "unexpected" not in err
