"""A real `cairn serve` for the tests, and small local fakes.

The server runs once per test session: the binary of `CAIRN_BIN` (default
target/debug/cairn of the repository), API tokens, a SQLite database in a
temporary directory, the review crew (examples/review.toml) and the agents
crew (examples/agents, a scripted model: live text, no network), on a free
loopback port. At the end it is stopped by its own pid and the directory is
removed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn_client import Client

REPO = Path(__file__).resolve().parents[3]
SERVE_LOG_TAIL = 40


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    pid: int
    log: Path

    def client(self, **kwargs) -> Client:
        return Client(self.url, self.token, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cairn_bin() -> Path:
    path = Path(os.environ.get("CAIRN_BIN", REPO / "target" / "debug" / "cairn"))
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no cairn binary at {path}: set CAIRN_BIN (or build it)")
    return path


def lay_out_crews(crews: Path) -> None:
    crews.mkdir()
    shutil.copy(REPO / "examples" / "review.toml", crews / "review.toml")
    shutil.copy(REPO / "examples" / "agents" / "crew.toml", crews / "agents.toml")
    shutil.copytree(REPO / "examples" / "agents" / "scripts", crews / "scripts")


def wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"cairn serve exited at start:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"cairn serve did not answer {url}/healthz within 15 s")


def stop(proc: subprocess.Popen) -> None:
    """Stops the server by its pid: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def pytest_configure(config: pytest.Config) -> None:
    """A SIGTERM (`timeout`, CI) ends the session like Ctrl-C, so the server is still stopped."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    work = Path(tempfile.mkdtemp(prefix="cairn-client-test."))
    lay_out_crews(work / "crews")
    token = secrets.token_hex(24)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    env = {**os.environ, "CAIRN_API_TOKENS": token, "CAIRN_NOTES_LOG": str(work / "notes.log")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(cairn_bin()), "--db", f"sqlite://{work}/api.db", "serve",
             "--crews", str(work / "crews"), "--listen", f"127.0.0.1:{port}"],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc, log)
        yield Server(url, token, proc.pid, log)
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def cairn(server: Server) -> Iterator[Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
