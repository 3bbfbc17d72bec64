"""Sampling from a live `transformers` causal LM, keeping every sampled id and its logprob.

The trainer's model generates here between optimizer steps, so every rollout is drawn
from the current weights. The logprob of each token is taken from the very
distribution it was sampled from (logits divided by the temperature, then top-p),
which is what the trainer recomputes for the same ids: on-policy, the two agree.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Sample:
    """What one generation produced: the sampled ids (the end-of-turn id included when
    the model sampled it), one logprob per id, and why it stopped ("stop" or "length")."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: temperature 0 is greedy (its logprobs are the model's own)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0


def _distribution(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """Log-probabilities of the next token as the sample is drawn from them."""
    scaled = logits.float()
    if settings.temperature > 0:
        scaled = scaled / settings.temperature
    logprobs = torch.log_softmax(scaled, dim=-1)
    if settings.top_p < 1.0:
        sorted_lp, order = torch.sort(logprobs, descending=True)
        cumulative = sorted_lp.exp().cumsum(dim=-1)
        # keep the smallest prefix whose mass reaches top_p (always the first token)
        drop_sorted = cumulative - sorted_lp.exp() >= settings.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logprobs = torch.log_softmax(logprobs.masked_fill(drop, float("-inf")), dim=-1)
    return logprobs


class ModelSampler:
    """Generates from `model` one request at a time (a lock guards the model).

    `stop_ids` end a turn (the tokenizer's end-of-turn ids); the sampled stop id is
    part of the returned ids, as vLLM returns it. `seed` seeds this sampler's own
    random generator, so two runs with the same seed and weights sample alike.
    """

    def __init__(self, model: Any, stop_ids: Sequence[int], *, seed: int = 0) -> None:
        if not stop_ids:
            raise ValueError(
                "the tokenizer names no end-of-turn token (eos_token_id); set one on the "
                "tokenizer or the model's generation_config so generation can stop"
            )
        self.model = model
        self.stop_ids = frozenset(int(i) for i in stop_ids)
        self._lock = threading.Lock()
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(seed)
        # transformers renamed `past_key_values` to `cache` (5.2x deprecates the old name)
        params = inspect.signature(model.forward).parameters
        self._cache_name = "cache" if "cache" in params else "past_key_values"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def sample(self, prompt_ids: Sequence[int], settings: SamplingSettings) -> Sample:
        """Sample up to `settings.max_tokens` ids after `prompt_ids` with the model's
        current weights (no gradients, KV cache kept across steps)."""
        if not prompt_ids:
            raise ValueError("the prompt has no token ids; a model needs at least one to go on")
        with self._lock, torch.no_grad():
            return self._sample(list(prompt_ids), settings)

    def _sample(self, prompt_ids: list[int], settings: SamplingSettings) -> Sample:
        device = self.device
        inputs = torch.tensor([prompt_ids], device=device)
        past: Any = None
        ids: list[int] = []
        logprobs: list[float] = []
        for _ in range(settings.max_tokens):
            out = self.model(input_ids=inputs, use_cache=True, **{self._cache_name: past})
            past = out[self._cache_name]
            dist = _distribution(out.logits[0, -1], settings)
            if settings.temperature > 0:
                token = int(
                    torch.multinomial(dist.exp().cpu(), 1, generator=self._generator).item()
                )
            else:
                token = int(torch.argmax(dist).item())
            ids.append(token)
            logprobs.append(float(dist[token].item()))
            if token in self.stop_ids:
                return Sample(ids, logprobs, "stop")
            inputs = torch.tensor([[token]], device=device)
        return Sample(ids, logprobs, "length")
