"""Read a report page as a browser sees it: headless Chromium's DOM, parsed into elements."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest


class Elements(HTMLParser):
    """Tags with their attributes and the text inside elements with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text_by_id: dict[str, str] = {}
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag not in ("img", "input", "meta", "br", "rect", "line"):
            self._open.append(attributes.get("id"))
            if attributes.get("id"):
                self.text_by_id.setdefault(str(attributes["id"]), "")

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for element_id in self._open:
            if element_id:
                self.text_by_id[element_id] += data


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("VFGYM_REQUIRE_CHROMIUM") == "1":
            pytest.fail("VFGYM_REQUIRE_CHROMIUM=1 but no chromium is installed")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def dump_dom(browser: str, url: str, profile: Path) -> str:
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
