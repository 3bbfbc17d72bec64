"""`MathRubric`: reward 1.0 when the model's boxed answer is mathematically equal to
the reference, checked by `math-verify` as verifiers 0.1.x did (extra `vfgym[math]`).

Equality is symbolic, not textual: `\\frac{1}{2}`, `0.5` and `1/2` all match.
"""

from __future__ import annotations

import threading
from typing import Any

from vfgym.parsers.parser import Parser
from vfgym.parsers.think_parser import MaybeThinkParser
from vfgym.rubrics.rubric import Rubric
from vfgym.types import Messages, RewardFunc
from vfgym.utils.data_utils import extract_boxed_answer

#: Seconds math-verify may spend parsing or comparing one answer (as in 0.1.x).
MATH_VERIFY_TIMEOUT = 5


def _math_verify() -> Any:
    try:
        import math_verify
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "MathRubric compares answers with the math-verify package: "
            "pip install 'vfgym[math]' (or pip install math-verify)",
            name=exc.name,
        ) from exc
    return math_verify


class MathRubric(Rubric):
    """A rubric whose reward `correct_answer_reward_func` is 1.0 when the parsed answer
    equals `answer` under math-verify, else 0.0 (a parse failure or a timeout is 0.0).

    The default parser reads the last `\\boxed{...}` after any think block, so a
    prompt that asks for a boxed answer needs nothing else.
    """

    def __init__(
        self,
        funcs: list[RewardFunc] | None = None,
        weights: list[float] | None = None,
        parser: Parser | None = None,
        **kwargs: Any,
    ) -> None:
        self._math_verify = _math_verify()  # fail at construction, not on the first score
        super().__init__(
            funcs=funcs,
            weights=weights,
            parser=parser or MaybeThinkParser(extract_fn=extract_boxed_answer),
            **kwargs,
        )
        self.add_reward_func(self.correct_answer_reward_func)

    def correct_answer_reward_func(
        self, parser: Parser, completion: Messages, answer: str, **kwargs: Any
    ) -> float:
        """1.0 when the model's answer and `answer` are the same mathematical object."""
        # math-verify's timeouts use SIGALRM, which exists only on the main thread; a
        # reward offloaded to a worker thread runs without them (and never hangs the
        # loop: the offloader's own call timeout still applies).
        timeout = (
            MATH_VERIFY_TIMEOUT if threading.current_thread() is threading.main_thread() else None
        )
        math_verify = self._math_verify
        try:
            response = parser.parse_answer(completion) or ""
            if response == "":
                return 0.0
            gold = math_verify.parse(f"\\boxed{{{answer}}}", parsing_timeout=timeout)
            given = math_verify.parse(f"\\boxed{{{response}}}", parsing_timeout=timeout)
            return 1.0 if math_verify.verify(gold, given, timeout_seconds=timeout) else 0.0
        except Exception:  # an unparsable answer is a wrong answer, as in 0.1.x
            return 0.0
