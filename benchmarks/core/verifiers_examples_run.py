"""The `--examples` mode of benchmarks/verifiers_parity.py: verifiers' own example
environments, run unmodified on vfgym and on the real verifiers 0.1.7.post0.

Each example runs in a fresh interpreter per side (so one example's imports cannot
help or hurt another), from a scratch directory holding its folder's files, the
synthetic hub (verifiers_examples.py) and a small runner. The runner prints one
JSON line: the rewards and metrics of every rollout, or the error that stopped it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import verifiers_examples
from verifiers_examples import LOAD_ARGS, NUM_EXAMPLES

#: What the reference venv needs besides verifiers for the examples that use them
#: (vfgym gets the first four from its `verifiers-compat` extra; for the mmmu and
#: smolagents_math_tools examples, `pip install pillow smolagents` into vfgym's venv).
REFERENCE_EXTRAS = ("math-verify", "reasoning-gym", "textarena", "nltk", "pillow", "smolagents")

RUNNER = """
import asyncio, json, os, random, sys, traceback
side, site, module_name, base_url, args, count = (sys.argv[1], sys.argv[2], sys.argv[3],
    sys.argv[4], json.loads(sys.argv[5]), int(sys.argv[6]))
def fail(stage, exc):
    first = str(exc).splitlines()[0] if str(exc) else ""
    print(json.dumps({"error": f"{stage}: {type(exc).__name__}: {first}"[:300]}))
    traceback.print_exc()
    raise SystemExit(0)
from verifiers_examples import install_synthetic_hub
install_synthetic_hub()
if side == "vfgym":
    from vfgym.compat import install_verifiers_alias
    install_verifiers_alias()
import importlib.util
from openai import AsyncOpenAI
# the example's folder goes last on the path, and the example is loaded from its
# file, so an example named like a standard module (math.py) shadows nothing
sys.path.append(site)
name = f"example_{module_name}" if module_name in sys.stdlib_module_names else module_name
try:
    spec = importlib.util.spec_from_file_location(name, os.path.join(site, module_name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
except BaseException as exc:
    fail("import", exc)
random.seed(0)
try:
    env = module.load_environment(**args)
except BaseException as exc:
    fail("load_environment", exc)
client = AsyncOpenAI(base_url=base_url, api_key="local", max_retries=0)
try:
    results = asyncio.run(env.evaluate(client, "scripted", num_examples=count,
                                       rollouts_per_example=1, max_concurrent=1))
except BaseException as exc:
    fail("evaluate", exc)
failed = [s.get("error") for s in results.state if isinstance(s, dict) and s.get("error")]
first = failed[0] if failed else None
first = first.get("message") if isinstance(first, dict) else first
print(json.dumps({"reward": list(results.reward),
                  "metrics": {k: list(v) for k, v in results.metrics.items()},
                  "failed": len(failed), "first_failure": str(first)[:160]}))
"""


def _ensure_reference_extras(python: Path) -> None:
    """pip-install into the reference venv what some examples import, once."""
    modules = {
        "math-verify": "math_verify",
        "reasoning-gym": "reasoning_gym",
        "textarena": "textarena",
        "nltk": "nltk",
        "pillow": "PIL",
        "smolagents": "smolagents",
    }
    missing = [
        package
        for package in REFERENCE_EXTRAS
        if subprocess.run(
            [str(python), "-c", f"import {modules[package]}"], capture_output=True
        ).returncode
        != 0
    ]
    if missing:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *missing], check=True)


def discover(specs: list[str]) -> list[tuple[str, list[str], Path]]:
    """(name, labels, folder) of each example; a file identical at several labels once."""
    seen: dict[tuple[str, str], tuple[str, list[str], Path]] = {}
    for spec in specs:
        label, _, folder = spec.rpartition("=")
        root = Path(folder).expanduser()
        if not root.is_dir():
            raise SystemExit(
                f"--examples: {root} is not a directory (give LABEL=PATH/environments)"
            )
        for source in sorted(root.glob("*/*.py")):
            if source.stem != source.parent.name:
                continue
            digest = hashlib.sha256(source.read_bytes()).hexdigest()
            key = (source.stem, digest)
            if key in seen:
                seen[key][1].append(label or root.name)
            else:
                seen[key] = (source.stem, [label or root.name], source.parent)
    return sorted(seen.values(), key=lambda item: (item[0], item[1]))


def _word_data() -> dict[str, str]:
    """NLTK_DATA for both sides when NLTK's own word data is absent: the stand-in vfgym
    builds (vfgym.envs.textarena_words), so the real verifiers' TextArenaEnv draws
    its secrets from the same lists instead of failing to download them."""
    try:
        from vfgym.envs.textarena_words import ensure_word_data

        root = ensure_word_data()
    except ModuleNotFoundError:  # no nltk/textarena here: wordle fails on both sides
        return {}
    return {"NLTK_DATA": str(root)} if root else {}


def _run(
    python: Path, side: str, tools: Path, site: Path, name: str, base_url: str
) -> dict[str, Any]:
    args = {
        key: value.format(base_url=base_url) if isinstance(value, str) else value
        for key, value in LOAD_ARGS.get(name, {}).items()
    }
    env = {
        **os.environ,
        "OPENAI_API_KEY": "local",
        "OPENAI_BASE_URL": base_url,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        **_word_data(),
    }
    command = [str(python), str(tools / "examples_runner.py"), side, str(site), name, base_url]
    try:
        done = subprocess.run(
            [*command, json.dumps(args), str(NUM_EXAMPLES)],
            cwd=tools,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 600 s"}
    (tools / f"{side}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = done.stderr.strip().splitlines()
        return {"error": f"crashed: {tail[-1] if tail else done.returncode}"[:300]}
    return json.loads(lines[-1])


def _mean(values: list[Any]) -> float:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def _equal(a: list[Any], b: list[Any]) -> bool:
    def norm(x: Any) -> float:
        return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

    return len(a) == len(b) and all(
        math.isclose(norm(x), norm(y), abs_tol=1e-9) for x, y in zip(a, b, strict=True)
    )


def _summary(side: dict[str, Any]) -> str:
    if "error" in side:
        return "-"
    parts = [f"reward={_mean(side['reward']):.3f}"]
    parts += [f"{k}={_mean(v):.3f}" for k, v in sorted(side["metrics"].items())]
    return " ".join(parts)


def _traced(respond: Any) -> Any:
    """`respond`, writing each request and reply to $VFGYM_PARITY_TRACE when set (the
    sides run one after the other, so the file reads in order)."""
    trace = os.environ.get("VFGYM_PARITY_TRACE")
    if not trace:
        return respond

    def traced(prompt: Any) -> Any:
        reply = respond(prompt)
        with open(trace, "a", encoding="utf-8") as out:
            out.write(json.dumps({"prompt": prompt, "reply": reply}, default=str) + "\n")
        return reply

    return traced


def _compare(example: tuple[str, list[str], Path], reference: Path, base_url: str) -> dict:
    """Run one example on both sides, each in a scratch copy of its folder."""
    name, labels, folder = example
    scratch = Path(tempfile.mkdtemp(prefix=f"vfgym-example-{name}-"))
    site, tools = scratch / "example", scratch / "tools"
    try:
        shutil.copytree(folder, site)
        tools.mkdir()
        shutil.copy(verifiers_examples.__file__, tools / "verifiers_examples.py")
        (tools / "examples_runner.py").write_text(RUNNER, encoding="utf-8")
        ref = _run(reference, "verifiers", tools, site, name, base_url)
        ours = _run(Path(sys.executable), "vfgym", tools, site, name, base_url)
        print(
            f"[{name} {','.join(labels)}] verifiers: {ref.get('error') or _summary(ref)}"
            f" | vfgym: {ours.get('error') or _summary(ours)}",
            file=sys.stderr,
        )
        row = {"name": name, "labels": labels, "ref": ref, "ours": ours}
        if saved := os.environ.get("VFGYM_PARITY_ROWS"):
            with open(saved, "a", encoding="utf-8") as out:  # for --table-from
                out.write(json.dumps(row) + "\n")
        return row
    finally:
        if os.environ.get("VFGYM_PARITY_KEEP"):
            print(f"[{name}] kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def run_examples(specs: list[str], only: list[str] | None, reference: Path, jobs: int = 1) -> int:
    """Run every example on both sides (`jobs` examples at a time) and print the
    table; 1 when any differs."""
    from concurrent.futures import ThreadPoolExecutor

    from vfgym.inference.server import ModelServer

    _ensure_reference_extras(reference)
    examples = [e for e in discover(specs) if not only or e[0] in only]
    with (
        ModelServer(_traced(verifiers_examples.respond)).running() as server,
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        rows = list(pool.map(lambda e: _compare(e, reference, server.base_url), examples))
    return _print_table(rows)


def _runs(side: dict[str, Any]) -> str:
    if "error" in side:
        return "no: " + side["error"]
    if side.get("failed"):
        return (
            f"no: {side['failed']}/{len(side['reward'])} rollouts failed: {side['first_failure']}"
        )
    return "yes"


def _verdict(ref: dict[str, Any], ours: dict[str, Any]) -> str:
    ref_ok, ours_ok = _runs(ref) == "yes", _runs(ours) == "yes"
    if not ref_ok and not ours_ok:
        return "both fail"
    if not ref_ok:
        return "vfgym only"
    if not ours_ok:
        return "NO (vfgym fails)"
    if not _equal(ours["reward"], ref["reward"]):
        return "NO (reward)"
    for key in set(ref["metrics"]) | set(ours["metrics"]):
        if key == "reward_errors" and key not in ref["metrics"]:
            continue  # vfgym counts reward functions that raised; 0.1.7 has no such metric
        if key not in ours["metrics"] or key not in ref["metrics"]:
            return f"NO ({key} on one side)"
        if not _equal(ours["metrics"][key], ref["metrics"][key]):
            return f"NO ({key})"
    return "yes"


def table_from(files: list[str]) -> int:
    """Print the table of rows saved by earlier runs (VFGYM_PARITY_ROWS), so a long
    comparison can be split over several runs; the last row of an example wins."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for file in files:
        for line in Path(file).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            rows[(row["name"], ",".join(row["labels"]))] = row
    return _print_table([rows[key] for key in sorted(rows)])


def _print_table(rows: list[dict[str, Any]]) -> int:
    print(
        "| example | tags | runs on verifiers 0.1.7.post0 | runs on vfgym | "
        "verifiers mean reward / metrics | vfgym mean reward / metrics | equal |"
    )
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for row in rows:
        ref, ours = row["ref"], row["ours"]
        verdict = _verdict(ref, ours)
        bad += verdict.startswith("NO")
        print(
            f"| {row['name']} | {', '.join(row['labels'])} "
            f"| {_runs(ref)} | {_runs(ours)} "
            f"| {_summary(ref)} | {_summary(ours)} | {verdict} |"
        )
    return 1 if bad else 0
