"""Calculator: arithmetic word problems answered with the help of a calculator tool.

Each problem is a short story with numbers (shopping, sharing, speeds, growth,
areas); its answer is an exact whole number or fraction. The model may call
`calculator(expression)`, a pure-Python evaluator of arithmetic (numbers,
`+ - * / // % **`, parentheses, unary minus) that parses with `ast` and never
runs code; results are exact (`7/3`, not 2.333...). The model answers in
`<answer>...</answer>`; the reward is 1 for the exact value (written as a whole
number, a fraction or a terminating decimal), else 0. Metrics: tool calls used
and format.

Knobs: `difficulty` ("easy", "medium", "hard": the size of the numbers),
`max_turns`. No sandbox needed.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vfgym.games._base import EVAL_OFFSET, check_choice, game_rows
from vfgym.games._tool_task import (
    answer_message,
    check_seed,
    check_turn_limit,
    tool_call_message,
)

from vfgym.envs.tool_env import ToolEnv
from vfgym.parsers import XMLParser
from vfgym.rubrics import Rubric
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/Calculator-v0"
KIND = "tool"
NEEDS_SANDBOX = False

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 1000
MAX_BITS = 4000  # numerators and denominators stay below about 10**1200
#: A literal's exponent past this cannot give a value within MAX_BITS (a 500-character
#: mantissa included); refused before `Fraction` spends minutes computing ten to it.
MAX_LITERAL_EXPONENT = 2000
_EXPONENT = re.compile(r"[eE]([+-]?[\d_]+)$")

SYSTEM_PROMPT = """Solve the arithmetic word problem. You have a calculator tool: call it with an
arithmetic expression (numbers, + - * / // % **, parentheses) and it returns the exact result,
as a whole number or a fraction like 7/3. When you know the answer, reply with it inside
answer tags, as a whole number or a fraction, for example: <answer>42</answer>"""


# ------------------------------------------------------------------ the tool

_BINARY: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: lambda a, b: a % b,
}


def _check_size(value: Fraction) -> Fraction:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise ValueError(f"the result is too large (more than {MAX_BITS} bits); simplify it")
    return value


def _literal(text: str) -> Fraction:
    """The exact value of a decimal literal as written (so 0.1 is one tenth), within the
    size limit."""
    exponent = _EXPONENT.search(text)
    if exponent and abs(int(exponent.group(1))) > MAX_LITERAL_EXPONENT:
        raise ValueError(f"{text[:40]} is too large (more than {MAX_BITS} bits); simplify it")
    value = Fraction(text)
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise ValueError(f"{text[:40]} is too large (more than {MAX_BITS} bits); simplify it")
    return value


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise ValueError("powers need a whole-number exponent, like 2**10")
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponents are limited to {MAX_EXPONENT} in absolute value")
    if base == 0 and exponent < 0:
        raise ValueError("zero cannot be raised to a negative power (division by zero)")
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if bits * abs(int(exponent)) > MAX_BITS:
        raise ValueError(f"the result is too large (more than {MAX_BITS} bits); simplify it")
    return base ** int(exponent)


def _evaluate(node: ast.AST, source: str) -> Fraction:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, source)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"{node.value!r} is not a number; use digits only")
        if isinstance(node.value, int):  # exact already, and 0x1F or 1_000 read as Python does
            return Fraction(node.value)
        return _literal(ast.get_source_segment(source, node) or repr(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise ValueError("^ is not a power here; write powers as 2**10")
        left, right = _evaluate(node.left, source), _evaluate(node.right, source)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        operation = _BINARY.get(type(node.op))
        if operation is None:
            raise ValueError("only + - * / // % ** and parentheses are allowed")
        if right == 0 and isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod):
            raise ValueError("division by zero")
        return _check_size(operation(left, right))
    if isinstance(node, ast.Name):
        raise ValueError(f"unknown name {node.id!r}; use only numbers and operators")
    if isinstance(node, ast.Call):
        raise ValueError("function calls are not allowed; use only numbers and operators")
    raise ValueError("only numbers, + - * / // % **, parentheses and unary minus are allowed")


def format_number(value: Fraction) -> str:
    """A whole number as digits, anything else as a reduced fraction `p/q`."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the result.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "(17 + 5) * 3 / 4".
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError("give an expression such as '(17 + 5) * 3'")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    # The multiplication and division signs people type are read as * and /.
    source = expression.strip().replace("\u00d7", "*").replace("\u00f7", "/")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise ValueError(
            f"could not parse {expression[:60]!r}; write plain arithmetic like '(17 + 5) * 3'"
        ) from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ValueError(f"the expression has more than {MAX_NODES} parts; split it up")
    return format_number(_evaluate(tree, source))


#: A whole part as an answer may write it: plain digits, or digits in groups of three
#: separated by commas ("1,250"). "1,5" is not one: it is 1.5 written with a decimal
#: comma, and read as 15 it would score a wrong answer as right.
_WHOLE = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_ANSWER_NUMBER = re.compile(rf"[-+]?{_WHOLE}(?:\.\d+)?(?:/[-+]?{_WHOLE})?")


def parse_number(text: str | None) -> Fraction | None:
    """The exact value of an answer like '42', '-7/3', '2.5' or '1,250'; None if unreadable."""
    if text is None:
        return None
    cleaned = text.strip().rstrip(".").replace("$", "").replace(" ", "")
    if not _ANSWER_NUMBER.fullmatch(cleaned):
        return None
    try:
        return Fraction(cleaned.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


# ------------------------------------------------------------------ problems


@dataclass(frozen=True)
class Template:
    """A word problem with numbered slots, and the expression that answers it."""

    text: str
    expression: str
    draw: Callable[[random.Random, int], dict[str, int]]

    @property
    def pattern(self) -> re.Pattern[str]:
        parts = re.split(r"\{(\w)\}", self.text)
        regex = "".join(
            f"(?P<{part}>-?\\d+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
        )
        return re.compile(regex)


def _n(rng: random.Random, scale: int, low: int = 2) -> int:
    return rng.randint(low, max(low + 1, scale))


def _draw_coupon(rng: random.Random, s: int) -> dict[str, int]:
    a, b = _n(rng, s), _n(rng, max(3, s // 10))
    return {"a": a, "b": b, "c": rng.randint(1, a * b - 1)}


def _draw_change(rng: random.Random, s: int) -> dict[str, int]:
    a, b, c, d = _n(rng, s), _n(rng, s), _n(rng, 12, 1), _n(rng, 12, 1)
    total = a * c + b * d
    return {"a": a, "b": b, "c": c, "d": d, "e": (total // 100 + 1) * 100}


def _draw_garden(rng: random.Random, s: int) -> dict[str, int]:
    a, b = _n(rng, s, 3), _n(rng, s, 3)
    return {"a": a, "b": b, "c": rng.randint(1, min(a, b) - 1)}


def _draw_savings(rng: random.Random, s: int) -> dict[str, int]:
    c = _n(rng, s)
    return {"a": _n(rng, 10 * s), "b": c + _n(rng, s, 1), "c": c, "d": _n(rng, 24)}


TEMPLATES = (
    Template(
        "Pencils cost {a} cents each. Maya buys {b} pencils and uses a coupon worth {c} cents. "
        "How many cents does she still pay?",
        "{a} * {b} - {c}",
        _draw_coupon,
    ),
    Template(
        "A farmer packs {a} kilograms of apples into crates that hold {b} kilograms each. "
        "How many crates can be filled completely?",
        "{a} // {b}",
        lambda rng, s: {"a": _n(rng, 10 * s, 20), "b": _n(rng, max(3, s // 4), 3)},
    ),
    Template(
        "A baker has {a} eggs and puts them in boxes of {b}. "
        "How many eggs are left over once every full box is packed?",
        "{a} % {b}",
        lambda rng, s: {"a": _n(rng, 10 * s, 20), "b": _n(rng, 24, 5)},
    ),
    Template(
        "{a} litres of juice are shared equally among {b} bottles. "
        "How many litres go into each bottle?",
        "{a} / {b}",
        lambda rng, s: {"a": _n(rng, s), "b": _n(rng, 40, 3)},
    ),
    Template(
        "A train travels {a} kilometres in {b} hours, then {c} kilometres in {d} hours. "
        "What is its average speed over the whole trip, in kilometres per hour?",
        "({a} + {c}) / ({b} + {d})",
        lambda rng, s: {
            "a": _n(rng, 10 * s),
            "b": _n(rng, 9, 1),
            "c": _n(rng, 10 * s),
            "d": _n(rng, 9, 1),
        },
    ),
    Template(
        "A colony of {a} bacteria doubles every hour. How many bacteria are there after {b} hours?",
        "{a} * 2 ** {b}",
        lambda rng, s: {"a": _n(rng, s), "b": _n(rng, 6 + s // 20, 2)},
    ),
    Template(
        "A garden is {a} metres long and {b} metres wide. A square patio with sides of {c} metres "
        "is laid in it. How many square metres are left for plants?",
        "{a} * {b} - {c} ** 2",
        _draw_garden,
    ),
    Template(
        "An account holds {a} dollars. Each month the owner deposits {b} dollars and withdraws {c} "
        "dollars. How many dollars does it hold after {d} months?",
        "{a} + {d} * ({b} - {c})",
        _draw_savings,
    ),
    Template(
        "A recipe for {a} people needs {b} grams of flour. "
        "How many grams of flour are needed for {c} people?",
        "{b} * {c} / {a}",
        lambda rng, s: {"a": _n(rng, 12), "b": _n(rng, 10 * s, 50), "c": _n(rng, 40)},
    ),
    Template(
        "Adult tickets cost {a} dollars and child tickets {b} dollars. A group of {c} adults and "
        "{d} children pays with {e} dollars. How many dollars of change do they get?",
        "{e} - ({a} * {c} + {b} * {d})",
        _draw_change,
    ),
)

SCALES = {"easy": 20, "medium": 200, "hard": 5000}


def generate_item(rng: random.Random, scale: int) -> tuple[str, dict[str, Any], str]:
    template_id = rng.randrange(len(TEMPLATES))
    template = TEMPLATES[template_id]
    numbers = template.draw(rng, scale)
    expression = template.expression.format(**numbers)
    answer = calculator(expression)
    info = {"template": template_id, "numbers": numbers, "expression": expression}
    return template.text.format(**numbers), info, answer


def expression_for(question: str) -> str:
    """The expression that answers a generated problem, read from its text alone."""
    for template in TEMPLATES:
        found = template.pattern.search(question)
        if found:
            return template.expression.format(**{k: int(v) for k, v in found.groupdict().items()})
    raise ValueError("the question is not one of the calculator task's problems")


# ---------------------------------------------------------------- the task


class CalculatorEnv(ToolEnv):
    """Word problems with a calculator tool; the answer is checked exactly."""

    def reference_policy(self, messages: Messages) -> ChatMessage:
        """Calls the calculator with the problem's expression, then answers with its result."""
        last = messages[-1]
        if last.get("role") == "tool":
            return answer_message(last.get("content"))
        question = next(
            m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"
        )
        return tool_call_message("calculator", {"expression": expression_for(question)}, "call_0")

    def make_random_policy(self, seed: int = 0) -> Callable[[Messages], ChatMessage]:
        """A baseline that answers a random whole number at once (seeded)."""
        rng = random.Random(seed)

        def random_policy(messages: Messages) -> ChatMessage:
            return answer_message(str(rng.randint(0, 1000)))

        return random_policy


def build_rubric(parser: XMLParser) -> Rubric:
    """Exact correctness (weight 1), plus tool calls used and format (weight 0)."""

    def correct_answer(completion: Messages, answer: str) -> float:
        given = parse_number(parser.parse_answer(completion))
        return 1.0 if given is not None and given == Fraction(answer) else 0.0

    def tool_calls(state: State) -> float:
        return float(len(state.get("tools_called", [])))

    def format_reward_func(completion: Messages) -> float:
        # Empty answer tags are no answer, as in the other tool tasks: no format credit.
        given = parser.parse_answer(completion)
        if given is not None and not given.strip():
            return 0.0
        return parser.format_reward_func(completion)

    return Rubric(
        funcs=[correct_answer, tool_calls, format_reward_func],
        weights=[1.0, 0.0, 0.0],
        parser=parser,
    )


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    max_turns: int = 6,
) -> CalculatorEnv:
    """Build the task; `difficulty` sets the size of the numbers."""
    check_choice("difficulty", difficulty, SCALES)
    check_seed(seed)
    check_turn_limit(max_turns, 1)
    scale = SCALES[difficulty]
    make = lambda rng, i: generate_item(rng, scale)  # noqa: E731
    parser = XMLParser(["answer"])
    return CalculatorEnv(
        tools=[calculator],
        max_turns=max_turns,
        dataset=game_rows("calculator", make, num_examples, seed),
        eval_dataset=game_rows("calculator", make, num_examples, seed, offset=EVAL_OFFSET),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=build_rubric(parser),
    )
