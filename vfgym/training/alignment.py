"""Aligning a template-rendered conversation with the ids the model sampled.

Split from `processing.py` (whose module docstring explains the approach): given
the conversation up to a model turn and the ids sampled for it, find the ids the
chat template adds after the turn and before the next model turn, which are the
environment's. A template that rewrites earlier turns is handled by probing it
with two different turn endings; one that cannot be aligned raises
`TemplateAlignmentError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vfgym.errors import TemplateAlignmentError
from vfgym.inference.tokens.render import jinja_template, with_parsed_arguments
from vfgym.training.tokenizers import Tokenizer


def chat_ids(tokenizer: Tokenizer, messages: list[Any], tools: Any, generation: bool) -> list[int]:
    """The template's ids of `messages`, rendered as the server renders them: a Hugging
    Face tokenizer's Jinja template gets tool-call arguments parsed to objects, as vLLM
    gives its template (the server's own /tokenize does that itself)."""
    if jinja_template(tokenizer):
        messages = with_parsed_arguments(messages)
    ids = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=True, add_generation_prompt=generation
    )
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


_PROBES = ("x", "y")  # two texts a template renders alike apart from the text itself
_GLUE_WINDOW = 8  # at most this many template ids follow a turn's last sampled id
_GLUE_EVIDENCE = 4  # sampled ids that must line up before the glue is trusted


def _common_suffix(a: list[int], b: list[int], a_end: int | None = None) -> int:
    """How many ids `a[:a_end]` and `b` end with in common."""
    a_end = len(a) if a_end is None else a_end
    n = 0
    limit = min(a_end, len(b))
    while n < limit and a[a_end - 1 - n] == b[-1 - n]:
        n += 1
    return n


def _probed(message: Any, probe: str) -> Any:
    """`message` with `probe` added to the end of its text."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": probe}]}
    return {**message, "content": (content or "") + probe}


def _after_text(
    tokenizer: Tokenizer, conversation: list[Any], turn: int, tools: Any, generation: bool
) -> list[int]:
    """The ids the template renders after the text of message `turn`, to the end.

    Found by rendering the conversation twice with different text appended to
    that message: whatever both renderings end with comes after the text
    (tool calls, the end-of-turn token, and everything later).
    """
    first, second = (
        chat_ids(
            tokenizer,
            [*conversation[:turn], _probed(conversation[turn], probe), *conversation[turn + 1 :]],
            tools,
            generation,
        )
        for probe in _PROBES
    )
    n = _common_suffix(first, second)
    return first[len(first) - n :]


def _glue(before: list[int], generated: list[int], closing: Callable[[], list[int]]) -> list[int]:
    """The ids the template renders after the model's last sampled id, at the end of
    `before` (a rendering that ends with that model turn).

    A template often closes a turn with more than the model sampled: a newline
    after the end-of-turn token (ChatML, Qwen), or the end-of-turn token itself
    when the turn was cut by `max_tokens`. Those ids were never generated, so they
    belong to the environment's side. They are found by lining the end of the
    model's ids up with the end of the rendering. When that fails (the model
    sampled its text in another tokenization than the template's, or the template
    rewrote the end of the turn), the model's ids are lined up with `closing()`,
    the ids the template puts after the turn's text alone.
    """
    if not generated:
        return []
    best_end, best = _line_up(before, generated)
    if best >= min(len(generated), _GLUE_EVIDENCE):
        return before[best_end:]
    after_text = closing()
    best_end, best = _line_up(after_text, generated)
    return after_text[best_end:] if best else after_text


def _line_up(rendered: list[int], generated: list[int]) -> tuple[int, int]:
    """Where in the last `_GLUE_WINDOW` ids of `rendered` the end of `generated` fits
    best: (end, matched ids), the latest end winning a tie."""
    best_end, best = len(rendered), 0
    for end in range(len(rendered), max(len(rendered) - _GLUE_WINDOW, 0) - 1, -1):
        matched = _common_suffix(rendered, generated[-_GLUE_EVIDENCE:], end)
        if matched > best:
            best_end, best = end, matched
    return best_end, best


def template_ids(
    tokenizer: Tokenizer,
    conversation: list[Any],
    added: int,
    tools: Any,
    generation: bool,
    seq: list[int],
    generated: list[int] | None,
) -> list[int]:
    """The ids the chat template puts after `seq` once the last `added` messages
    (and, with `generation`, the next assistant header) join the conversation.

    `generated` is what the model sampled for the message before them (None when
    that message is not the model's). See the module docstring for why the
    model's ids stay as sampled when the template renders its turn differently.
    """
    after = chat_ids(tokenizer, conversation, tools, generation)
    if after[: len(seq)] == seq:  # the template extends what the server saw
        return after[len(seq) :]
    turn = len(conversation) - added - 1
    before = chat_ids(tokenizer, conversation[: turn + 1], tools, False)

    rendered: list[list[int]] = []  # rendered once, for the glue and the alignment check

    def closing() -> list[int]:
        if not rendered:
            rendered.append(_after_text(tokenizer, conversation[: turn + 1], turn, tools, False))
        return rendered[0]

    glue = _glue(before, generated, closing) if generated is not None else []
    if after[: len(before)] == before:  # only the model's own turn reads differently
        return glue + after[len(before) :]
    if generated is None:
        return after[len(before) :]
    # The template rewrites the model's turn (or an earlier one) once the
    # environment answers, e.g. Qwen3 dropping reasoning before a user message:
    # place the environment's ids by what follows the turn's text instead.
    tail = _after_text(tokenizer, conversation, turn, tools, generation)
    closed = closing()
    if tail[: len(closed)] != closed:
        raise TemplateAlignmentError(
            f"the chat template ends the model's turn (message {turn}) differently once the "
            "messages after it are added, so vfgym cannot tell where the environment's tokens "
            "start; pass a tokenizer whose chat template closes an assistant turn the same way "
            "whether or not it is the last message"
        )
    return glue + tail[len(closed) :]
