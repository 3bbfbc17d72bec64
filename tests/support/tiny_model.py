"""A tiny Qwen2-architecture model with random weights, made locally for the vLLM tests.

The real-vLLM tests need a model vLLM can serve in a minute on two CPU cores, and
nothing may come from a model hub. So the model is made here: a byte-level BPE tokenizer
trained with `tokenizers` on text from this checkout (the games' sources and word lists),
the ChatML special tokens and hermes-style `<tool_call>` tokens added, a ChatML chat
template with tools (written below), and a two-layer Qwen2 with seeded random weights.
Its answers are noise; the tests assert the plumbing (token ids, finish reasons, tool
calls, sampling arguments), never quality.

Two halves, because the two live in different virtual environments:

- `model_dir()` / `cache_key()` run in vfgym's own environment (the test fixture): they
  only hash this file, the corpus and the venv's name to name the cache folder, importing
  nothing heavy.
- `make_model(out_dir)` runs under the vLLM venv's Python, which has `torch`,
  `transformers` and `tokenizers`: `python tiny_model.py OUT_DIR`.

The cache folder's name is a hash of this file, of the corpus and of the vLLM venv's
name (its pinned versions), so changing any of them makes a new model, and an unchanged
one is made only once.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Text the tokenizer learns from: every file of the games package and its word lists.
CORPUS_GLOBS = ("games/*.py", "games/data/*.txt")

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>")

#: Small enough for a start in seconds and a few ms per token; a head size of 64 is one
#: vLLM's CPU attention supports.
VOCAB_SIZE = 2048
HIDDEN_SIZE = 128
HEADS = 2
KV_HEADS = 1
LAYERS = 2
INTERMEDIATE_SIZE = 256
MAX_POSITIONS = 4096
SEED = 1234

#: ChatML with hermes-style tools: the tools' JSON signatures in the system turn, each
#: call as `<tool_call>{"name": ..., "arguments": ...}</tool_call>` in the assistant's
#: turn, and tool results as `<tool_response>` blocks in a user turn (consecutive tool
#: messages share one turn). This is what vLLM's hermes tool parser reads back.
CHAT_TEMPLATE = r"""
{%- set first_is_system = messages and messages[0].role == 'system' -%}
{%- if tools -%}
    {{- '<|im_start|>system\n' -}}
    {%- if first_is_system -%}{{- messages[0].content + '\n\n' -}}{%- endif -%}
    {{- '# Tools\n\nYou may call one or more functions. Their signatures, in JSON, are ' -}}
    {{- 'within <tools></tools>:\n<tools>\n' -}}
    {%- for tool in tools -%}{{- tool | tojson -}}{{- '\n' -}}{%- endfor -%}
    {{- '</tools>\n\nTo call a function, write its name and JSON arguments within ' -}}
    {{- '<tool_call></tool_call>:\n<tool_call>\n' -}}
    {{- '{"name": "<function-name>", "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- elif first_is_system -%}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
    {%- if loop.first and first_is_system -%}
    {%- elif message.role == 'assistant' -%}
        {{- '<|im_start|>assistant\n' -}}
        {%- if message.content -%}{{- message.content -}}{%- endif -%}
        {%- for call in message.tool_calls or [] -%}
            {%- set function = call.function if call.function is defined else call -%}
            {%- if message.content or not loop.first -%}{{- '\n' -}}{%- endif -%}
            {{- '<tool_call>\n{"name": "' + function.name + '", "arguments": ' -}}
            {%- if function.arguments is string -%}{{- function.arguments -}}
            {%- else -%}{{- function.arguments | tojson -}}{%- endif -%}
            {{- '}\n</tool_call>' -}}
        {%- endfor -%}
        {{- '<|im_end|>\n' -}}
    {%- elif message.role == 'tool' -%}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}
            {{- '<|im_start|>user' -}}
        {%- endif -%}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' -}}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}
            {{- '<|im_end|>\n' -}}
        {%- endif -%}
    {%- else -%}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
""".strip()


def corpus_files(root: Path = ROOT) -> list[Path]:
    """The corpus's files, sorted, so the tokenizer and the cache key are reproducible."""
    files = sorted({path for pattern in CORPUS_GLOBS for path in root.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no corpus files match {CORPUS_GLOBS} under {root}")
    return files


def cache_key(toolchain: str = "", root: Path = ROOT) -> str:
    """A hash of this file, the corpus and `toolchain` (the name of the venv that makes the
    model, which carries the tokenizers/transformers versions): any of them changing makes
    a new model."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(toolchain.encode())
    for path in corpus_files(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def model_dir(cache_root: Path, toolchain: str = "") -> Path:
    """Where the model for this making code and toolchain lives (made or not)."""
    return cache_root / f"tiny-qwen2-{cache_key(toolchain)}"


def _train_tokenizer(out_dir: Path) -> int:
    """Train the byte-level BPE tokenizer, save it for transformers; return its vocab size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(path) for path in corpus_files()], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<tool_call>", "</tool_call>"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(out_dir)
    return len(fast)


def make_model(out_dir: Path) -> None:
    """Make the tokenizer and the seeded random Qwen2 in `out_dir` (needs torch, transformers)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = _train_tokenizer(out_dir)
    ids = _special_ids(out_dir)
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        torch_dtype="float32",
    )
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out_dir, safe_serialization=True)
    generation = GenerationConfig(eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    generation.save_pretrained(out_dir)


def _special_ids(out_dir: Path) -> dict[str, int]:
    """The ids the saved tokenizer gives its special tokens."""
    with open(out_dir / "tokenizer.json") as f:
        added = json.load(f)["added_tokens"]
    return {token["content"]: token["id"] for token in added}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tiny_model.py OUT_DIR  (under the vLLM venv's Python)")
    make_model(Path(sys.argv[1]))
