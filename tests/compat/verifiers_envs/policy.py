"""The scripted model the verifiers-style environments here are run against.

One function answers every environment (and the judge), deciding from the text it is
shown; some answers are deliberately wrong or badly formatted, so rewards and
format scores take several values. Plain Python, importable by vfgym's loopback
server in the tests and in benchmarks/verifiers_parity.py.
"""

from __future__ import annotations

import json
import re
from typing import Any


def _text(message: Any) -> str:
    return str(message.get("content") or "") if isinstance(message, dict) else str(message)


def _judge(prompt: str) -> str:
    blocks = re.findall(r"```\n(.*?)\n```", prompt, re.DOTALL)
    answer, response = (blocks[1], blocks[2]) if len(blocks) >= 3 else ("", "")
    return "yes" if response.strip().lower() == answer.strip().lower() else "no"


def _countdown(messages: list[dict[str, Any]]) -> str:
    start = int(re.search(r"from (\d+)", _text(messages[1])).group(1))
    said = sum(1 for m in messages if m.get("role") == "assistant")
    number = start - said - 1
    if start == 5 and said == 1:
        return "OK"
    if start == 4 and said == 0:
        return f"<answer>\n{number}\n</answer>"
    return f"<think>\ncounting\n</think>\n<answer>\n{number}\n</answer>"


def _lookup(messages: list[dict[str, Any]]) -> Any:
    if messages[-1].get("role") == "tool":
        return f"The capital is {_text(messages[-1])}."
    country = re.search(r"capital of (\w+)", _text(messages[-1])).group(1)
    if country == "Kenya":
        return "Nairobi, I believe."
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "capital_of", "arguments": json.dumps({"country": country})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


_MATH = {
    "Half of one?": "<think>\nhalve it\n</think>\nSo \\boxed{0.5}",
    "Two squared?": "<think>\n2*2\n</think>\n\\boxed{4}",
    "A third of nine?": "\\boxed{3}",
}


#: The quiz's answers, one of them wrong (a plum is not red).
_QUIZ = {
    "sky": "blue",
    "grass": "green",
    "banana": "yellow",
    "plum": "red",
    "lime": "green",
    "snow": "white",
}


def _quiz(last: str) -> str:
    thing = re.search(r"Colour of (?:the |a )?(\w+)\?", last).group(1)
    return _QUIZ[thing]


def respond(prompt: Any) -> Any:
    """The model's turn for a chat (a list of messages) or a text completion (a str)."""
    if isinstance(prompt, str):
        word = re.search(r"after (\w+) is", prompt).group(1)
        return {"one": " two", "red": " blue"}.get(word, " ?")
    first, last = _text(prompt[0]), _text(prompt[-1])
    if last.count("```") >= 6:  # a judge's prompt: question, reference, response
        return _judge(last)
    if first.startswith("Quiz on"):
        return _quiz(last)
    if first.startswith("Count down"):
        return _countdown(prompt)
    if first.startswith("Use the capital_of tool"):
        return _lookup(prompt)
    if last in _MATH:
        return _MATH[last]
    if match := re.search(r"Add (\d+) and (\d+)", last):
        a, b = int(match.group(1)), int(match.group(2))
        total = a + b if a % 3 != 1 else a * b
        return f"Adding gives \\boxed{{{total}}}."
    if match := re.search(r"colour number (\d+)", last):
        return "red" if match.group(1) == "1" else "blue"
    return "I do not know."
