"""Resuming runs whose inputs hold values JSON does not keep as they were, and run
directories `vfgym eval` cannot use."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import no_configured_model, run  # noqa: F401 (the fixture is autouse)

from vfgym.envs import SingleTurnEnv
from vfgym.inference.client import RetryPolicy
from vfgym.results.jsonl import (
    METADATA_FILE,
    RESULTS_FILE,
    inputs_digest,
    load_finished,
    read_results,
)
from vfgym.rubrics import Rubric
from vfgym.types import Messages

FAST_RETRY = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.002)


ONE = ["-n", "1", "-r", "1"]


def matches(completion: Messages, answer: str) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


def make_env_with_info(words: list[str], info: dict[Any, Any], **kwargs: Any) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper(), "info": info} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]), retry=FAST_RETRY, **kwargs)


def strict_lines(path: Path) -> list[dict[str, Any]]:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{path} holds {name}, which is not JSON")

    text = path.read_text(encoding="utf-8")
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines() if line]


FINGERPRINTS = """
import json
from vfgym.results.jsonl import as_json, inputs_digest

class Board:  # no __repr__ of its own: the default one holds a memory address
    pass

info = {"allowed": {"crane", "slate", "trace", "irate", "adieu", "audio"}, "board": Board()}
rows = [{"prompt": "p", "answer": "a", "task": "t", "info": info}]
print(inputs_digest(rows))
print(json.dumps(as_json({"words": frozenset({"ant", "bee", "cat", "dog", "eel"})})))
"""


def fingerprints(hash_seed: str) -> list[str]:
    """What another process (another `vfgym eval --resume`) computes for the same inputs."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", FINGERPRINTS], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_inputs_and_arguments_read_the_same_in_every_process() -> None:
    """A resume runs in a new process; sets of text iterate in a per-process order and a
    default repr holds a memory address, and neither may make the same inputs (or
    env_args) look like another run's."""
    first, second = fingerprints("1"), fingerprints("2")
    assert first[0] == second[0]  # inputs_digest
    assert first[1] == second[1]  # env_args as written to metadata.json and compared
    assert json.loads(first[1]) == {"words": ["ant", "bee", "cat", "dog", "eel"]}


def test_the_digest_of_plain_inputs_is_unchanged() -> None:
    """Runs already on disk must still resume: plain inputs keep the digest they had."""
    rows = [{"prompt": [{"role": "user", "content": "x"}], "answer": "X", "task": "t", "info": {}}]
    item = [rows[0]["prompt"], "X", "t", {}]
    expected = hashlib.sha256(json.dumps(item, sort_keys=True).encode() + b"\n").hexdigest()
    assert inputs_digest(rows) == expected


async def test_info_with_tuple_and_mixed_keys_is_written_and_resumes(
    model_server, tmp_path
) -> None:
    """A board keyed by (row, col), or an info mixing int and text keys, must neither end
    the batch nor stop it being resumed; JSON keeps the keys as text."""
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    info = {(0, 1): "x", 2: "two", "name": "board"}
    env = make_env_with_info(["ant", "bee", "cat"], info)
    out = await env.evaluate(server.client(), "m", results_path=tmp_path)
    assert out.reward == [1.0, 1.0, 1.0]
    records = strict_lines(tmp_path / RESULTS_FILE)
    assert records[0]["info"] == {"[0, 1]": "x", "2": "two", "name": "board"}

    path = tmp_path / RESULTS_FILE
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")  # one rollout lost
    server.clear_requests()
    again = await env.evaluate(server.client(), "m", results_path=tmp_path, resume=True)
    assert len(server.requests) == 1
    assert again.reward == [1.0, 1.0, 1.0]


def legacy_digest(rows: list[dict[str, Any]]) -> str:
    """`inputs_digest` as vfgym computed it before numpy values were written as numbers:
    anything JSON could not hold, numpy scalars and arrays included, by its repr."""

    def default(value: Any) -> Any:
        if isinstance(value, set | frozenset | tuple):
            return list(value)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return repr(value)

    digest = hashlib.sha256()
    for row in rows:
        item = [row.get("prompt"), row.get("answer"), row.get("task"), row.get("info")]
        digest.update(json.dumps(item, default=default, sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


async def test_a_run_from_before_numpy_values_were_numbers_resumes(model_server, tmp_path) -> None:
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    info = {"target": np.int64(7), "weights": np.array([0.5, 0.25]), "ratio": np.float32(0.5)}
    env = make_env_with_info(["ant", "bee", "cat"], info)
    await env.evaluate(server.client(), "m", results_path=tmp_path)
    meta_path = tmp_path / METADATA_FILE
    meta = json.loads(meta_path.read_text())
    rows = env.get_eval_inputs(-1, 1)
    old = legacy_digest([{**row, "info": dict(row["info"])} for row in rows])
    assert old != meta["inputs_digest"]  # numpy reprs: what the earlier version wrote
    meta["inputs_digest"] = old
    meta_path.write_text(json.dumps(meta))
    path = tmp_path / RESULTS_FILE
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")

    server.clear_requests()
    out = await env.evaluate(server.client(), "m", results_path=tmp_path, resume=True)
    assert len(server.requests) == 1  # only the rollout that was not on disk
    assert out.reward == [1.0, 1.0, 1.0]
    assert json.loads(meta_path.read_text())["inputs_digest"] == inputs_digest(rows)


async def test_a_different_run_is_still_refused_by_its_digest(model_server, tmp_path) -> None:
    """Accepting an earlier version's digest must not accept other inputs."""
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    await make_env_with_info(["ant", "bee"], {"n": np.int64(1)}).evaluate(
        server.client(), "m", results_path=tmp_path
    )
    other = make_env_with_info(["ant", "bee"], {"n": np.int64(2)})
    try:
        await other.evaluate(server.client(), "m", results_path=tmp_path, resume=True)
    except ValueError as exc:
        assert "inputs_digest" in str(exc)
    else:
        raise AssertionError("a run with other inputs was resumed")


def test_resume_when_results_file_cannot_be_opened_says_what_to_do(tmp_path, capsys) -> None:
    assert run(["eval", "guess-the-number", *ONE, "-o", "run"], capsys)[0] == 0
    results = tmp_path / "run" / RESULTS_FILE
    results.unlink()
    results.mkdir()  # what a copy gone wrong, or a mount, can leave in its place
    code, _, err = run(["eval", "guess-the-number", *ONE, "--resume", "run"], capsys)
    assert code == 2, err
    assert "unexpected" not in err and "Traceback" not in err, err
    assert f"cannot use {Path('run') / RESULTS_FILE}" in err
    assert "-o/--output-dir" in err

    # Without --resume it is no "run that holds results" either.
    code, _, err = run(["eval", "guess-the-number", *ONE, "-o", "run"], capsys)
    assert code == 2, err
    assert "add --resume" not in err
    assert f"cannot use {Path('run') / RESULTS_FILE}" in err


def suggested_command(err: str) -> list[str]:
    """The `vfgym eval ... --resume DIR` line a refusal prints, as argv after `vfgym`."""
    (line,) = [line for line in err.splitlines() if line.strip().startswith("vfgym eval")]
    return shlex.split(line)[1:]


def test_suggested_resume_command_keeps_the_credentials_given_now(tmp_path, capsys) -> None:
    """metadata.json holds `<redacted>` for a header's key; the command printed from it must
    carry the key given on this command line, not send `<redacted>` as one."""
    header = {"extra_headers": {"Authorization": "Bearer sk-test-123"}}
    first = ["eval", "guess-the-number", *ONE, "-S", json.dumps({**header, "temperature": 0.5})]
    assert run([*first, "-o", "run"], capsys)[0] == 0
    code, _, err = run(
        ["eval", "guess-the-number", *ONE, "-S", json.dumps(header), "--resume", "run"], capsys
    )
    assert code == 2, err
    argv = suggested_command(err)
    sampling = json.loads(argv[argv.index("-S") + 1])
    assert sampling == {**header, "temperature": 0.5}
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "1 (0 errored" in out


def test_suggested_resume_command_says_when_a_credential_is_missing(tmp_path, capsys) -> None:
    header = {"extra_headers": {"Authorization": "Bearer sk-test-123"}}
    first = ["eval", "guess-the-number", *ONE, "-S", json.dumps({**header, "temperature": 0.5})]
    assert run([*first, "-o", "run"], capsys)[0] == 0
    code, _, err = run(["eval", "guess-the-number", *ONE, "--resume", "run"], capsys)
    assert code == 2, err
    assert "<redacted>" in " ".join(suggested_command(err))
    assert "replace <redacted>" in err


async def test_resume_from_results_alone_refuses_records_of_other_inputs(
    model_server, tmp_path
) -> None:
    """With metadata.json moved aside (as `vfgym eval` suggests when it is unreadable),
    the records themselves must match the inputs: lines of a run with another -r would
    otherwise be placed at rollouts of other examples."""
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    env = make_env_with_info(["ant", "bee", "cat"], {})
    await env.evaluate(server.client(), "m", rollouts_per_example=1, results_path=tmp_path)
    (tmp_path / METADATA_FILE).unlink()
    server.clear_requests()
    try:
        await env.evaluate(
            server.client(), "m", rollouts_per_example=2, results_path=tmp_path, resume=True
        )
    except ValueError as exc:
        assert "cannot resume" in str(exc) and "example" in str(exc)
    else:
        raise AssertionError("records of another run were resumed as this one's")
    assert server.requests == []

    # The same inputs still resume from the records alone.
    out = await env.evaluate(
        server.client(), "m", rollouts_per_example=1, results_path=tmp_path, resume=True
    )
    assert server.requests == [] and out.reward == [1.0, 1.0, 1.0]


async def test_a_results_path_that_is_a_file_is_named_as_such(model_server, tmp_path) -> None:
    """`FileExistsError: File exists` read as "pass resume=True", which fails the same way."""
    server = await model_server(lambda messages: messages[-1]["content"].upper())
    target = tmp_path / "out.jsonl"
    target.write_text("notes\n")
    for resume in (False, True):
        try:
            await make_env_with_info(["ant"], {}).evaluate(
                server.client(), "m", results_path=target, resume=resume
            )
        except NotADirectoryError as exc:
            assert "is a file" in str(exc) and "directory" in str(exc)
        else:
            raise AssertionError("a run wrote results into a file's place")
    assert target.read_text() == "notes\n" and server.requests == []


@pytest.mark.parametrize(
    "damaged",
    ['{"index": 1, "reward": ' + "9" * 5000 + "}", "[" * 100_000 + "]" * 100_000],
    ids=["an integer past the digit limit", "nesting past the recursion limit"],
)
def test_a_line_the_json_parser_refuses_in_any_way_costs_that_line_only(
    tmp_path: Path, damaged: str
) -> None:
    from vfgym.results.jsonl import load_finished

    good = {"index": 0, "reward": 1.0, "example_id": 0}
    (tmp_path / RESULTS_FILE).write_text(json.dumps(good) + "\n" + damaged + "\n")
    assert read_results(tmp_path)[1] == [good]
    assert list(load_finished(tmp_path)) == [0]


def make_word_env(words: list[str], **kwargs: Any) -> SingleTurnEnv:
    rows = [{"question": w, "answer": w.upper()} for w in words]
    return SingleTurnEnv(dataset=rows, rubric=Rubric(funcs=[matches]), retry=FAST_RETRY, **kwargs)


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
