"""Every code block of the README runs, as written.

Python blocks run in order in one namespace (later blocks use names defined by
earlier ones, as a reader would). Shell blocks run line by line from the
repository root, except `bash .ci/test` with no arguments: that is the command
running this very test suite.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)
BLOCKS = [(lang, code) for lang, code in BLOCK.findall(README)]
SELF = "bash .ci/test"


def test_readme_has_code_blocks() -> None:
    languages = {lang for lang, _ in BLOCKS}
    assert {"python", "bash"} <= languages, languages
    assert languages <= {"python", "bash"}, f"unexecuted block languages: {languages}"


def docker_reachable() -> bool:
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        return False
    return True


def test_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks that need Docker are left out (and the test skips at the end) without one,
    unless VFGYM_REQUIRE_DOCKER=1, as in CI."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    require = os.environ.get("VFGYM_REQUIRE_DOCKER") == "1"
    left_out = []
    for number, (lang, code) in enumerate(BLOCKS):
        if lang != "python":
            continue
        if "vfgym.sandbox" in code and not require and not docker_reachable():
            left_out.append(number)
            continue
        exec(compile(code, f"README.md python block {number}", "exec"), namespace)
    if left_out:
        pytest.skip(
            f"README python blocks {left_out} need Docker and were not run; "
            "start it with: sudo bash sandboxes/setup-docker.sh"
        )


def shell_commands() -> list[str]:
    commands = []
    for lang, code in BLOCKS:
        if lang != "bash":
            continue
        for line in code.splitlines():
            command = line.split("  #")[0].strip()
            if command and command != SELF:
                commands.append(command)
    return commands


@pytest.fixture(scope="module", autouse=True)
def fresh_outputs() -> None:
    """The README's eval writes to outputs/first-run, which refuses to be overwritten."""
    shutil.rmtree(ROOT / "outputs" / "first-run", ignore_errors=True)


@pytest.mark.parametrize("command", shell_commands())
def test_shell_commands_run(command: str) -> None:
    result = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
