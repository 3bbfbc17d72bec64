"""A Qwen-style chat template over the byte vocabulary, and the feedback game the token-
processing tests play with it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import vfgym as vf
from vfgym.inference.server import ByteTokenizer
from vfgym.inference.server.tokenizer import VOCAB_SIZE, content_text, render_tool_calls

IM_START, IM_END = 8, 9  # reserved ids of the byte vocabulary


SPECIAL = {"<|im_start|>": IM_START, "<|im_end|>": IM_END}


BYTES = ByteTokenizer()


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, answer) of an assistant text, split as Qwen3's template splits it."""
    if "</think>" not in text:
        return "", text
    answer = text.split("</think>")[-1].lstrip("\n")
    reasoning = text.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
    return reasoning, answer


def last_query_index(messages: Sequence[dict[str, Any]]) -> int:
    """The last user message that is not a wrapped tool response (Qwen3's `last_query_index`)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        text = content_text(message.get("content"))
        wrapped = text.startswith("<tool_response>") and text.endswith("</tool_response>")
        if message["role"] == "user" and not wrapped:
            return index
    return len(messages) - 1


def render_assistant(message: dict[str, Any], keep_reasoning: bool) -> str:
    reasoning, answer = split_think(content_text(message.get("content")))
    head = "<|im_start|>assistant\n"
    if keep_reasoning:
        head += "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n"
        answer = answer.lstrip("\n")
    return head + answer + render_tool_calls(message.get("tool_calls")) + "<|im_end|>\n"


def render_qwen_style(
    messages: Sequence[dict[str, Any]], tools: Any, add_generation_prompt: bool
) -> str:
    """Qwen3's chat template, in Python (tool calls in the byte template's notation)."""
    out: list[str] = []
    if tools:
        system = ""
        if messages and messages[0]["role"] == "system":
            system = content_text(messages[0].get("content")) + "\n\n"
        listing = "".join("\n" + json.dumps(t, sort_keys=True) for t in tools)
        out.append(f"<|im_start|>system\n{system}# Tools\n<tools>{listing}\n</tools><|im_end|>\n")
    elif messages and messages[0]["role"] == "system":
        out.append(f"<|im_start|>system\n{content_text(messages[0].get('content'))}<|im_end|>\n")
    last_query = last_query_index(messages)
    for i, message in enumerate(messages):
        role = message["role"]
        text = content_text(message.get("content"))
        if role == "user" or (role == "system" and i > 0):
            out.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
        elif role == "assistant":
            reasoning, _ = split_think(text)
            is_last = i == len(messages) - 1
            out.append(render_assistant(message, i > last_query and (is_last or bool(reasoning))))
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                out.append("<|im_start|>user")
            out.append(f"\n<tool_response>\n{text}\n</tool_response>")
            if i == len(messages) - 1 or messages[i + 1]["role"] != "tool":
                out.append("<|im_end|>\n")
        elif role != "system":
            raise ValueError(f"message {i} has role {role!r}, which this template does not know")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


class QwenStyleTokenizer:
    """Byte-level ids plus `<|im_start|>`/`<|im_end|>`, rendered with `render_qwen_style`."""

    eos_token = "<|im_end|>"
    eos_token_id = IM_END
    vocab_size = VOCAB_SIZE

    def text_ids(self, text: str) -> list[int]:
        ids: list[int] = []
        pieces = text.replace("<|im_start|>", "\0S\0").replace("<|im_end|>", "\0E\0").split("\0")
        for piece in pieces:
            if piece in ("S", "E"):
                ids.append(IM_START if piece == "S" else IM_END)
            elif piece:
                ids.extend(BYTES.encode(piece, split_special_tokens=True))
        return ids

    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        return self.text_ids(text)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False, **_: Any) -> str:
        names = {v: k for k, v in SPECIAL.items()}
        out: list[str] = []
        run: list[int] = []
        for tid in ids:
            if tid in names:
                out.append(BYTES.decode(run))
                run = []
                out.append("" if skip_special_tokens else names[tid])
            else:
                run.append(tid)
        out.append(BYTES.decode(run))
        return "".join(out)

    def apply_chat_template(
        self,
        conversation: Sequence[dict[str, Any]],
        tools: Any = None,
        *,
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        **_: Any,
    ) -> list[int] | str:
        text = self.render(conversation, tools, add_generation_prompt)
        return self.text_ids(text) if tokenize else text

    def render(
        self, conversation: Sequence[dict[str, Any]], tools: Any, add_generation_prompt: bool
    ) -> str:
        """The template's text; a variant template overrides this alone."""
        return render_qwen_style(conversation, tools, add_generation_prompt)


class SamplingQwenStyleTokenizer(QwenStyleTokenizer):
    """The server's side of the same vocabulary: a reply ends with `<|im_end|>`.

    A real model ends its turn by sampling the end-of-turn token, and vLLM returns
    it in `token_ids` while leaving it out of the text. The loopback server turns
    a reply's text into ids with `encode`, so here `encode` adds that token.
    """

    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        return [*self.text_ids(text), IM_END]


MERGED = 10  # a reserved id of the byte vocabulary, standing for the two bytes "ve"


V, E = (BYTES.encode(c)[0] for c in "ve")


def merge_ve(ids: list[int]) -> list[int]:
    """Byte ids with every "v" "e" pair merged into MERGED, as a BPE vocabulary would."""
    out: list[int] = []
    for tid in ids:
        if out and out[-1] == V and tid == E:
            out[-1] = MERGED
        else:
            out.append(tid)
    return out


class MergingQwenTokenizer(QwenStyleTokenizer):
    """Qwen's template over a vocabulary whose canonical encoding merges "ve"."""

    def text_ids(self, text: str) -> list[int]:
        return merge_ve(super().text_ids(text))

    def decode(self, ids: Any, skip_special_tokens: bool = False, **_: Any) -> str:
        spelled: list[int] = []
        for tid in ids:
            spelled += [V, E] if tid == MERGED else [tid]
        return super().decode(spelled, skip_special_tokens=skip_special_tokens)


class UnmergedSamplingTokenizer(MergingQwenTokenizer):
    """The server's side: prompts are rendered canonically, but the model samples "v" and
    "e" as two tokens (a non-canonical tokenization, which sampling produces) and ends
    its turn with `<|im_end|>`."""

    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        return [*QwenStyleTokenizer.text_ids(self, text), IM_END]


class FeedbackEnv(vf.MultiTurnEnv):
    """Answers every model turn, the last one too, with a user message (a game's feedback)."""

    def env_response(self, messages: Any, state: vf.State, **kwargs: Any):
        return [{"role": "user", "content": feedback(state["turn"])}], state


def feedback(turn: int) -> str:
    """The environment's reply to model turn `turn` (1-based); it quotes the model's answer."""
    return f"move {turn - 1} noted"


def thinking_policy(messages: list[dict[str, Any]]) -> str:
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return f"<think>\nplan {turn}\n</think>\n\nmove {turn}"


def plain_policy(messages: list[dict[str, Any]]) -> str:
    return f"move {sum(1 for m in messages if m['role'] == 'assistant')}"
