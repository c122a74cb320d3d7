"""The README's five-minute example, run as written against the real server.

The `python` blocks under "## Five minutes" run as they are, each in a
fresh interpreter, with only `CAIRN_SERVER` and `CAIRN_TOKEN` set (the
variables `Client.from_env()` reads); each must exit 0 and print what the
`text` block after it shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from itertools import pairwise

import pytest

from conftest import REPO

README = REPO / "clients" / "python" / "README.md"
EVENT = re.compile(r"\[\d+\] [a-z_]+")


def five_minutes() -> list[tuple[str, str]]:
    """(code, the output shown after it) of each python block of the section."""
    text = README.read_text()
    start = text.index("\n## Five minutes\n")
    section = text[start:text.index("\n## ", start + 1)]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    pairs = [(code, out) for (lang, code), (next_lang, out) in pairwise(blocks)
             if lang == "python" and next_lang == "text"]
    assert len(pairs) == 2, "README: a `text` block of output after each `python` block"
    return pairs


def run(code: str, server) -> str:
    env = {**os.environ, "CAIRN_SERVER": server.url, "CAIRN_TOKEN": server.token}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"the README's example failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def split(output: str) -> tuple[list[str], str, str]:
    """(event lines, the live text joined, the last line) of the watch example."""
    *lines, last = output.splitlines()
    events = [line for line in lines if EVENT.fullmatch(line)]
    text = "".join(line for line in lines if not EVENT.fullmatch(line))
    return events, text, last


@pytest.fixture(scope="module")
def blocks() -> list[tuple[str, str]]:
    return five_minutes()


def test_the_readme_watch_example_prints_what_it_says(server, blocks):
    code, shown = blocks[0]
    events, text, last = split(run(code, server))
    shown_events, shown_text, shown_last = split(shown)
    assert events == shown_events
    assert last == shown_last
    # Live text streamed before the watch connected is not replayed: a suffix.
    assert shown_text.endswith(text), f"live text {text!r} is not the README's"


def test_the_readme_review_example_prints_what_it_says(server, blocks):
    code, shown = blocks[1]
    assert run(code, server) == shown
