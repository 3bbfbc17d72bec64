"""Fixtures of the TRL integration tests: the tiny local model, made once and cached.

Every test here needs torch, transformers and TRL (`bash .ci/setup-trl`). Without them
the tests skip saying how to install them, unless VFGYM_REQUIRE_TRL=1 (CI), where they
fail instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_policy import require_trl


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
