"""A tiny local policy for the TRL tests: tests/support/tiny_model.py's random Qwen2,
warmed up with a few supervised steps so it plays a move or calls a tool.

A random-weight model never writes a valid move or tool call, so every rollout would
end the same way, every reward would be equal and GRPO would have nothing to learn
from. A hundred steps of cross-entropy on the answer format (seconds on a CPU) make
its samples take the game's and the tool's shape while still varying, so rewards
differ within a group and the training steps move the weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REQUIRE = os.environ.get("VFGYM_REQUIRE_TRL") == "1"
HOW = "install it with: bash .ci/setup-trl  (torch==2.13.0, then pip install -e '.[trl]')"


def require_trl() -> None:
    """Skip (or fail, with VFGYM_REQUIRE_TRL=1) when torch, transformers or TRL is missing."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:
        if REQUIRE:
            pytest.fail(f"VFGYM_REQUIRE_TRL=1 but {exc}; {HOW}", pytrace=False)
        pytest.skip(f"TRL integration tests need the trl extra ({exc}); {HOW}")


def load_tiny(out_dir: Path) -> tuple[Any, Any]:
    """Make tiny_model's tokenizer and seeded random Qwen2 in `out_dir`; load both."""
    import tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (out_dir / "config.json").exists():
        tiny_model.make_model(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype="float32")
    return model, tokenizer


def warm_up(
    model: Any,
    tokenizer: Any,
    examples: list[tuple[list[dict[str, Any]], dict[str, Any]]],
    tools: Any = None,
    *,
    steps: int = 120,
    lr: float = 3e-3,
    seed: int = 0,
) -> float:
    """Train `model` to answer each example's messages with its assistant message;
    returns the last loss. Only the assistant message's ids are trained on."""
    import torch

    from vfgym.training.alignment import chat_ids

    torch.manual_seed(seed)
    rows = []
    for messages, answer in examples:
        prompt = chat_ids(tokenizer, messages, tools, True)
        full = chat_ids(tokenizer, [*messages, answer], tools, False)
        assert full[: len(prompt)] == prompt, "the template is not prefix-stable"
        rows.append((full, len(prompt)))
    width = max(len(full) for full, _ in rows)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), width), pad)
    labels = torch.full((len(rows), width), -100)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (full, start) in enumerate(rows):
        ids[i, : len(full)] = torch.tensor(full)
        labels[i, start : len(full)] = torch.tensor(full[start:])
        attention[i, : len(full)] = 1
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        optimizer.step()
    return float(loss.item())


def completion_logprobs(
    model: Any, prompt_ids: list[int], completion_ids: list[int]
) -> list[float]:
    """Each completion id's logprob under `model`'s current weights (temperature 1)."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([[*prompt_ids, *completion_ids]])
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        picked = logprobs.gather(-1, torch.tensor(completion_ids).unsqueeze(-1)).squeeze(-1)
    return [float(x) for x in picked]


def warmed_policy(
    model_dir: Path,
    examples: list[tuple[list[dict[str, Any]], dict[str, Any]]],
    tools: Any = None,
    **options: Any,
) -> tuple[Any, Any]:
    """The tiny model warmed up on `examples` (see `warm_up`), cached beside `model_dir`
    under a hash of the examples, tools and options, so a rerun loads it in a second."""
    import hashlib
    import json
    import shutil

    from transformers import AutoModelForCausalLM

    key = json.dumps([examples, tools, sorted(options.items())], sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    target = model_dir.with_name(f"{model_dir.name}-warm-{digest}")
    model, tokenizer = load_tiny(model_dir)
    if (target / "config.json").exists():
        model = AutoModelForCausalLM.from_pretrained(target, dtype="float32")
        return model, tokenizer
    warm_up(model, tokenizer, examples, tools, **options)
    scratch = target.with_name(target.name + f".making-{os.getpid()}")
    try:
        model.save_pretrained(scratch)
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return model, tokenizer
