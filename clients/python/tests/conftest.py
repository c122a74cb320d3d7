"""A real `cairn serve` for the tests, on each database, and small local fakes.

The `server` fixture is parametrized by database: every test that uses it
(or `cairn`) runs once against a server on SQLite (a file in a temporary
directory) and once against one on PostgreSQL (a schema of its own,
`cairn_py_<time>_<random>`, on `CAIRN_TEST_DATABASE_URL`, default
postgres://postgres@127.0.0.1:5432/test). One server per database for the
whole session: the binary of `CAIRN_BIN` (default target/debug/cairn of the
repository), API tokens, the review crew (examples/review.toml), the
agents crew (examples/agents, a scripted model: live text, no network) and
the payment crew (tests/crews/payment.toml, a `signal` step), on a free
loopback port. At the end it is stopped by its own pid, the schema
dropped and the directory removed, also when a test fails.

A PostgreSQL that does not answer fails the session, saying so;
`CAIRN_CLIENT_SKIP_POSTGRES=1` skips the PostgreSQL half instead. Schemas
of this prefix older than an hour (left by a session that was killed) are
dropped when a session starts.
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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn_client import Client

REPO = Path(__file__).resolve().parents[3]
TEST_CREWS = Path(__file__).resolve().parent / "crews"
SERVE_LOG_TAIL = 40
DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432/test"
SCHEMA_PREFIX = "cairn_py_"
STALE_SCHEMA_AFTER = 3600  # seconds: no session runs that long
SKIP_POSTGRES = os.environ.get("CAIRN_CLIENT_SKIP_POSTGRES") == "1"


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    pid: int
    log: Path
    db: str  # "sqlite" or "postgres"

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
    shutil.copy(TEST_CREWS / "payment.toml", crews / "payment.toml")


def pg_url() -> str:
    """The test PostgreSQL server's URL (`CAIRN_TEST_DATABASE_URL`, as CI sets it)."""
    return os.environ.get("CAIRN_TEST_DATABASE_URL") or DEFAULT_PG_URL


def psql(sql: str) -> str:
    """Runs `sql` on the test PostgreSQL; its output, or RuntimeError saying why not."""
    url = pg_url()
    try:
        done = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                               "-d", url, "-c", sql],
                              env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
                              capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise RuntimeError("psql is not installed (it makes the test schemas)") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"psql on {url} did not finish within 30 s") from None
    if done.returncode != 0:
        why = " ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise RuntimeError(f"psql on {url} failed: {why.rstrip('.?')}")
    return done.stdout


def sweep_stale_schemas() -> None:
    """Drops `cairn_py_<time>_*` schemas older than an hour (a killed session's)."""
    names = psql(f"SELECT nspname FROM pg_namespace WHERE starts_with(nspname, "
                 f"'{SCHEMA_PREFIX}')").split()
    cutoff = time.time() - STALE_SCHEMA_AFTER
    stale = [n for n in names
             if (stamp := n.removeprefix(SCHEMA_PREFIX).split("_")[0]).isdigit()
             and int(stamp) < cutoff]
    for name in stale:
        try:
            psql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        except RuntimeError:
            pass  # another session's sweep, or still in use: the next sweep


def postgres_db(cleanup: ExitStack) -> str:
    """A fresh schema (dropped by `cleanup`) and the `--db` URL that selects it."""
    name = f"{SCHEMA_PREFIX}{int(time.time())}_{secrets.token_hex(6)}"
    psql(f"CREATE SCHEMA {name}")
    cleanup.callback(psql, f"DROP SCHEMA IF EXISTS {name} CASCADE")
    base = pg_url()
    return f"{base}{'&' if '?' in base else '?'}options[search_path]={name}"


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


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any test: the PostgreSQL half needs a PostgreSQL that answers.

    Fails the whole session at once, saying so (not a skip), unless
    CAIRN_CLIENT_SKIP_POSTGRES=1; sweeps a killed session's schemas."""
    wanted = any(getattr(item, "callspec", None) and item.callspec.params.get("server")
                 == "postgres" for item in session.items)
    if SKIP_POSTGRES or not wanted:
        return
    try:
        psql("SELECT 1")
        sweep_stale_schemas()
    except RuntimeError as e:
        pytest.exit(f"FAILED: the PostgreSQL half of the tests cannot run: {e}. Start it, "
                    "set CAIRN_TEST_DATABASE_URL to one, or set CAIRN_CLIENT_SKIP_POSTGRES=1 "
                    "to run on SQLite only.", returncode=1)


DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.skipif(
    SKIP_POSTGRES, reason="CAIRN_CLIENT_SKIP_POSTGRES=1: SQLite only"))]


@pytest.fixture(scope="session", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A `cairn serve` on `request.param`'s database, for the session."""
    with ExitStack() as cleanup:  # undone in reverse: stop, drop the schema, remove the dir
        work = Path(tempfile.mkdtemp(prefix="cairn-client-test."))
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        lay_out_crews(work / "crews")
        db = postgres_db(cleanup) if request.param == "postgres" else f"sqlite://{work}/api.db"
        token = secrets.token_hex(24)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = work / "serve.log"
        env = {**os.environ, "CAIRN_API_TOKENS": token,
               "CAIRN_NOTES_LOG": str(work / "notes.log")}
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(cairn_bin()), "--db", db, "serve",
                 "--crews", str(work / "crews"), "--listen", f"127.0.0.1:{port}"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        cleanup.callback(stop, proc)
        wait_healthy(url, proc, log)
        yield Server(url, token, proc.pid, log, request.param)


@pytest.fixture
def cairn(server: Server) -> Iterator[Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
