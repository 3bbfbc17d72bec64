"""The model server's fault mix: a random share of requests fail, reproducibly from a seed.

Requests go through the real openai client over HTTP, and through vfgym's own retry
policy, as a user rehearsing their pipeline against a flaky server would send them.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from transport_paths import ClientPath, client_path_fixture  # noqa: F401  (the fixture)

from vfgym.envs import SingleTurnEnv
from vfgym.inference.client import RetryPolicy
from vfgym.inference.server import FaultMix, ModelServer, parse_fault_mix
from vfgym.rubrics import Rubric
from vfgym.types import Messages

HELLO = [{"role": "user", "content": "hello"}]


def shout(messages: Messages) -> str:
    return messages[-1]["content"].upper()


def matches(completion: Messages, answer: str) -> float:
    return float(completion[-1]["content"] == answer)


def _outcomes(mix: FaultMix, requests: int) -> list[str]:
    """What each of `requests` chat requests met: "ok", or the kind of failure seen."""
    outcomes = []
    with ModelServer(shout, faults=mix) as server, server.sync_client(timeout=5.0) as client:
        for _ in range(requests):
            try:
                client.chat.completions.create(model="m", messages=HELLO)
                outcomes.append("ok")
            except openai.APIStatusError as exc:
                outcomes.append(str(exc.status_code))
            except openai.APIConnectionError:
                outcomes.append("drop")
            except openai.APIResponseValidationError:
                outcomes.append("malformed")
            except ValueError:  # a 200 whose body is not JSON
                outcomes.append("malformed")
    return outcomes


def test_the_same_seed_gives_the_same_faults_at_about_the_rate() -> None:
    kinds = ["500", "429", "503", "drop", "malformed"]
    first = _outcomes(FaultMix(kinds, rate=0.3, seed=7), 60)
    again = _outcomes(FaultMix(kinds, rate=0.3, seed=7), 60)
    other = _outcomes(FaultMix(kinds, rate=0.3, seed=8), 60)
    assert first == again
    assert first != other
    failed = [outcome for outcome in first if outcome != "ok"]
    assert 6 <= len(failed) <= 32  # 18 expected of 60
    assert set(failed) <= set(kinds)
    assert len(set(failed)) >= 3  # a mix, not one kind


def test_injected_counts_what_the_client_met() -> None:
    mix = FaultMix(["500", "503"], rate=0.5, seed=3)
    outcomes = _outcomes(mix, 30)
    assert mix.injected == {
        kind: outcomes.count(kind) for kind in ("500", "503") if outcomes.count(kind)
    }


def test_rate_zero_and_one_are_never_and_always() -> None:
    assert _outcomes(FaultMix(["500"], rate=0.0), 10) == ["ok"] * 10
    assert _outcomes(FaultMix(["503"], rate=1.0), 5) == ["503"] * 5


def test_queued_faults_come_before_the_mix() -> None:
    with ModelServer(shout, faults=FaultMix(["503"], rate=1.0)) as server:
        server.inject_faults("500")
        with server.sync_client() as client:
            with pytest.raises(openai.InternalServerError) as first:
                client.chat.completions.create(model="m", messages=HELLO)
            assert first.value.status_code == 500
            with pytest.raises(openai.APIStatusError) as second:
                client.chat.completions.create(model="m", messages=HELLO)
            assert second.value.status_code == 503
            server.set_fault_mix(None)
            reply = client.chat.completions.create(model="m", messages=HELLO)
            assert reply.choices[0].message.content == "HELLO"


async def test_vfgym_retries_ride_out_a_mix_of_transient_faults(
    model_server: Any, client_path: ClientPath
) -> None:
    mix = FaultMix(["500", "429", "503", "drop", "malformed", ("slow", 0.01)], rate=0.3, seed=5)
    server = await model_server(shout, faults=mix)
    words = [f"w{i}" for i in range(30)]
    env = SingleTurnEnv(
        dataset=[{"question": w, "answer": w.upper()} for w in words],
        rubric=Rubric(
            funcs=[lambda completion, answer: float(completion[-1]["content"] == answer)]
        ),
        retry=RetryPolicy(max_retries=8, initial_delay=0.01, max_delay=0.02, jitter=0.0),
    )
    out = await env.evaluate(
        client_path.client(server), "m", num_examples=30, rollouts_per_example=1
    )
    assert sum(mix.injected.values()) >= 3  # faults were met...
    assert out.metadata["num_errored"] == 0  # ...and every rollout got through them
    assert out.reward == [1.0] * 30


@pytest.mark.parametrize(
    ("faults", "rate", "problem"),
    [
        ([], 0.1, "at least one fault kind"),
        (["500"], 1.5, "from 0 to 1"),
        (["500"], -0.1, "from 0 to 1"),
        (["teapot"], 0.1, "unknown fault kind"),
        ([("500", 1.0)], 0.1, "only 'slow' and '429'"),
    ],
)
def test_a_bad_mix_is_refused_with_what_to_give(faults: Any, rate: float, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        FaultMix(faults, rate=rate)


def test_a_mix_is_read_from_command_line_text() -> None:
    mix = parse_fault_mix("500, 429=2,slow=0.5,drop", rate=0.25, seed=4)
    assert [(f.kind, f.seconds) for f in mix.faults] == [
        ("500", 0.0),
        ("429", 2.0),
        ("slow", 0.5),
        ("drop", 0.0),
    ]
    assert (mix.rate, mix.seed) == (0.25, 4)
    with pytest.raises(ValueError, match=r'"slow=0\.5"'):
        parse_fault_mix("slow=soon", rate=0.1)
