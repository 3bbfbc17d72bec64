"""docs/training-trl.md: its training example runs, with the tiny local model in place
of the hub model it names (nothing may come from a model hub here)."""

from __future__ import annotations

import os
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "training-trl.md"
HUB_MODEL = 'MODEL = "Qwen/Qwen2.5-0.5B-Instruct"'


def example_block() -> str:
    """The page's training example: its first ```py block."""
    blocks = re.findall(r"^```py\n(.*?)^```", DOC.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert blocks, f"{DOC} has no ```py block"
    return blocks[0]


def test_the_docs_training_example_trains(tiny_model_dir: Path, tmp_path: Path) -> None:
    code = example_block()
    assert HUB_MODEL in code and 'output_dir="grpo-guess-the-number"' in code
    code = code.replace(HUB_MODEL, f"MODEL = {str(tiny_model_dir)!r}")
    code = code.replace('output_dir="grpo-guess-the-number"', f"output_dir={str(tmp_path)!r}")
    namespace: dict[str, object] = {}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, str(DOC), "exec"), namespace)
    finally:
        os.chdir(cwd)
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 2  # type: ignore[attr-defined]
    assert len(namespace["rollout"].history) == 2  # type: ignore[attr-defined]
