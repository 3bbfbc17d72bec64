"""Fixtures of the TRL integration tests: the tiny local model, made once and cached.

Every test here needs torch, transformers and TRL (`bash .ci/setup-trl`). Without them
the tests skip saying how to install them, unless VFGYM_REQUIRE_TRL=1 (CI), where they
fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_policy import require_trl

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def no_tests_folder_as_vllm() -> Iterator[None]:
    """Keep tests/vllm from passing for the vLLM package.

    The suite runs with tests/ on sys.path (its top conftest's folder), so
    `find_spec("vllm")` finds the tests/vllm folder as a namespace package. TRL then
    believes vLLM is installed and fails reading its version ("N/A"). A None entry in
    sys.modules makes `find_spec` answer None for this session's TRL imports."""
    spec = None
    if "vllm" not in sys.modules:
        try:
            spec = importlib.util.find_spec("vllm")
        except (ImportError, ValueError):
            spec = None
    locations = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    shadowed = (
        spec is not None and spec.origin is None and all(TESTS in p.parents for p in locations)
    )
    if shadowed:
        sys.modules["vllm"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if shadowed and sys.modules.get("vllm", 0) is None:
            del sys.modules["vllm"]


@pytest.fixture(scope="session")
def torch_one_thread() -> Iterator[None]:
    """One torch thread: on a shared two-core machine a second thread makes every
    step several times slower, not faster."""
    require_trl()
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(torch_one_thread: None) -> Path:
    """tests/support/tiny_model.py's tokenizer and random Qwen2, made once per version
    of its making code and of transformers/tokenizers, under ~/.cache/vfgym-ci."""
    import tiny_model
    import tokenizers
    import transformers

    cache = Path(
        os.environ.get("VFGYM_TRL_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vfgym-ci"
    )
    toolchain = f"trl-tf-{transformers.__version__}-tok-{tokenizers.__version__}"
    target = tiny_model.model_dir(cache, toolchain=toolchain)
    if not (target / "config.json").exists():
        scratch = target.with_name(target.name + f".making-{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            tiny_model.make_model(scratch)
            shutil.rmtree(target, ignore_errors=True)
            scratch.rename(target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target
