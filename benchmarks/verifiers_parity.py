"""Rewards of the same verifiers-style environments on vfgym and on verifiers 0.1.7.post0.

Not part of the test suite: it installs the real verifiers 0.1.7.post0 (and
math-verify, which its MathRubric needs) into a venv of its own under
~/.cache/vfgym-bench (override with VFGYM_BENCH_CACHE), then runs each environment
of tests/compat/verifiers_envs/ unmodified in both interpreters, against one
scripted model served by vfgym's loopback server, and prints the mean reward and
metrics side by side, with whether every rollout's value agrees.

    .venv/bin/python benchmarks/verifiers_parity.py

With `--examples`, it runs instead the example environments of a verifiers checkout
(`environments/<name>/<name>.py`; give one or more `LABEL=PATH/environments`, e.g.
the same repository at two tags), unmodified, with the hub data sets replaced by the
small synthetic ones of benchmarks/core/verifiers_examples.py and its scripted model,
and prints one row per environment: whether it runs on each side, the mean reward
and metrics on both, and whether every rollout's values agree. Examples whose file
is the same at several labels run once.

    git -C VERIFIERS worktree add /tmp/vf-0.1.7 v0.1.7.post0   # or git archive
    .venv/bin/python benchmarks/verifiers_parity.py \
        --examples v0.1.7.post0=/tmp/vf-0.1.7/environments v0.1.6.post0=/tmp/vf-0.1.6/environments
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ENVS = REPO / "tests" / "compat" / "verifiers_envs"
sys.path.insert(0, str(HERE / "core"))

from reference_venv import cache_root, ensure_reference_venv  # noqa: E402

#: module -> arguments of its load_environment ("{base_url}" is filled in).
ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "vf_boxed_sums": {},
    "vf_xml_countdown": {},
    "vf_tool_lookup": {},
    "vf_judged_group": {"judge_base_url": "{base_url}"},
    "vf_math_boxed": {},
    "vf_continuation": {},
    "vf_quiz_session": {"judge_base_url": "{base_url}"},
}

#: Run inside each interpreter: load one environment, evaluate it, print the results.
RUNNER = """
import asyncio, json, sys
side, module_name, base_url, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if side == "vfgym":
    from vfgym.compat import install_verifiers_alias
    install_verifiers_alias()
import importlib
from openai import AsyncOpenAI
module = importlib.import_module(module_name)
env = module.load_environment(**args)
client = AsyncOpenAI(base_url=base_url, api_key="local", max_retries=0)
results = asyncio.run(env.evaluate(client, "scripted", num_examples=-1, rollouts_per_example=1))
print(json.dumps({"reward": list(results.reward),
                  "metrics": {k: list(v) for k, v in results.metrics.items()}}))
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="environment modules to run (default: all)")
    parser.add_argument(
        "--examples",
        nargs="+",
        metavar="LABEL=DIR",
        help="run the example environments of a verifiers checkout's environments/ folder",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="with --examples: examples run at a time"
    )
    parser.add_argument(
        "--table-from",
        nargs="+",
        metavar="ROWS",
        help="print the --examples table from rows saved with VFGYM_PARITY_ROWS=FILE",
    )
    return parser.parse_args(argv)


def reference_python() -> Path:
    """verifiers 0.1.7.post0's venv, with math-verify added for its MathRubric."""
    python = ensure_reference_venv(root=cache_root() / "verifiers-0.1.7.post0-parity")
    has = subprocess.run([str(python), "-c", "import math_verify"], capture_output=True)
    if has.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "math-verify"], check=True)
    return python


def run_side(python: Path, side: str, site: Path, module: str, base_url: str) -> dict[str, Any]:
    args = {k: v.format(base_url=base_url) for k, v in ENVIRONMENTS[module].items()}
    done = subprocess.run(
        [str(python), str(site / "_parity_runner.py"), side, module, base_url, json.dumps(args)],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _same(a: list[float], b: list[float]) -> bool:
    def norm(x: float | None) -> float:
        return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else x

    return len(a) == len(b) and all(
        math.isclose(norm(x), norm(y), abs_tol=1e-12) for x, y in zip(a, b, strict=True)
    )


def _mean(values: list[float]) -> float:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    if options.table_from:
        from verifiers_examples_run import table_from

        return table_from(options.table_from)
    if options.examples:
        from verifiers_examples_run import run_examples

        return run_examples(options.examples, options.only, reference_python(), options.jobs)
    sys.path.insert(0, str(ENVS))
    from policy import respond  # the scripted model both sides talk to

    from vfgym.inference.server import ModelServer

    pythons = {"vfgym": Path(sys.executable), "verifiers 0.1.7.post0": reference_python()}
    modules = options.only or list(ENVIRONMENTS)
    rows: list[tuple[str, str, str, str, str]] = []
    with (
        tempfile.TemporaryDirectory(prefix="vfgym-parity-") as tmp,
        ModelServer(respond).running() as server,
    ):
        site = Path(tmp)
        for source in ENVS.glob("*.py"):
            shutil.copy(source, site / source.name)
        (site / "_parity_runner.py").write_text(RUNNER, encoding="utf-8")
        for module in modules:
            vfgym_side = run_side(pythons["vfgym"], "vfgym", site, module, server.base_url)
            ref_side = run_side(
                pythons["verifiers 0.1.7.post0"], "verifiers", site, module, server.base_url
            )
            for side in (vfgym_side, ref_side):
                if "error" in side:
                    rows.append((module, "ERROR", "", "", side["error"][:60]))
            if "error" in vfgym_side or "error" in ref_side:
                continue
            names = ["reward", *sorted(set(vfgym_side["metrics"]) | set(ref_side["metrics"]))]
            for name in names:
                ours = vfgym_side["reward"] if name == "reward" else vfgym_side["metrics"].get(name)
                theirs = ref_side["reward"] if name == "reward" else ref_side["metrics"].get(name)
                if ours is None or theirs is None:
                    # vfgym's `reward_errors` counts reward functions that raised
                    note = "vfgym only" if name == "reward_errors" else "only one side"
                    rows.append((module, name, _fmt(ours), _fmt(theirs), note))
                    continue
                rows.append(
                    (module, name, _fmt(ours), _fmt(theirs), "yes" if _same(ours, theirs) else "NO")
                )
    header = ("environment", "reward / metric", "vfgym mean", "verifiers mean", "all equal")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    print(
        "\n(all equal: every rollout's value agrees; a metric of another EnvGroup member is "
        "NaN on vfgym and 0.0 on 0.1.7, counted as equal, which moves only the means)"
    )
    return 0 if all(r[4] in ("yes", "vfgym only") for r in rows) else 1


def _fmt(values: list[float] | None) -> str:
    return "-" if values is None else f"{_mean(values):.4f}"


if __name__ == "__main__":
    raise SystemExit(main())
