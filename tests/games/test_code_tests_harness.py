"""The code-tests harness keeps its per-test time limit whatever the answer rebinds.

The answer runs in the same interpreter as the harness; an answer that finds the
harness's entry point (in its globals, in `__main__`, or in the globals of the
frames that run it) and wraps it with a larger limit must still fail its slow tests.
Driven through a real Docker sandbox, as code-tests scores answers.
"""

from __future__ import annotations

import dis
import types

from vfgym.games import code_tests as ct
from vfgym.games._code_bank import SPECS, reference_function

from vfgym.sandbox import DockerSandbox, SandboxConfig

_DIVISORS = reference_function({spec.name: spec for spec in SPECS}["count_divisors"], {})
TESTS = [{"args": [n], "expected": _DIVISORS(n)} for n in (1, 12, 36, 97)]
LIMIT = 0.3

#: Top-level code that wraps every harness callable it can reach by name so that each
#: call gets a limit of 100 seconds instead of the one the host asked for.
HIJACK = """import sys

def _widen(real):
    def wrapper(*args, **kwargs):
        args = [100.0 if type(a) is float and a < 5 else a for a in args]
        return real(*args, **kwargs)
    return wrapper

_spaces = [globals(), sys.modules["__main__"].__dict__]
_frame = sys._getframe(0)
while _frame is not None:
    _spaces.append(_frame.f_globals)
    _frame = _frame.f_back
for _space in _spaces:
    for _name, _value in list(_space.items()):
        if _name.startswith("_vfgym") and callable(_value):
            _space[_name] = _widen(_value)
"""

SLOW = "import time\ndef count_divisors(n):\n    time.sleep(0.6)\n"
FAST = "def count_divisors(n):\n"
BODY = "    return sum(1 for d in range(1, n + 1) if n % d == 0)\n"


async def test_an_answer_that_wraps_the_harness_still_hits_the_per_test_limit(
    sandbox_config: SandboxConfig,
) -> None:
    async with DockerSandbox(sandbox_config) as sandbox:
        slow = await ct.run_hidden_tests(
            sandbox, HIJACK + SLOW + BODY, "count_divisors", TESTS, LIMIT
        )
        await sandbox.reset()
        fast = await ct.run_hidden_tests(
            sandbox, HIJACK + FAST + BODY, "count_divisors", TESTS, LIMIT
        )
    assert fast == [True] * 4  # the hijack itself does not break a right answer
    assert slow == [False] * 4  # but it gains no time


async def test_the_answer_does_not_see_the_harness_in_its_namespace(
    sandbox_config: SandboxConfig,
) -> None:
    """Neither the answer's globals nor `__main__` hold anything of the harness."""
    code = (
        "import sys\n"
        "_seen = [n for n in list(globals()) + dir(sys.modules['__main__']) if 'vfgym' in n]\n"
        "def count_divisors(n):\n"
        "    return len(_seen) * 1000 + sum(1 for d in range(1, n + 1) if n % d == 0)\n"
    )
    async with DockerSandbox(sandbox_config) as sandbox:
        passed = await ct.run_hidden_tests(sandbox, code, "count_divisors", TESTS, 2)
    assert passed == [True] * 4


def _global_loads(code: types.CodeType) -> set[str]:
    """Names that `code` and the functions nested in it look up as globals."""
    names = {
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_loads(const)
    return names


def test_the_harness_looks_up_no_name_the_answer_could_rebind() -> None:
    """Everything the harness uses is bound in its own scope before any answer code runs."""
    module = compile(ct._HARNESS, "<harness>", "exec")
    (outer,) = [c for c in module.co_consts if isinstance(c, types.CodeType)]
    inner = [c for c in outer.co_consts if isinstance(c, types.CodeType)]
    assert inner, "the harness defines its functions inside one outer function"
    assert {name for code in inner for name in _global_loads(code)} == set()
