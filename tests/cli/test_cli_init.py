"""`vfgym init`: the package it writes installs with `pip install -e` and passes its own
test (which runs `vfgym check`) as created, for every kind; bad names are refused.

The end-to-end test installs the packages into a fresh virtual environment that sees
this one's packages (vfgym among them) through a .pth file, so nothing is downloaded
and this environment's own registry is left as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

from vfgym.cli.init import init_package
from vfgym.envs.registry import load_environment


def docker_usable() -> bool:
    return shutil.which("docker") is not None and (
        subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )


def kinds_to_try() -> list[str]:
    """Every kind; `sandboxed` only where Docker runs (or fail when it must)."""
    if docker_usable():
        return ["game", "tool", "sandboxed"]
    if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
        pytest.fail("the sandboxed kind needs Docker and VFGYM_REQUIRE_DOCKER=1")
    return ["game", "tool"]


def child_venv(where: Path) -> Path:
    """A virtual environment without pip whose Python also sees this one's packages."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = sysconfig.get_paths()["purelib"]
    # addsitedir, not a plain path: the outer site's own .pth files (vfgym's editable
    # install among them) must run too.
    (Path(purelib) / "outer_site.pth").write_text(f"import site; site.addsitedir({outer!r})\n")
    return python


def test_every_kind_installs_and_passes_its_own_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kinds = kinds_to_try()
    packages = []
    for kind in kinds:
        code, out, err = run(["init", f"init-demo-{kind}", "--kind", kind], capsys)
        assert code == 0, err
        assert f"created init-demo-{kind}" in out and "pip install -e" in out
        packages.append(tmp_path / f"init-demo-{kind}")
    python = child_venv(tmp_path / "venv")
    editable = [arg for package in packages for arg in ("-e", str(package))]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    install = subprocess.run(
        [*pip, "--no-deps", "--no-build-isolation", "--no-index", *editable],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY")}
    tests = [str(package / "tests") for package in packages]
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(kinds)} passed" in done.stdout


def test_the_created_module_builds_without_installing(tmp_path: Path) -> None:
    root = init_package("init-loose", kind="tool")
    module = root / "init_loose.py"
    env = load_environment(str(module), num_examples=2)
    assert len(env.get_dataset()) == 2 and env.oai_tools[0]["function"]["name"] == "capital_of"
    text = (root / "pyproject.toml").read_text()
    assert 'init-loose = "init_loose:load_environment"' in text
    assert '[project.entry-points."vfgym.environments"]' in text
    assert (
        'main(["check", "init-loose", "-n", "3"])'
        in (root / "tests" / "test_init_loose.py").read_text()
    )
    sys.modules.pop("init_loose", None)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["init", "Word Ladder"], "use lowercase letters, digits and single hyphens"),
        (["init", "class"], "is a Python keyword"),
        (["init", "wordle"], "already registered"),
        (["init", "ok-name", "--kind", "board"], "invalid choice: 'board'"),
    ],
)
def test_a_name_or_kind_that_cannot_be_is_refused(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and words in err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    code, _, err = run(["init", "init-taken", "--dir", "taken"], capsys)
    assert code == 2 and "already exists and is not an empty folder" in err
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]
