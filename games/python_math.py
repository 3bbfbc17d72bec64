"""Python math: exact-answer math problems, solved with a sandboxed Python tool.

Four families of generated problems: big-number arithmetic, modular arithmetic
(powers, inverses, the Chinese remainder theorem), small linear systems with a
unique rational solution, and combinatorics (binomials, anagrams, derangements,
selections without neighbours, bounded sums, seatings with a constraint). The
model may run Python in a sandbox with the `python` tool (a stateful session, like
a notebook) and answers in `<answer>…</answer>`. Answers are checked exactly:
integers may carry thousands separators; a linear system's answer is the tuple
`(x, y, z)` (values in the order the problem lists the unknowns, or all named, as
`y = 2, x = 1`, in any order; commas in brackets always separate values), each value an
integer or a fraction such as `-7/3` (any exact form is accepted: `14/6` or `2.5`
too).

Knobs: `difficulty` ("easy", "medium", "hard": the size of the numbers and of the
systems: 2, 3 or 4 unknowns), `families` (a subset of `FAMILIES`; the order it is
listed in does not change the items), `max_turns` (8),
`max_invalid_moves` (3: replies without an answer and tool calls that fail),
`sandbox_config` and `pool_size` (the sandboxes the tool runs in). The reference
policy writes the Python that computes the answer, runs it with the tool and
answers with what it printed: right on every seed.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from fractions import Fraction
from typing import Any

from vfgym.games._base import check_choice
from vfgym.games._tool_task import (
    ToolTask,
    answer_message,
    assistant_turns,
    check_invalid_move_limit,
    check_seed,
    check_turn_limit,
    subset_knob,
    task_text,
    tool_call_message,
    tool_outputs_since_last_turn,
)

from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.types import ChatMessage, Messages

GYM_ID = "vfgym/PythonMath-v0"
KIND = "tool"
NEEDS_SANDBOX = True

DIFFICULTIES = ("easy", "medium", "hard")
FAMILIES = ("arithmetic", "modular", "linear", "combinatorics")
UNKNOWNS = {2: ("x", "y"), 3: ("x", "y", "z"), 4: ("w", "x", "y", "z")}

SYSTEM_PROMPT = """You solve math problems exactly. You have a `python` tool that runs Python code \
in a sandbox (a persistent session, like a notebook: print what you want to see; the value of \
a last bare expression is shown too).
Work the problem out, using the tool as much as you like, then give only the final answer \
inside answer tags, for example: <answer>42</answer>
Answers are checked exactly: give integers in full (no rounding, no scientific notation) and \
fractions in exact form such as -7/3. For a system of equations answer with the tuple of \
values in the order the problem lists the unknowns, for example: <answer>(3, -1/2, 4)</answer>"""


# --------------------------------------------------------------------------- answers

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+$")
_NAMED = re.compile(r"^[a-z]\w*\s*=\s*", re.IGNORECASE)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)$")
#: No answer needs a larger power of ten, and `Fraction` would spend minutes on one
#: in the hundreds of millions: such an answer reads as no answer.
MAX_ANSWER_EXPONENT = 20_000


def parse_values(text: str) -> tuple[Fraction, ...] | None:
    """The exact values an answer states, or None when it is not a number or a tuple of them.

    Accepts `42`, `1,234,567`, `-7/3`, `2.5`, `(3, -1/2, 4)`, `[3, -1/2, 4]` and
    `x = 3, y = -1/2`. Commas in brackets always separate values, so `(-129, 174)` is
    a pair and not the number -129,174; a lone number may group its digits in threes.
    Values that are all named are put in the order of their names (every system's
    unknowns are listed in alphabetical order), so `y = 2, x = 1` is `(1, 2)`; an
    unknown named twice makes no answer.
    """
    body = text.strip().strip("$").strip().rstrip(".").strip()
    if len(body) > 20_000:
        return None
    bracketed = body[:1] + body[-1:] in ("()", "[]")
    if bracketed:
        body = body[1:-1]
    elif _THOUSANDS.match(body):
        body = body.replace(",", "")
    parts = _by_name([part.strip() for part in body.split(",")])
    if parts is None:
        return None
    values = []
    for part in parts:
        part = _NAMED.sub("", part).replace("_", "").replace(" ", "")
        exponent = _EXPONENT.search(part)
        if not part or (exponent and abs(int(exponent.group(1))) > MAX_ANSWER_EXPONENT):
            return None
        try:
            values.append(Fraction(part))
        except (ValueError, ZeroDivisionError, OverflowError):
            return None
    return tuple(values)


def _by_name(parts: list[str]) -> list[str] | None:
    """`parts` in the order of their names when every one is named (`y = 2`), else as they
    are; None when a name comes twice (which value would it be?)."""
    found = [_NAMED.match(part) for part in parts]
    if not all(found):
        return parts
    names = [match.group(0).split("=")[0].strip().lower() for match in found if match]
    if len(set(names)) < len(names):
        return None
    return [part for _, part in sorted(zip(names, parts, strict=True))]


def answers_match(given: str | None, expected: str) -> bool:
    """True when `given` states exactly the value(s) of `expected`."""
    if given is None:
        return False
    got, want = parse_values(given), parse_values(expected)
    return got is not None and got == want


def format_value(value: Fraction) -> str:
    """An integer, or a reduced fraction `p/q` (the canonical answer text)."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


# -------------------------------------------------------------------------- problems


def _digits(rng: random.Random, low: int, high: int) -> int:
    """A random integer with between `low` and `high` digits."""
    n = rng.randint(low, high)
    return rng.randint(10 ** (n - 1), 10**n - 1)


def gen_arithmetic(rng: random.Random, level: int) -> tuple[str, dict[str, Any], str]:
    """Exact big-number arithmetic; the text uses ^ for powers."""
    if level == 1:
        a, b, c = _digits(rng, 8, 12), _digits(rng, 8, 12), _digits(rng, 6, 10)
        expr, value = f"{a} * {b} + {c}", a * b + c
    elif level == 2:
        a, e = _digits(rng, 3, 6), rng.randint(8, 15)
        b, c = _digits(rng, 8, 12), _digits(rng, 8, 12)
        expr, value = f"{a}^{e} - {b} * {c}", a**e - b * c
    else:
        a, b, d = _digits(rng, 5, 9), _digits(rng, 4, 8), _digits(rng, 3, 6)
        e1, e2, e3 = rng.randint(12, 25), rng.randint(12, 25), rng.randint(10, 20)
        c = _digits(rng, 6, 10)
        expr = f"({a}^{e1} + {b}^{e2}) * {c} - {d}^{e3}"
        value = (a**e1 + b**e2) * c - d**e3
    question = f"Compute the exact value of {expr}."
    return question, {"kind": "arithmetic"}, str(value)


def _prime(rng: random.Random, low: int, high: int) -> int:
    while True:
        candidate = rng.randint(low, high)
        if candidate > 1 and all(candidate % p for p in range(2, math.isqrt(candidate) + 1)):
            return candidate


def gen_modular(rng: random.Random, level: int) -> tuple[str, dict[str, Any], str]:
    """Modular powers, inverses and simultaneous congruences."""
    kind = rng.choice(("modpow", "modinv", "crt"))
    size = {1: (3, 4), 2: (5, 7), 3: (8, 12)}[level]
    if kind == "modpow":
        a, m = _digits(rng, *size), _digits(rng, *size)
        b = _digits(rng, {1: 3, 2: 6, 3: 15}[level], {1: 5, 2: 10, 3: 30}[level])
        question = f"Compute {a}^{b} mod {m}, the remainder of {a}^{b} divided by {m}."
        value = pow(a, b, m)
    elif kind == "modinv":
        m = _prime(rng, 10 ** size[0], 10 ** min(size[1], 9))
        a = rng.randint(2, m - 1)
        question = f"Find the integer x with 0 <= x < {m} such that {a} * x ≡ 1 (mod {m})."
        value = pow(a, -1, m)
    else:
        count = {1: 2, 2: 3, 3: 4}[level]
        top = {1: 50, 2: 500, 3: 20000}[level]
        moduli: list[int] = []
        while len(moduli) < count:
            m = rng.randint(3, top)
            if all(math.gcd(m, other) == 1 for other in moduli):
                moduli.append(m)
        residues = [rng.randrange(m) for m in moduli]
        clauses = [f"x ≡ {r} (mod {m})" for r, m in zip(residues, moduli, strict=True)]
        question = (
            "Find the smallest non-negative integer x such that "
            + ", ".join(clauses[:-1])
            + f" and {clauses[-1]}."
        )
        value = _crt(residues, moduli)
    return question, {"kind": kind}, str(value)


def _crt(residues: list[int], moduli: list[int]) -> int:
    x, step = 0, 1
    for r, m in zip(residues, moduli, strict=True):
        x += step * ((r - x) * pow(step, -1, m) % m)
        step *= m
    return x % step


def solve_linear(matrix: list[list[int]], rhs: list[int]) -> tuple[Fraction, ...] | None:
    """The unique solution of `matrix @ v = rhs` by exact elimination, or None if singular."""
    n = len(matrix)
    rows = [[Fraction(v) for v in row] + [Fraction(b)] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col] != 0), None)
        if pivot is None:
            return None
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return tuple(rows[i][n] / rows[i][i] for i in range(n))


def render_equation(coefficients: list[int], names: tuple[str, ...], rhs: int) -> str:
    """`3x - y + 2z = 7`: coefficients 1 and -1 are implied, zero terms left out."""
    text = ""
    for coefficient, name in zip(coefficients, names, strict=True):
        if coefficient == 0:
            continue
        size = "" if abs(coefficient) == 1 else str(abs(coefficient))
        if not text:
            text = f"{'-' if coefficient < 0 else ''}{size}{name}"
        else:
            text += f" {'-' if coefficient < 0 else '+'} {size}{name}"
    return f"{text} = {rhs}"


def gen_linear(rng: random.Random, level: int) -> tuple[str, dict[str, Any], str]:
    """A square system with integer coefficients and a unique rational solution."""
    n = level + 1
    names = UNKNOWNS[n]
    bound = {1: 9, 2: 9, 3: 12}[level]
    while True:
        matrix = [[rng.randint(-bound, bound) for _ in range(n)] for _ in range(n)]
        rhs = [rng.randint(-5 * bound, 5 * bound) for _ in range(n)]
        solution = solve_linear(matrix, rhs)
        if solution is not None:
            break
    lines = [render_equation(row, names, b) for row, b in zip(matrix, rhs, strict=True)]
    question = (
        f"Solve this system of linear equations for {', '.join(names)}:\n"
        + "\n".join(lines)
        + f"\nAnswer with the tuple ({', '.join(names)}), each value an integer or a reduced "
        "fraction such as -7/3."
    )
    answer = "(" + ", ".join(format_value(v) for v in solution) + ")"
    return question, {"kind": "linear", "unknowns": list(names)}, answer


def derangements(n: int) -> int:
    """Permutations of n items with no fixed point."""
    a, b = 1, 0  # D(0), D(1)
    if n == 0:
        return 1
    for k in range(2, n + 1):
        a, b = b, (k - 1) * (a + b)
    return b


def bounded_solutions(total: int, parts: int, cap: int) -> int:
    """Solutions of x1 + ... + x_parts = total with 0 <= xi <= cap (inclusion-exclusion)."""
    count = 0
    for j in range(parts + 1):
        rest = total - j * (cap + 1)
        if rest < 0:
            break
        count += (-1) ** j * math.comb(parts, j) * math.comb(rest + parts - 1, parts - 1)
    return count


def gen_combinatorics(rng: random.Random, level: int) -> tuple[str, dict[str, Any], str]:
    """Counting problems: binomials, anagrams, derangements and constrained arrangements."""
    kind = rng.choice(("binomial", "anagram", "derangement", "nonadjacent", "bounded", "seating"))
    if kind == "binomial":
        n = rng.randint(*{1: (10, 30), 2: (40, 100), 3: (100, 400)}[level])
        k = rng.randint(2, n // 2)
        question = (
            f"In how many ways can {k} items be chosen from {n} distinct items "
            "(order does not matter)?"
        )
        value = math.comb(n, k)
    elif kind == "anagram":
        length = rng.randint(*{1: (6, 8), 2: (10, 14), 3: (18, 26)}[level])
        letters = rng.sample("ABCDEFGHIJKLMNOPQRSTUVWXYZ", {1: 3, 2: 5, 3: 7}[level])
        word = "".join(rng.choice(letters) for _ in range(length))
        question = f"How many distinct arrangements are there of the letters of the string {word}?"
        value = math.factorial(length)
        for repeats in Counter(word).values():
            value //= math.factorial(repeats)
    elif kind == "derangement":
        n = rng.randint(*{1: (5, 9), 2: (10, 20), 3: (25, 60)}[level])
        question = (
            f"How many permutations of the numbers 1 to {n} leave no number in its "
            "original position?"
        )
        value = derangements(n)
    elif kind == "nonadjacent":
        n = rng.randint(*{1: (8, 15), 2: (20, 50), 3: (60, 200)}[level])
        k = rng.randint(2, (n + 1) // 2)
        question = (
            f"In how many ways can {k} of the numbers 1 to {n} be chosen so that no two chosen "
            "numbers are consecutive?"
        )
        value = math.comb(n - k + 1, k)
    elif kind == "bounded":
        parts = rng.randint(*{1: (3, 3), 2: (4, 5), 3: (6, 10)}[level])
        cap = rng.randint(*{1: (3, 8), 2: (6, 15), 3: (10, 30)}[level])
        total = rng.randint(cap, parts * cap - 1)
        question = (
            f"How many solutions in integers does x1 + x2 + ... + x{parts} = {total} have "
            f"with 0 <= xi <= {cap} for every i?"
        )
        value = bounded_solutions(total, parts, cap)
    else:
        n = rng.randint(*{1: (4, 7), 2: (8, 15), 3: (16, 40)}[level])
        question = (
            f"In how many ways can {n} people sit in a row of {n} chairs if two particular "
            "people must not sit next to each other?"
        )
        value = math.factorial(n) - 2 * math.factorial(n - 1)
    return question, {"kind": kind}, str(value)


GENERATORS = {
    "arithmetic": gen_arithmetic,
    "modular": gen_modular,
    "linear": gen_linear,
    "combinatorics": gen_combinatorics,
}


def generate_item(
    rng: random.Random, difficulty: str, families: tuple[str, ...]
) -> tuple[str, dict[str, Any], str]:
    """One problem: (question, info, exact answer text), a pure function of `rng`'s seed."""
    family = rng.choice(families)
    level = DIFFICULTIES.index(difficulty) + 1
    question, info, answer = GENERATORS[family](rng, level)
    return question, {**info, "family": family, "difficulty": difficulty}, answer


# ------------------------------------------------------------------ reference solver

_ARITHMETIC = re.compile(r"Compute the exact value of ([\d\s()+\-*^]+)\.")
_MODPOW = re.compile(r"Compute (\d+)\^(\d+) mod (\d+)")
_MODINV = re.compile(r"0 <= x < (\d+) such that (\d+) \* x ≡ 1 \(mod \d+\)")
_CONGRUENCE = re.compile(r"x ≡ (\d+) \(mod (\d+)\)")
_UNKNOWNS = re.compile(r"linear equations for ([a-z](?:, [a-z])*):")
_TERM = re.compile(r"([+-]?)\s*(\d*)\s*([a-z])")
_BINOMIAL = re.compile(r"can (\d+) items be chosen from (\d+) distinct items")
_ANAGRAM = re.compile(r"letters of the string ([A-Z]+)\?")
_DERANGEMENT = re.compile(r"permutations of the numbers 1 to (\d+) leave no number")
_NONADJACENT = re.compile(r"can (\d+) of the numbers 1 to (\d+) be chosen so that no two")
_BOUNDED = re.compile(r"\+ x(\d+) = (\d+) have with 0 <= xi <= (\d+)")
_SEATING = re.compile(r"can (\d+) people sit in a row")

_LINEAR_SOLVER = """from fractions import Fraction
rows = [[Fraction(v) for v in row] for row in {augmented!r}]
n = len(rows)
for col in range(n):
    pivot = next(r for r in range(col, n) if rows[r][col] != 0)
    rows[col], rows[pivot] = rows[pivot], rows[col]
    for r in range(n):
        if r != col and rows[r][col] != 0:
            factor = rows[r][col] / rows[col][col]
            rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
print("(" + ", ".join(str(rows[i][n] / rows[i][i]) for i in range(n)) + ")")"""


def _linear_code(text: str) -> str:
    names = _UNKNOWNS.search(text).group(1).split(", ")  # type: ignore[union-attr]
    augmented = []
    for line in text.splitlines():
        if "=" not in line or not re.match(r"^\s*-?\d*[a-z]", line):
            continue
        left, right = line.split("=")
        coefficients = dict.fromkeys(names, 0)
        for sign, size, name in _TERM.findall(left):
            coefficients[name] = (-1 if sign == "-" else 1) * (int(size) if size else 1)
        augmented.append([coefficients[name] for name in names] + [int(right)])
    return _LINEAR_SOLVER.format(augmented=augmented)


def solution_code(text: str) -> str:
    """Python that prints the answer to the problem in `text`, in the answer format.

    Reads only the problem statement, as a model would; raises ValueError for text
    that is not one of this task's problems.
    """
    if match := _ARITHMETIC.search(text):
        return f"print({match.group(1).replace('^', '**')})"
    if match := _MODPOW.search(text):
        a, b, m = match.groups()
        return f"print(pow({a}, {b}, {m}))"
    if match := _MODINV.search(text):
        m, a = match.groups()
        return f"print(pow({a}, -1, {m}))"
    if congruences := _CONGRUENCE.findall(text):
        pairs = [(int(r), int(m)) for r, m in congruences]
        return (
            f"x, step = 0, 1\nfor r, m in {pairs!r}:\n"
            "    x += step * ((r - x) * pow(step, -1, m) % m)\n"
            "    step *= m\n"
            "print(x % step)"
        )
    if _UNKNOWNS.search(text):
        return _linear_code(text)
    if match := _BINOMIAL.search(text):
        k, n = match.groups()
        return f"import math\nprint(math.comb({n}, {k}))"
    if match := _ANAGRAM.search(text):
        return (
            "import math\nfrom collections import Counter\n"
            f"word = {match.group(1)!r}\n"
            "count = math.factorial(len(word))\n"
            "for repeats in Counter(word).values():\n"
            "    count //= math.factorial(repeats)\n"
            "print(count)"
        )
    if match := _DERANGEMENT.search(text):
        return (
            "d = [1, 0]\n"
            f"for k in range(2, {match.group(1)} + 1):\n"
            "    d.append((k - 1) * (d[-1] + d[-2]))\n"
            f"print(d[{match.group(1)}])"
        )
    if match := _NONADJACENT.search(text):
        k, n = match.groups()
        return f"import math\nprint(math.comb({n} - {k} + 1, {k}))"
    if match := _BOUNDED.search(text):
        parts, total, cap = match.groups()
        return (
            f"ways = [1] + [0] * {total}\n"
            f"for _ in range({parts}):\n"
            f"    ways = [sum(ways[max(0, s - {cap}):s + 1]) for s in range({total} + 1)]\n"
            f"print(ways[{total}])"
        )
    if match := _SEATING.search(text):
        return (
            "import math\n"
            f"n = {match.group(1)}\n"
            "print(math.factorial(n) - 2 * math.factorial(n - 1))"
        )
    raise ValueError(f"not a python-math problem: {text[:80]!r}")


# ---------------------------------------------------------------------- environment


class PythonMathEnv(ToolTask, SandboxEnv):
    """Exact math problems with a sandboxed Python tool; reward 1 for an exact answer."""

    game_name = "python-math"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(python_tool=True, bash_tool=False, **kwargs)

    def answers_match(self, given: str | None, expected: str) -> bool:
        return answers_match(given, expected)

    def reference_policy(self, messages: Messages) -> ChatMessage:
        """Compute with the tool, then answer with what it printed."""
        outputs = tool_outputs_since_last_turn(messages)
        if outputs:
            return answer_message(outputs[-1].strip())
        code = solution_code(task_text(messages))
        return tool_call_message("python", {"code": code}, f"call_{assistant_turns(messages)}")

    def random_reply(self, messages: Messages, rng: random.Random) -> ChatMessage:
        return answer_message(str(rng.randint(-(10**6), 10**12)))


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    families: tuple[str, ...] | list[str] = FAMILIES,
    max_turns: int = 8,
    max_invalid_moves: int = 3,
    sandbox_config: SandboxConfig | None = None,
    pool_size: int = 4,
) -> PythonMathEnv:
    """Build the environment (problems of `families` at `difficulty`)."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    # In the catalogue's order, so a subset gives the same items however it is listed.
    given = subset_knob("families", families, FAMILIES)
    chosen = tuple(name for name in FAMILIES if name in given)
    check_invalid_move_limit(max_invalid_moves)
    check_seed(seed)
    check_turn_limit(max_turns, 2, "one tool call and the answer")
    make = lambda rng, i: generate_item(rng, difficulty, chosen)  # noqa: E731
    return PythonMathEnv.from_items(
        make,
        num_examples,
        seed,
        system_prompt=SYSTEM_PROMPT,
        max_turns=max_turns,
        max_invalid_moves=max_invalid_moves,
        sandbox_config=sandbox_config,
        pool_size=pool_size,
    )
