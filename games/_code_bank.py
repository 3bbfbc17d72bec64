"""The specification bank of the code-tests task: parametrised templates with references.

A `Spec` is a function to write: its signature, a description with `$parameter`
placeholders, the reference implementation's source with the same placeholders,
a parameter generator and a generator of test inputs. The reference source is
the single source of truth: the hidden tests' expected values come from running
it (it is this package's own code, never a model's), and the reference policy
answers with it. Every value crossing the sandbox boundary is JSON (str, int,
bool, None and lists of them).
"""

from __future__ import annotations

import copy
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Params = dict[str, Any]
Args = tuple[Any, ...]

_PLACEHOLDER = re.compile(r"\$(\w+)")


@dataclass(frozen=True)
class Spec:
    """One template of the bank."""

    name: str
    level: int
    signature: str
    description: str
    source: str
    params: Callable[[random.Random], Params]
    inputs: Callable[[random.Random, Params, int], list[Args]]

    def implementation(self, params: Params) -> str:
        """The reference source with the parameters filled in."""
        return string.Template(self.source).substitute(params).strip("\n")

    def describe(self, params: Params) -> str:
        return string.Template(self.description).substitute(params)

    def read_params(self, text: str) -> Params:
        """The parameters of this template as a specification text states them.

        Inverts `describe`: literal parts must match exactly, a parameter that
        looks like an integer is read as one.
        """
        pattern, seen, position = "", set(), 0
        for match in _PLACEHOLDER.finditer(self.description):
            pattern += re.escape(self.description[position : match.start()])
            name = match.group(1)
            pattern += f"(?P={name})" if name in seen else f"(?P<{name}>.+?)"
            seen.add(name)
            position = match.end()
        pattern += re.escape(self.description[position:] + ".\n")  # as `spec_text` ends it
        found = re.search(pattern, text)
        if found is None:
            raise ValueError(f"the text does not follow the {self.name} template")
        return {
            key: int(value) if re.fullmatch(r"-?\d+", value) else value
            for key, value in found.groupdict().items()
        }


@lru_cache(maxsize=512)
def _compiled(source: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<reference {name}>", "exec"), namespace)  # the bank's own source
    return namespace[name]


def reference_function(spec: Spec, params: Params) -> Callable[..., Any]:
    """The reference implementation as a callable (the bank's own code, run on the host)."""
    return _compiled(spec.implementation(params), spec.name)


def spec_text(spec: Spec, params: Params, example: Args, result: Any) -> str:
    """What the model reads: the signature, the description and one example call."""
    call = f"{spec.name}({', '.join(repr(a) for a in example)})"
    return (
        f"Write a Python function `def {spec.signature}` that {spec.describe(params)}.\n"
        f"Example: {call} == {result!r}"
    )


# ------------------------------------------------------------------- input makers

_MIXED = string.ascii_letters + string.digits + " ,.!?-"


def _text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def _ints(rng: random.Random, low: int, high: int, min_len: int, max_len: int) -> list[int]:
    return [rng.randint(low, high) for _ in range(rng.randint(min_len, max_len))]


def _cases(edge: list[Any], make: Callable[[random.Random], Any]) -> Callable[..., list[Args]]:
    """Inputs of a one-argument function: a typical one first (the example shown to the
    model), then the edge cases (lists copied, so no test shares one), then more typical
    ones up to the count."""

    def inputs(rng: random.Random, params: Params, count: int) -> list[Args]:
        cases: list[Args] = [(make(rng),)]
        cases += [(copy.copy(value),) for value in edge]
        while len(cases) < count:
            cases.append((make(rng),))
        return cases[:count]

    return inputs


def _numbers(edge: list[int], low: int, high: int) -> Callable[..., list[Args]]:
    """`_cases` whose typical inputs are integers from `low` to `high`."""
    return _cases(edge, lambda rng: rng.randint(low, high))


def _palindromes(rng: random.Random) -> str:
    half = _text(rng, "abcAB1 ,", 1, 6)
    if rng.random() < 0.5:
        return half + rng.choice(("", "x")) + half[::-1]
    return half + _text(rng, "abc", 1, 3)


def _runs(rng: random.Random) -> str:
    return "".join(rng.choice("aab ") * rng.randint(1, 4) for _ in range(rng.randint(1, 6)))


def _sentence(rng: random.Random) -> str:
    words = ["a", "to", "the", "code", "river", "python", "sandbox", "test", "ok"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))


def _pair_of_texts(rng: random.Random, params: Params, count: int) -> list[Args]:
    cases: list[Args] = [
        (_text(rng, "abcde", 2, 5), _text(rng, "XYZ", 2, 6)),
        ("", "xy"),
        ("ab", ""),
    ]
    while len(cases) < count:
        cases.append((_text(rng, "abcdef", 0, 7), _text(rng, "UVWXYZ", 0, 7)))
    return cases[:count]


def _sorted_pairs(rng: random.Random, params: Params, count: int) -> list[Args]:
    def make() -> list[int]:
        return sorted(_ints(rng, -20, 20, 0, 8))

    cases: list[Args] = [([1, 4, 9], [2, 4, 10]), ([], [3]), ([], [])]
    while len(cases) < count:
        cases.append((make(), make()))
    return cases[:count]


def _two_divisors(rng: random.Random) -> Params:
    """Two numbers neither of which divides the other: with 5 and 10, "divisible by 5
    or by 10" would only mean "divisible by 5", and the second number would be noise."""
    a = rng.randint(2, 7)
    b = rng.choice([n for n in range(3, 12) if n % a and a % n])
    return {"a": a, "b": b}


def _no_params(rng: random.Random) -> Params:
    return {}


# ------------------------------------------------------------------------ the bank

SPECS: tuple[Spec, ...] = (
    Spec(
        name="count_letters",
        level=1,
        signature="count_letters(text: str) -> int",
        description="returns how many characters of `text` are one of the letters '$letters' "
        "(in lower or upper case)",
        source="""
def count_letters(text: str) -> int:
    return sum(1 for ch in text.lower() if ch in "$letters")
""",
        params=lambda rng: {"letters": "".join(sorted(rng.sample("abcdefghiklmnoprstu", 3)))},
        inputs=_cases(["", "AAaa bb"], lambda rng: _text(rng, _MIXED, 5, 30)),
    ),
    Spec(
        name="is_palindrome",
        level=1,
        signature="is_palindrome(text: str) -> bool",
        description="returns True if `text` reads the same forwards and backwards once only its "
        "letters and digits are kept and case is ignored, and False otherwise",
        source="""
def is_palindrome(text: str) -> bool:
    kept = [ch.lower() for ch in text if ch.isalnum()]
    return kept == kept[::-1]
""",
        params=_no_params,
        inputs=_cases(["", "A man, a plan, a canal: Panama", "ab"], _palindromes),
    ),
    Spec(
        name="rotate_string",
        level=1,
        signature="rotate_string(text: str) -> str",
        description="returns `text` rotated left by $k characters: the first $k characters move "
        "to the end (for a shorter text rotate by $k modulo its length; the empty text stays "
        "empty)",
        source="""
def rotate_string(text: str) -> str:
    if not text:
        return text
    k = $k % len(text)
    return text[k:] + text[:k]
""",
        params=lambda rng: {"k": rng.randint(1, 9)},
        inputs=_cases(["", "a", "xy"], lambda rng: _text(rng, string.ascii_lowercase, 3, 15)),
    ),
    Spec(
        name="sum_of_multiples",
        level=1,
        signature="sum_of_multiples(n: int) -> int",
        description="returns the sum of all positive integers below `n` that are divisible by "
        "$a or by $b",
        source="""
def sum_of_multiples(n: int) -> int:
    return sum(i for i in range(1, n) if i % $a == 0 or i % $b == 0)
""",
        params=_two_divisors,
        inputs=_numbers([0, 1, 2], 3, 3000),
    ),
    Spec(
        name="count_divisors",
        level=1,
        signature="count_divisors(n: int) -> int",
        description="returns how many positive divisors the positive integer `n` has",
        source="""
def count_divisors(n: int) -> int:
    count, d = 0, 1
    while d * d <= n:
        if n % d == 0:
            count += 1 if d * d == n else 2
        d += 1
    return count
""",
        params=_no_params,
        inputs=_numbers([1, 2, 36, 97], 1, 10**6),
    ),
    Spec(
        name="chunk_list",
        level=1,
        signature="chunk_list(items: list) -> list",
        description="splits `items` into consecutive lists of $k elements (the last one may be "
        "shorter) and returns the list of those lists",
        source="""
def chunk_list(items: list) -> list:
    return [items[i:i + $k] for i in range(0, len(items), $k)]
""",
        params=lambda rng: {"k": rng.randint(2, 5)},
        inputs=_cases([[], [7]], lambda rng: _ints(rng, -9, 99, 1, 14)),
    ),
    Spec(
        name="dedupe",
        level=1,
        signature="dedupe(items: list) -> list",
        description="returns the elements of `items` without repeats, keeping the first "
        "occurrence of each, in their original order",
        source="""
def dedupe(items: list) -> list:
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
""",
        params=_no_params,
        inputs=_cases([[], [3, 3, 3]], lambda rng: _ints(rng, 0, 8, 1, 15)),
    ),
    Spec(
        name="rotate_list",
        level=1,
        signature="rotate_list(items: list) -> list",
        description="returns `items` rotated to the right by $k positions: the last $k elements "
        "move to the front (taking $k modulo the length; an empty list stays empty)",
        source="""
def rotate_list(items: list) -> list:
    if not items:
        return []
    k = $k % len(items)
    return items[len(items) - k:] + items[:len(items) - k]
""",
        params=lambda rng: {"k": rng.randint(1, 7)},
        inputs=_cases([[], [1], [1, 2]], lambda rng: _ints(rng, 0, 50, 2, 10)),
    ),
    Spec(
        name="clamp_all",
        level=1,
        signature="clamp_all(nums: list) -> list",
        description="returns a new list with each number of `nums` clamped to the range $lo to "
        "$hi: numbers below $lo become $lo and numbers above $hi become $hi",
        source="""
def clamp_all(nums: list) -> list:
    return [min(max(n, $lo), $hi) for n in nums]
""",
        params=lambda rng: {"lo": rng.randint(-10, 0), "hi": rng.randint(1, 20)},
        inputs=_cases([[]], lambda rng: _ints(rng, -30, 30, 1, 12)),
    ),
    Spec(
        name="caesar_shift",
        level=2,
        signature="caesar_shift(text: str) -> str",
        description="returns `text` with every letter shifted $k places forward in the alphabet, "
        "wrapping around from z to a and keeping upper and lower case; every other character "
        "stays as it is",
        source="""
def caesar_shift(text: str) -> str:
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + $k) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + $k) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)
""",
        params=lambda rng: {"k": rng.randint(1, 25)},
        inputs=_cases(["", "xyz XYZ!"], lambda rng: _text(rng, _MIXED, 4, 24)),
    ),
    Spec(
        name="run_length_encode",
        level=2,
        signature="run_length_encode(text: str) -> str",
        description="returns the run-length encoding of `text`: each maximal run of one repeated "
        "character becomes that character followed by the length of the run, all joined together "
        "(so 'aaab' gives 'a3b1')",
        source="""
def run_length_encode(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append(text[i] + str(j - i))
        i = j
    return "".join(out)
""",
        params=_no_params,
        inputs=_cases(["", "z", "aaaaaaaaaaaa"], _runs),
    ),
    Spec(
        name="every_nth",
        level=2,
        signature="every_nth(text: str) -> str",
        description="returns, as one string, the characters of `text` at positions $start, "
        "$start + $step, $start + 2 * $step and so on (positions count from 0)",
        source="""
def every_nth(text: str) -> str:
    return text[$start::$step]
""",
        params=lambda rng: {"start": rng.randint(0, 3), "step": rng.randint(2, 4)},
        inputs=_cases(["", "ab"], lambda rng: _text(rng, string.ascii_lowercase, 4, 20)),
    ),
    Spec(
        name="shout_long_words",
        level=2,
        signature="shout_long_words(text: str) -> str",
        description="returns `text` with every word longer than $n letters in upper case, where "
        "words are the parts of `text` between single spaces (the spaces are kept as they are)",
        source="""
def shout_long_words(text: str) -> str:
    return " ".join(w.upper() if len(w) > $n else w for w in text.split(" "))
""",
        params=lambda rng: {"n": rng.randint(2, 5)},
        inputs=_cases(["", "a  bbbbbbbb"], _sentence),
    ),
    Spec(
        name="digit_power_sum",
        level=2,
        signature="digit_power_sum(n: int) -> int",
        description="returns the sum of the decimal digits of `n`, each raised to the power $p "
        "(for a negative `n` use the digits of its absolute value)",
        source="""
def digit_power_sum(n: int) -> int:
    return sum(int(d) ** $p for d in str(abs(n)))
""",
        params=lambda rng: {"p": rng.randint(2, 5)},
        inputs=_numbers([0, -507, 9], -(10**6), 10**9),
    ),
    Spec(
        name="to_base",
        level=2,
        signature="to_base(n: int) -> str",
        description="returns the integer `n` written in base $b as a string of digits with no "
        "prefix, with a leading '-' when `n` is negative ('0' for zero)",
        source="""
def to_base(n: int) -> str:
    if n == 0:
        return "0"
    digits = []
    m = abs(n)
    while m:
        digits.append(str(m % $b))
        m //= $b
    return ("-" if n < 0 else "") + "".join(reversed(digits))
""",
        params=lambda rng: {"b": rng.randint(2, 9)},
        inputs=_numbers([0, -1, 1], -5000, 10**7),
    ),
    Spec(
        name="moving_sum",
        level=2,
        signature="moving_sum(nums: list) -> list",
        description="returns the list of the sums of every $w consecutive elements of `nums` "
        "(a window sliding by one position); a list shorter than $w gives an empty list",
        source="""
def moving_sum(nums: list) -> list:
    return [sum(nums[i:i + $w]) for i in range(len(nums) - $w + 1)]
""",
        params=lambda rng: {"w": rng.randint(2, 5)},
        inputs=_cases([[], [5]], lambda rng: _ints(rng, -20, 20, 2, 12)),
    ),
    Spec(
        name="second_largest",
        level=2,
        signature="second_largest(nums: list) -> int | None",
        description="returns the second largest distinct value in `nums`, or None when `nums` "
        "holds fewer than two distinct values",
        source="""
def second_largest(nums: list):
    values = sorted(set(nums))
    return values[-2] if len(values) >= 2 else None
""",
        params=_no_params,
        inputs=_cases([[], [4, 4], [1, 2]], lambda rng: _ints(rng, -15, 15, 1, 10)),
    ),
    Spec(
        name="longest_run",
        level=2,
        signature="longest_run(nums: list) -> int",
        description="returns the length of the longest run of equal consecutive elements in "
        "`nums` (0 for an empty list)",
        source="""
def longest_run(nums: list) -> int:
    best = run = 0
    for i, n in enumerate(nums):
        run = run + 1 if i and nums[i - 1] == n else 1
        best = max(best, run)
    return best
""",
        params=_no_params,
        inputs=_cases([[], [2], [1, 1, 2, 2, 2]], lambda rng: _ints(rng, 0, 2, 1, 15)),
    ),
    Spec(
        name="interleave",
        level=2,
        signature="interleave(a: str, b: str) -> str",
        description="returns the characters of `a` and `b` taken alternately, starting with `a`; "
        "when one string runs out, the rest of the other follows",
        source="""
def interleave(a: str, b: str) -> str:
    out = []
    for i in range(max(len(a), len(b))):
        out.append(a[i:i + 1] + b[i:i + 1])
    return "".join(out)
""",
        params=_no_params,
        inputs=_pair_of_texts,
    ),
    Spec(
        name="most_common_char",
        level=3,
        signature="most_common_char(text: str) -> str",
        description="returns the character that occurs most often in `text`, not counting "
        "spaces; of characters that tie, the one that appears first in `text`; the empty string "
        "when there is no such character",
        source="""
def most_common_char(text: str) -> str:
    counts = {}
    for ch in text:
        if ch != " ":
            counts[ch] = counts.get(ch, 0) + 1
    best = ""
    for ch in text:
        if ch != " " and (best == "" or counts[ch] > counts[best]):
            best = ch
    return best
""",
        params=_no_params,
        inputs=_cases(["", "   ", "ba ab"], lambda rng: _text(rng, "abcd e", 1, 20)),
    ),
    Spec(
        name="fib_mod",
        level=3,
        signature="fib_mod(n: int) -> int",
        description="returns the n-th Fibonacci number modulo $m, where fib(0) = 0 and "
        "fib(1) = 1 (`n` may be as large as 100000)",
        source="""
def fib_mod(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % $m
    return a % $m
""",
        params=lambda rng: {"m": rng.choice((97, 1000, 65536, 1000003, 1000000007))},
        inputs=_numbers([0, 1, 2, 100000], 3, 100000),
    ),
    Spec(
        name="prime_factors",
        level=3,
        signature="prime_factors(n: int) -> list",
        description="returns the prime factors of the integer `n` (at least 2) in increasing "
        "order, each repeated as many times as it divides `n`",
        source="""
def prime_factors(n: int) -> list:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out
""",
        params=_no_params,
        inputs=_numbers([2, 1024, 999983], 2, 10**7),
    ),
    Spec(
        name="merge_sorted",
        level=3,
        signature="merge_sorted(a: list, b: list) -> list",
        description="merges the two sorted lists `a` and `b` into one sorted list, keeping "
        "duplicates, and returns it",
        source="""
def merge_sorted(a: list, b: list) -> list:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out + a[i:] + b[j:]
""",
        params=_no_params,
        inputs=_sorted_pairs,
    ),
    Spec(
        name="pairs_with_sum",
        level=3,
        signature="pairs_with_sum(nums: list) -> int",
        description="returns how many pairs of positions i < j there are with "
        "nums[i] + nums[j] == $t",
        source="""
def pairs_with_sum(nums: list) -> int:
    return sum(
        1
        for i in range(len(nums))
        for j in range(i + 1, len(nums))
        if nums[i] + nums[j] == $t
    )
""",
        params=lambda rng: {"t": rng.randint(-5, 20)},
        inputs=_cases([[], [5]], lambda rng: _ints(rng, -5, 15, 2, 14)),
    ),
)
