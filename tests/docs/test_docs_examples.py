"""Every example in README.md and the docs site runs as written, and the site builds.

A reader copies what a page shows, so the pages are checked the way a reader would use
them:

- ```python blocks run in order, each page's in one namespace of its own (a later
  block may use names an earlier one on the same page defined);
- ```bash blocks run line by line from the repository root, except `bash .ci/test`
  with no arguments, which is the command running this very suite;
- ```py, ```sh, ```text, ```toml and ```mermaid blocks are shown, not run: code that
  cannot run on its own (an excerpt of vfgym's source, a command that needs a GPU
  server or runs for minutes).

A fence in any other language fails, so a typo such as ```pyhton cannot turn an
example into one that silently never runs. `mkdocs build --strict` must pass, so a
broken link or API reference fails the suite too (skipped when mkdocs is not
installed, unless VFGYM_REQUIRE_DOCS=1, as CI sets).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
RUN = {"python", "bash"}
SHOWN = {"py", "sh", "text", "toml", "mermaid"}
SELF = "bash .ci/test"


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path) -> list[tuple[str, str]]:
    """The page's fenced blocks, as (language, code), in order."""
    return FENCE.findall(page.read_text(encoding="utf-8"))


def docker_reachable() -> bool:
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        return False
    return True


def test_the_docs_have_runnable_examples() -> None:
    """The test below would pass vacuously if the pages lost their examples."""
    by_page = {page_id(page): {lang for lang, _ in blocks(page)} for page in PAGES}
    assert {"python", "bash"} <= by_page["README.md"], by_page["README.md"]
    for page in ("evaluating.md", "gymnasium.md", "environments.md", "training-data.md"):
        assert "python" in by_page[f"docs/{page}"], f"docs/{page} lost its examples"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_code_fences_name_a_known_language(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    unknown = {lang or "(none)" for lang, _ in blocks(page)} - RUN - SHOWN
    assert not unknown, (
        f"{page_id(page)} has code blocks in {sorted(unknown)}: use python or bash for an "
        f"example that runs, one of {sorted(SHOWN)} for one that is only shown"
    )
    indented = [line for line in text.splitlines() if re.match(r"\s+```", line)]
    assert not indented, (
        f"{page_id(page)} has indented fences, which this test would not run: "
        f"{indented[:3]}; put examples at the top level of the page"
    )


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(lang == "python" for lang, _ in blocks(p))], ids=page_id
)
def test_python_blocks_run_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks that use `vfgym.sandbox` need Docker: without it they are left out and the
    test skips at the end, unless VFGYM_REQUIRE_DOCKER=1, as in CI."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    require = os.environ.get("VFGYM_REQUIRE_DOCKER") == "1"
    left_out = []
    for number, (lang, code) in enumerate(blocks(page)):
        if lang != "python":
            continue
        if "vfgym.sandbox" in code and not require and not docker_reachable():
            left_out.append(number)
            continue
        exec(compile(code, f"{page_id(page)} block {number}", "exec"), namespace)
    if left_out:
        pytest.skip(
            f"{page_id(page)} python blocks {left_out} need Docker and were not run; "
            "start it with: sudo bash sandboxes/setup-docker.sh"
        )


def shell_commands() -> list[tuple[str, str]]:
    commands = []
    for page in PAGES:
        for lang, code in blocks(page):
            if lang != "bash":
                continue
            for line in code.replace("\\\n", " ").splitlines():  # continued lines joined
                command = line.split("  #")[0].strip()
                if command and command != SELF:
                    commands.append((page_id(page), command))
    return commands


@pytest.fixture(scope="module")
def fresh_outputs() -> None:
    """The CLI page's eval writes to outputs/first-run, which refuses to be overwritten."""
    shutil.rmtree(ROOT / "outputs" / "first-run", ignore_errors=True)


@pytest.mark.parametrize(("page", "command"), shell_commands())
def test_shell_commands_run(page: str, command: str, fresh_outputs: None) -> None:
    # `vfgym` as the pages write it: the command of the environment running the tests
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PATH": path},
    )
    assert result.returncode == 0, (
        f"{page}: {command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    )


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_front_page_links_reach_files(page: str) -> None:
    """README.md and CONTRIBUTING.md live outside the site, so mkdocs does not check
    their links; they are relative, to work on a code host too, and must land on a
    file."""
    text = (ROOT / page).read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")]
    assert targets, f"{page} links to no docs page"
    broken = [t for t in targets if not (ROOT / t.partition("#")[0]).exists()]
    assert not broken, f"{page} links to missing files: {broken}"


def test_readme_stays_a_front_page() -> None:
    """Everything beyond the front page belongs in docs/ (issue 26: at most 200 lines)."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move detail into a docs/ page"


def test_site_builds_strictly(tmp_path: Path) -> None:
    """A broken link, a page missing from the nav's files or an API reference that
    names nothing fails the build."""
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("VFGYM_REQUIRE_DOCS") == "1":
            pytest.fail('mkdocs is not installed: pip install -e ".[docs]"')
        pytest.skip('mkdocs is not installed; install it with: pip install -e ".[docs]"')
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "architecture" / "index.html").is_file()
