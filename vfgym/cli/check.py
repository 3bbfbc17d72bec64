"""`vfgym check ENV`: the kit's quality gate for an environment, built-in or third-party.

It builds the environment as `gym.make` would and checks, on a few examples:

1. it loads, and its module describes itself sensibly (`KIND`, `REWARD_RANGE`);
2. Gymnasium's `check_env` passes;
3. the same seed gives the same episode (two seeded resets, the same moves, the same
   observations and rewards);
4. the reference policy solves every example it plays (reward at the top of the
   declared range), unless the environment says it has none
   (`reference_policy = None`);
5. the random policy (`make_random_policy`, when there is one) plays whole episodes
   without an error;
6. every reward is finite and inside `REWARD_RANGE` (default `(0.0, 1.0)`);
7. for a sandboxed environment, no container of this process is left once it closed.

Each check prints one line (`ok`, `FAIL` or `skip` with why); the exit code is 1
when any failed. Why a gate of its own: these are the promises every environment of
the catalogue keeps, and an author should learn that theirs breaks one before a
training run does.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from vfgym.cli._support import (
    EXIT_FAILED,
    EXIT_USAGE,
    CommandError,
    build_environment,
    check_docker,
    describe_environment,
)
from vfgym.envs.registry import EnvironmentInfo, find_loader

#: The reward range an environment promises when its module declares no `REWARD_RANGE`.
DEFAULT_REWARD_RANGE = (0.0, 1.0)
#: The kinds `vfgym list` shows; a module's `KIND` must be one of them.
KINDS = ("game", "tool")


@dataclass
class CheckResult:
    """One line of the report: a check's name, its outcome and what it found."""

    name: str
    outcome: str  # "ok", "FAIL" or "skip"
    detail: str = ""


@dataclass
class CheckReport:
    """What `vfgym check` found, in order; `failed` when any check failed."""

    env_id: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(result.outcome == "FAIL" for result in self.results)

    def add(self, name: str, outcome: str, detail: str = "") -> None:
        self.results.append(CheckResult(name, outcome, detail))


class _CheckFailed(Exception):
    """A check that failed, with what it found (internal: becomes a FAIL line)."""


def run_check(
    env_id: str,
    env_args: dict[str, Any] | None = None,
    *,
    num_examples: int = 3,
    seed: int = 0,
    out: IO[str] | None = None,
) -> CheckReport:
    """Check environment `env_id` (a registered name, `module:function` or a path to
    a .py file) on `num_examples` examples; print each line to `out` as it is found.

    Raises CommandError when the environment cannot be named or built at all (there
    is nothing to check then); every other problem is a FAIL line of the report.
    """
    if num_examples < 1:
        raise CommandError("-n/--num-examples must be at least 1", EXIT_USAGE)
    report = CheckReport(env_id)
    args = dict(env_args or {})

    def record(name: str, outcome: str, detail: str) -> None:
        report.add(name, outcome, detail)
        if out is not None:
            shown = f"{outcome:<4}  {name}" + (f": {detail}" if detail else "")
            print(shown, file=out, flush=True)

    info = describe_environment(env_id)
    if info is not None and info.needs_sandbox:
        check_docker(env_id)
    if "num_examples" not in args and _takes(env_id, "num_examples"):
        args["num_examples"] = num_examples  # a small dataset builds quickly
    reward_range = _declared(info, record)
    promised = reward_range[1] if info is None else info.reference_reward
    if promised is not None and not math.isfinite(promised):  # malformed: reported above
        promised = reward_range[1]
    from vfgym.gym.registration import make_env

    gym_env = make_env(_returning(build_environment(env_id, args)))
    try:
        _play_checks(gym_env, record, num_examples, seed, reward_range, promised)
    finally:
        gym_env.close()
    if info is not None and info.needs_sandbox:
        left = _containers_left()
        detail = f"still there: {', '.join(left)}" if left else ""
        record("no container left behind", "FAIL" if left else "ok", detail)
    return report


def _play_checks(
    gym_env: Any,
    record: Callable[[str, str, str], None],
    num_examples: int,
    seed: int,
    reward_range: tuple[float, float],
    promised: float | None,
) -> None:
    """The checks that play episodes, each recorded as one line; `promised` is the
    least reward the reference must earn on each example (None: no promise)."""
    environment = gym_env.environment
    reference = getattr(environment, "reference_policy", None)
    make_random = getattr(environment, "make_random_policy", None)
    rows = min(num_examples, len(gym_env.rows))
    rewards: list[float] = []
    _run(record, "gymnasium check_env", lambda: _check_env(gym_env))
    _run(
        record,
        "same seed, same episode",
        lambda: _check_determinism(gym_env, reference, make_random, seed),
    )
    if callable(reference):
        _run(
            record,
            "reference policy solves every example",
            lambda: _check_reference(gym_env, reference, rows, promised, rewards),
        )
    else:
        record("reference policy solves every example", "skip", "it has no reference_policy")
    if callable(make_random):
        _run(
            record,
            "random policy plays without errors",
            lambda: _check_random(gym_env, make_random, rows, seed, rewards),
        )
    else:
        record("random policy plays without errors", "skip", "no make_random_policy")
    _run(record, "rewards finite and in range", lambda: _check_range(rewards, reward_range))


def check_command(
    env_id: str,
    env_args: dict[str, Any],
    *,
    num_examples: int,
    seed: int,
    out: IO[str],
) -> int:
    """`vfgym check`: the report on `out`, then exit code 0, or 1 when a check failed."""
    print(f"checking {env_id} on {num_examples} example(s), seed {seed}", file=out, flush=True)
    report = run_check(env_id, env_args, num_examples=num_examples, seed=seed, out=out)
    failed = [result.name for result in report.results if result.outcome == "FAIL"]
    if failed:
        print(f"{env_id}: {len(failed)} check(s) failed: {', '.join(failed)}", file=out)
        return EXIT_FAILED
    print(f"{env_id}: every check passed", file=out)
    return 0


def _takes(env_id: str, parameter: str) -> bool:
    """Whether the loader of `env_id` has `parameter`; False when that cannot be told
    (a loader that will not import: building it next says why, in the CLI's words)."""
    try:
        return parameter in inspect.signature(find_loader(env_id)).parameters
    except Exception:
        return False


def _declared(
    info: EnvironmentInfo | None, record: Callable[[str, str, str], None]
) -> tuple[float, float]:
    """The module's declared `KIND` and `REWARD_RANGE` checked; the range to hold to."""
    if info is None:
        record("describes itself", "skip", "a verifiers-style module: no KIND or REWARD_RANGE")
        return DEFAULT_REWARD_RANGE
    problems = []
    if info.kind not in KINDS:
        problems.append(f"KIND is {info.kind!r}, not one of {', '.join(map(repr, KINDS))}")
    low, high = info.reward_range
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        problems.append(f"REWARD_RANGE {info.reward_range!r} is not two finite numbers, low < high")
    promised = info.reference_reward
    if promised is not None and not (math.isfinite(promised) and low <= promised <= high):
        problems.append(f"REFERENCE_REWARD {promised!r} is not None or a number in REWARD_RANGE")
    if problems:
        record("describes itself", "FAIL", "; ".join(problems))
        return DEFAULT_REWARD_RANGE
    record(
        "describes itself",
        "ok",
        f"kind {info.kind}, Gym id {info.gym_id}, rewards in [{low:g}, {high:g}]",
    )
    return low, high


def _returning(environment: Any) -> Callable[[], Any]:
    """A factory for `make_env` of an environment already built (with the CLI's words
    for a bad name or argument), so it is built once."""

    def built() -> Any:
        return environment

    return built


def _run(record: Callable[[str, str, str], None], name: str, check: Callable[[], str]) -> None:
    try:
        detail = check()
    except _CheckFailed as exc:
        record(name, "FAIL", str(exc))
    except Exception as exc:
        record(name, "FAIL", f"raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    else:
        record(name, "ok", detail)


def _check_env(gym_env: Any) -> str:
    from gymnasium.utils.env_checker import check_env

    check_env(gym_env, skip_render_check=True)
    return ""


def _policy(player: Callable[[Any], Any]) -> Callable[[Any, dict[str, Any]], Any]:
    """A Gym policy from an environment's policy of the conversation."""

    def act(observation: Any, info: dict[str, Any]) -> Any:
        return player(info["messages"])

    return act


def _play(gym_env: Any, player: Callable[[Any], Any], **reset: Any) -> Any:
    from vfgym.gym.play import play_episode

    return play_episode(gym_env, _policy(player), **reset)


def _outcome(trajectory: Any) -> tuple[float, str | None]:
    """The episode's reward and the error that ended it, if one did."""
    last = trajectory.infos[-1]
    reward = last.get("episode_reward", trajectory.total_reward)
    state = last.get("state") or {}
    error = last.get("error") or state.get("error")
    if not error and state.get("reward_errors"):  # a reward function raised or gave NaN
        error = "reward function failed: " + "; ".join(
            f"{failure.get('func')}: {failure.get('type')}: {failure.get('message')}"
            if isinstance(failure, dict)
            else str(failure)
            for failure in list(state["reward_errors"])[:2]
        )
    return float(reward), (str(error) if error else None)


def _check_determinism(gym_env: Any, reference: Any, make_random: Any, seed: int) -> str:
    """Two seeded resets, the same moves: the same observations and rewards."""
    if callable(make_random):
        players, which = (make_random(seed), make_random(seed)), "random"
    elif callable(reference):
        players, which = (reference, reference), "reference"
    else:
        raise _CheckFailed("no policy to play the same moves with (no reference, no random)")
    first = _play(gym_env, players[0], seed=seed)
    second = _play(gym_env, players[1], seed=seed)
    if first.observations != second.observations:
        pairs = zip(first.observations, second.observations, strict=False)
        step = next((i for i, (a, b) in enumerate(pairs) if a != b), len(first.observations))
        raise _CheckFailed(
            f"seed {seed} gave different episodes: observation {step} differs (with the "
            f"{which} policy's moves); draw every random choice from the row's info or a "
            "generator seeded from it, never from unseeded `random`"
        )
    if first.rewards != second.rewards:
        raise _CheckFailed(
            f"seed {seed} gave different rewards: {first.rewards} vs {second.rewards}"
        )
    return f"{len(first.actions)} step(s) with the {which} policy's moves, twice"


def _check_reference(
    gym_env: Any,
    reference: Any,
    rows: int,
    promised: float | None,
    rewards: list[float],
) -> str:
    """Every example played by the reference without an error, each earning at least
    `promised` (None: any reward, for a reference that may lose to a strong opponent)."""
    unsolved, earned = [], []
    for index in range(rows):
        reward, error = _outcome(_play(gym_env, reference, options={"index": index}))
        rewards.append(reward)
        earned.append(reward)
        if error or (promised is not None and not reward >= promised - 1e-9):
            unsolved.append(
                f"example {index}: reward {reward:g}" + (f" ({error})" if error else "")
            )
    if unsolved:
        bar = f"reward {promised:g}" if promised is not None else "no error"
        raise _CheckFailed(
            f"{len(unsolved)} of {rows} not solved (solved: {bar}): " + "; ".join(unsolved[:3])
        )
    if promised is None:
        shown = ", ".join(f"{reward:g}" for reward in earned)
        return (
            f"{rows} played without errors (REFERENCE_REWARD = None: no reward promised): {shown}"
        )
    return f"{rows} of {rows} solved"


def _check_random(
    gym_env: Any, make_random: Any, rows: int, seed: int, rewards: list[float]
) -> str:
    errors = []
    for index in range(rows):
        reward, error = _outcome(
            _play(gym_env, make_random(seed + index), options={"index": index})
        )
        rewards.append(reward)
        if error:
            errors.append(f"example {index}: {error}")
    if errors:
        raise _CheckFailed("; ".join(errors[:3]))
    return f"{rows} episode(s)"


def _check_range(rewards: list[float], reward_range: tuple[float, float]) -> str:
    low, high = reward_range
    bad = [r for r in rewards if not (math.isfinite(r) and low - 1e-9 <= r <= high + 1e-9)]
    if bad:
        raise _CheckFailed(
            f"{len(bad)} reward(s) outside [{low:g}, {high:g}] or not finite: {bad[:5]}; "
            "declare the range with a module constant REWARD_RANGE = (low, high)"
        )
    if not rewards:
        return "no episode was played"
    return f"{len(rewards)} reward(s) in [{low:g}, {high:g}]"


def _containers_left() -> list[str]:
    from vfgym.sandbox.docker_client import make_client
    from vfgym.sandbox.labels import LABEL, OWNER_LABEL, owner_token

    client = make_client(None, timeout=30)
    try:
        filters = {"label": [f"{LABEL}=1", f"{OWNER_LABEL}={owner_token()}"]}
        return [info["Id"][:12] for info in client.api.containers(all=True, filters=filters)]
    finally:
        client.close()


__all__ = ["DEFAULT_REWARD_RANGE", "CheckReport", "CheckResult", "check_command", "run_check"]
