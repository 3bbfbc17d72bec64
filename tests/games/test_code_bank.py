"""The bank of function specs the code tasks draw from: references that agree with
independent implementations, and specs that say what they ask."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from vfgym.games import code_tests as ct
from vfgym.games._base import item_rng
from vfgym.games._code_bank import SPECS, Params, reference_function

BANK = {spec.name: spec for spec in SPECS}


def _rotated(text: str, k: int) -> str:
    return text[k % len(text) :] + text[: k % len(text)] if text else text


def _fib(n: int, m: int) -> int:
    """Fibonacci by fast doubling: a different algorithm from the reference's loop."""

    def pair(k: int) -> tuple[int, int]:
        if k == 0:
            return 0, 1
        a, b = pair(k // 2)
        c, d = a * ((2 * b - a) % m) % m, (a * a + b * b) % m
        return (d, (c + d) % m) if k % 2 else (c, d)

    return pair(n)[0]


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1 if p == 2 else 2
    return out + ([n] if n > 1 else [])


def _base(n: int, b: int) -> str:
    digits, m = "", abs(n)
    while m:
        digits = str(m % b) + digits
        m //= b
    return ("-" if n < 0 else "") + (digits or "0")


def _most_common(text: str) -> str:
    counts = Counter(ch for ch in text if ch != " ")
    return max(counts, key=lambda ch: (counts[ch], -text.index(ch))) if counts else ""


#: Independent implementations of each template, written from its description.
ORACLES: dict[str, Callable[[Params], Callable[..., Any]]] = {
    "count_letters": lambda p: lambda t: sum(t.lower().count(c) for c in p["letters"]),
    "is_palindrome": lambda p: (
        lambda t: (kept := "".join(c for c in t.lower() if c.isalnum())) == kept[::-1]
    ),
    "rotate_string": lambda p: lambda t: _rotated(t, p["k"]),
    "sum_of_multiples": lambda p: (
        lambda n: sum(set(range(p["a"], max(n, 0), p["a"])) | set(range(p["b"], max(n, 0), p["b"])))
    ),
    "count_divisors": lambda p: (
        lambda n: len({d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)})
    ),
    "chunk_list": lambda p: (
        lambda xs: [
            [x for _, x in group]
            for _, group in itertools.groupby(enumerate(xs), key=lambda pair: pair[0] // p["k"])
        ]
    ),
    "dedupe": lambda p: lambda xs: list(dict.fromkeys(xs)),
    "rotate_list": lambda p: lambda xs: [xs[(i - p["k"]) % len(xs)] for i in range(len(xs))],
    "clamp_all": lambda p: lambda xs: [sorted((p["lo"], x, p["hi"]))[1] for x in xs],
    "caesar_shift": lambda p: (
        lambda t: t.translate(
            str.maketrans(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                _rotated("abcdefghijklmnopqrstuvwxyz", p["k"])
                + _rotated("ABCDEFGHIJKLMNOPQRSTUVWXYZ", p["k"]),
            )
        )
    ),
    "run_length_encode": lambda p: (
        lambda t: "".join(f"{c}{len(list(g))}" for c, g in itertools.groupby(t))
    ),
    "every_nth": lambda p: (
        lambda t: "".join(
            c for i, c in enumerate(t) if i >= p["start"] and (i - p["start"]) % p["step"] == 0
        )
    ),
    "shout_long_words": lambda p: (
        lambda t: " ".join(w.upper() if len(w) > p["n"] else w for w in t.split(" "))
    ),
    "digit_power_sum": lambda p: lambda n: sum(int(d) ** p["p"] for d in str(n).lstrip("-")),
    "to_base": lambda p: lambda n: _base(n, p["b"]),
    "moving_sum": lambda p: (
        lambda xs: [sum(w) for w in zip(*(xs[i:] for i in range(p["w"])), strict=False)]
    ),
    "second_largest": lambda p: lambda xs: sorted(set(xs))[-2] if len(set(xs)) >= 2 else None,
    "longest_run": lambda p: (
        lambda xs: max((len(list(g)) for _, g in itertools.groupby(xs)), default=0)
    ),
    "interleave": lambda p: (
        lambda a, b: "".join(x + y for x, y in itertools.zip_longest(a, b, fillvalue=""))
    ),
    "most_common_char": lambda p: _most_common,
    "fib_mod": lambda p: lambda n: _fib(n, p["m"]),
    "prime_factors": lambda p: _factors,
    "merge_sorted": lambda p: lambda a, b: sorted(a + b),
    "pairs_with_sum": lambda p: (
        lambda xs: sum(
            1 for i, j in itertools.combinations(range(len(xs)), 2) if xs[i] + xs[j] == p["t"]
        )
    ),
}


def test_every_reference_agrees_with_an_independent_implementation() -> None:
    assert set(ORACLES) == set(BANK)
    for spec in SPECS:
        for seed in range(40):
            rng = item_rng("bank-oracle", seed, 0)
            params = spec.params(rng)
            reference, oracle = reference_function(spec, params), ORACLES[spec.name](params)
            for args in spec.inputs(rng, params, 15):
                got, want = reference(*args), oracle(*args)
                assert got == want and type(got) is type(want), (spec.name, params, args)


def test_sum_of_multiples_never_names_a_redundant_divisor() -> None:
    """'divisible by 5 or by 10' is just 'divisible by 5': the second number must add cases."""
    spec = BANK["sum_of_multiples"]
    for seed in range(300):
        params = spec.params(item_rng("code-tests", seed, 0))
        a, b = params["a"], params["b"]
        assert a % b and b % a, params


def test_specification_texts_name_the_function_and_end_with_the_example() -> None:
    for i, spec in enumerate(SPECS):
        text, info, _ = ct.generate_item(item_rng("code-tests", 3, i), "hard", (spec.name,))
        assert text.startswith(f"Write a Python function `def {spec.name}(")
        call, result = text.split("\nExample: ", 1)[1].split(" == ")
        assert repr(eval(call, {spec.name: reference_function(spec, info["params"])})) == result
        assert json.loads(json.dumps(info)) == info  # the row is plain JSON
