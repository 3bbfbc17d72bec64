"""Message helpers the engine and the client share."""

from __future__ import annotations

from vfgym.inference.messages import last_content


def test_last_content_of_a_message_with_content_parts_is_its_text() -> None:
    """`last_content` is typed `str`, and games call `.strip()` on it; content parts came
    back as the list itself."""
    parts = [
        {"type": "text", "text": "guess "},
        {"type": "image_url", "image_url": {"url": "data:x"}},
        {"type": "text", "text": "CRANE"},
    ]
    assert last_content([{"role": "user", "content": parts}]) == "guess CRANE"
