"""The real-vLLM tests' server: one CPU vLLM serving a tiny local model for the session.

Every test in this folder is marked `vllm`. Without the vLLM venv (`bash .ci/setup-vllm`)
they skip saying so, unless VFGYM_REQUIRE_VLLM=1 (CI), where they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_process import VLLMServer, VLLMUnavailable, running_vllm, vllm_python

HERE = Path(__file__).resolve().parent

#: A cold vLLM start on a busy two-core machine takes minutes, and the first test to ask
#: for the server pays for it, on top of the suite's default 300 s per test.
VLLM_TEST_TIMEOUT = 1500


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests `vllm` and give them room for the server's start."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.vllm)
            item.add_marker(pytest.mark.timeout(VLLM_TEST_TIMEOUT))


def _require_vllm() -> bool:
    return os.environ.get("VFGYM_REQUIRE_VLLM") == "1"


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """A vLLM server on a free loopback port, stopped (with its engine processes) at the end."""
    try:
        vllm_python()
    except VLLMUnavailable as exc:
        if _require_vllm():
            pytest.fail(f"VFGYM_REQUIRE_VLLM=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    with running_vllm(tmp_path_factory.mktemp("vllm")) as server:
        yield server
