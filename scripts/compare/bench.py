#!/usr/bin/env python3
"""Side by side with LangGraph and DBOS (docs/benchmarks.md, "Side by side
with LangGraph and DBOS"). Run it through `scripts/compare/run`, which makes
the pinned virtual environment and removes what a run leaves behind.

In one process, interleaved in rounds so that other load on the machine
touches all of them alike, it measures on SQLite and PostgreSQL:

- a raw durable commit of one 300-byte row (Python's sqlite3; psycopg);
- a LangGraph StateGraph of 30 trivial nodes in a line, checkpointed by
  SqliteSaver / PostgresSaver with durability="sync";
- a DBOS workflow of 30 trivial steps;

and then, in 5 interleaved repetitions, the resume of a LangGraph thread and
the recovery of a DBOS workflow with 1,000 finished steps and one pending.

A human-readable table goes to stdout; the last line of stdout is one JSON
object. `--cairn` also runs `cargo run --release -p cairn-bench` afterwards
and merges its figures in (prefixed `cairn_`) with `cairn_vs_*` ratios.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import platform
import secrets
import selectors
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypedDict

import psycopg
import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row

DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parents[2]

# Steps of the workflow whose per-step cost is measured (as cairn-bench).
STEPS = 30
# Per round: timed runs of each framework, timed raw commits of each database.
RUNS_PER_ROUND = 10
COMMITS_PER_ROUND = 300
WARMUP_RUNS = 2
WARMUP_COMMITS = 20
DEFAULT_ROUNDS = 5
# Finished steps of the resumed thread / recovered workflow; one more pending.
RESUME_DONE = 1000
RESUME_REPS = 5
ROW_BYTES = 300
# A LangGraph run of 1,000 nodes is 1,000 supersteps; the default limit is 25.
RECURSION_LIMIT = 10_000
DBOS_APP_VERSION = "cairn-compare-1"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def raw_payload() -> str:
    return ('{"bench":"raw","fill":"' + "x" * ROW_BYTES)[:ROW_BYTES]


def us(seconds: float) -> float:
    return seconds * 1e6


def ms(seconds: float) -> float:
    return seconds * 1e3


def schema_prefix(run_id: str) -> str:
    return f"cairn_compare_{run_id}"


def pg_connect(url: str, schema: Optional[str] = None, **kw: Any) -> psycopg.Connection:
    if schema is not None:
        kw["options"] = f"-c search_path={schema}"
    return psycopg.connect(url, connect_timeout=3, **kw)


def drop_schemas(url: str, run_id: str) -> list[str]:
    """Drops every schema this run created (names start with its prefix)."""
    like = schema_prefix(run_id).replace("_", r"\_") + "%"
    with pg_connect(url, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (like,)
            )
        ]
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    return names


# ---------------------------------------------------------------- raw commits


class RawSqlite:
    """BEGIN IMMEDIATE + INSERT + COMMIT of one row, WAL, synchronous=FULL."""

    system, backend = "raw", "sqlite"

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        self.conn.execute("PRAGMA synchronous=FULL")
        sync = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        if (mode, sync) != ("wal", 2):
            raise RuntimeError(f"raw SQLite is journal_mode={mode} synchronous={sync}")
        self.conn.execute(
            "CREATE TABLE raw (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)"
        )
        self.payload = raw_payload()
        for _ in range(WARMUP_COMMITS):
            self.commit()

    def commit(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO raw (payload) VALUES (?)", (self.payload,))
        self.conn.execute("COMMIT")

    def round(self) -> float:
        t = time.perf_counter()
        for _ in range(COMMITS_PER_ROUND):
            self.commit()
        return us(time.perf_counter() - t) / COMMITS_PER_ROUND

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """psycopg, autocommit off: INSERT, then COMMIT, one row per transaction."""

    system, backend = "raw", "postgres"

    def __init__(self, url: str, schema: str) -> None:
        self.conn = pg_connect(url, schema, autocommit=False)
        self.conn.execute(
            "CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)"
        )
        self.conn.commit()
        self.payload = raw_payload()
        for _ in range(WARMUP_COMMITS):
            self.commit()

    def commit(self) -> None:
        self.conn.execute("INSERT INTO raw (payload) VALUES (%s)", (self.payload,))
        self.conn.commit()

    def round(self) -> float:
        t = time.perf_counter()
        for _ in range(COMMITS_PER_ROUND):
            self.commit()
        return us(time.perf_counter() - t) / COMMITS_PER_ROUND

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------- LangGraph


class LineState(TypedDict):
    # The default reducer channel: each checkpoint holds the whole list.
    items: Annotated[list, operator.add]


def _node(i: int) -> Callable[[LineState], dict]:
    def node(state: LineState) -> dict:
        return {"items": [{"step": i, "ok": True}]}

    return node


class _Gate:
    """The pending node: records when it is entered."""

    def __init__(self) -> None:
        self.entered: Optional[float] = None

    def __call__(self, state: LineState) -> dict:
        self.entered = time.perf_counter()
        return {"items": [{"gate": True}]}


LG_GATE = _Gate()


def line_graph(steps: int, gate: bool) -> StateGraph:
    """`steps` nodes in a line (each appends one small dict), then `gate`."""
    g = StateGraph(LineState)
    prev = START
    for i in range(steps):
        name = f"step_{i:04d}"
        g.add_node(name, _node(i))
        g.add_edge(prev, name)
        prev = name
    if gate:
        g.add_node("gate", LG_GATE)
        g.add_edge(prev, "gate")
        prev = "gate"
    g.add_edge(prev, END)
    return g


def lg_config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}


class LangGraph:
    """One checkpointer; per-step runs and the 1,000-step resume."""

    system = "langgraph"

    def __init__(self, backend: str, url_or_path: str, schema: Optional[str]) -> None:
        self.backend = backend
        self.target = url_or_path
        self.schema = schema
        self.conn, self.saver = self._open()
        self.saver.setup()
        self.line = line_graph(STEPS, gate=False).compile(checkpointer=self.saver)
        self.resume_builder = line_graph(RESUME_DONE, gate=True)
        self.parker = self.resume_builder.compile(
            checkpointer=self.saver, interrupt_before=["gate"]
        )
        self.write_txns_per_step: Optional[float] = None
        if backend == "sqlite":
            self.write_txns_per_step = self._count_sqlite_commits()
        for _ in range(WARMUP_RUNS):
            self.run_once()

    def _open(self) -> tuple[Any, Any]:
        if self.backend == "sqlite":
            conn = sqlite3.connect(self.target, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            return conn, SqliteSaver(conn)
        # As PostgresSaver.from_conn_string opens it, in this run's schema.
        conn = pg_connect(
            self.target,
            self.schema,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
        )
        return conn, PostgresSaver(conn)

    def _count_sqlite_commits(self) -> float:
        """COMMITs the saver issues per step, from one untimed run."""
        count = [0]

        def trace(sql: str) -> None:
            if sql.strip().upper().startswith(("COMMIT", "END")):
                count[0] += 1

        self.conn.set_trace_callback(trace)
        try:
            self.run_once()
        finally:
            self.conn.set_trace_callback(None)
        return count[0] / STEPS

    def run_once(self) -> None:
        out = self.line.invoke(
            {"items": []}, lg_config(str(uuid.uuid4())), durability="sync"
        )
        if len(out["items"]) != STEPS:
            raise RuntimeError(f"LangGraph run ended with {len(out['items'])} items")

    def round(self) -> float:
        t = time.perf_counter()
        for _ in range(RUNS_PER_ROUND):
            self.run_once()
        return us(time.perf_counter() - t) / (RUNS_PER_ROUND * STEPS)

    def stored_bytes(self) -> int:
        if self.backend == "sqlite":
            (pages,) = self.conn.execute("PRAGMA page_count").fetchone()
            (free,) = self.conn.execute("PRAGMA freelist_count").fetchone()
            (size,) = self.conn.execute("PRAGMA page_size").fetchone()
            return (pages - free) * size
        row = self.conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS b "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (self.schema,),
        ).fetchone()
        return int(row["b"])

    def resume_once(self) -> dict:
        """Runs a fresh thread through 1,000 nodes, stopped before `gate`
        (interrupt_before), then resumes it from a fresh connection."""
        thread = str(uuid.uuid4())
        before = self.stored_bytes()
        t = time.perf_counter()
        self.parker.invoke({"items": []}, lg_config(thread), durability="sync")
        park_s = time.perf_counter() - t
        grown = self.stored_bytes() - before
        parked = self.parker.get_state(lg_config(thread))
        if parked.next != ("gate",) or len(parked.values["items"]) != RESUME_DONE:
            raise RuntimeError(
                f"LangGraph thread parked at {parked.next} "
                f"with {len(parked.values['items'])} items"
            )

        # A fresh connection and saver, the graph compiled before the clock
        # starts (as a process that has imported and built its graph).
        conn, saver = self._open()
        try:
            graph = self.resume_builder.compile(
                checkpointer=saver, interrupt_before=["gate"]
            )
            LG_GATE.entered = None
            t = time.perf_counter()
            out = graph.invoke(None, lg_config(thread), durability="sync")
            end = time.perf_counter()
        finally:
            conn.close()
        if LG_GATE.entered is None or len(out["items"]) != RESUME_DONE + 1:
            raise RuntimeError("LangGraph resume did not run the gate node once")
        to_node, full = LG_GATE.entered - t, end - t

        return {
            "to_node_ms": ms(to_node),
            "full_ms": ms(full),
            "park_s": park_s,
            "thread_mb": grown / 1e6,
        }

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------- DBOS

# What the gate step does: record its entry (the measuring process), or
# report and block until killed (the child that builds the workflow).
_DBOS_PARK = {"on": False, "parent": 0}
DBOS_GATE = threading.Event()
DBOS_MARKS: dict[str, float] = {}


@DBOS.step()
def dbos_noop(i: int) -> dict:
    return {"ok": True, "step": i}


@DBOS.step()
def dbos_gate() -> dict:
    if _DBOS_PARK["on"]:
        print("PARKED", flush=True)
        while os.getppid() == _DBOS_PARK["parent"]:
            time.sleep(0.2)
        os._exit(3)
    DBOS_MARKS["gate"] = time.perf_counter()
    DBOS_GATE.set()
    return {"gate": "passed"}


@DBOS.workflow()
def dbos_line(steps: int) -> int:
    for i in range(steps):
        dbos_noop(i)
    return steps


@DBOS.workflow()
def dbos_resume_line(steps: int) -> int:
    DBOS_MARKS["body"] = time.perf_counter()
    for i in range(steps):
        dbos_noop(i)
    dbos_gate()
    return steps


def dbos_config(backend: str, target: str, schema: Optional[str]) -> dict:
    config: dict = {
        "name": "cairn-compare",
        "application_version": DBOS_APP_VERSION,
        "log_level": "WARNING",
    }
    if backend == "sqlite":
        config["system_database_url"] = f"sqlite:///{target}"
    else:
        config["system_database_url"] = target
        config["dbos_system_schema"] = schema
    return config


class _SqliteCommitCounter:
    """Counts COMMITs on the SQLite connections SQLAlchemy opens while armed."""

    def __init__(self) -> None:
        self.count = 0

    def on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        def trace(sql: str) -> None:
            if sql.strip().upper().startswith(("COMMIT", "END")):
                self.count += 1

        dbapi_conn.set_trace_callback(trace)


class Dbos:
    """DBOS is one per process: launched for each block, destroyed after."""

    system = "dbos"

    def __init__(self, backend: str, target: str, schema: Optional[str]) -> None:
        self.backend = backend
        self.target = target
        self.schema = schema
        if backend == "sqlite":
            # DBOS leaves SQLite's journal mode alone (rollback journal);
            # WAL is set on the file, as the raw commit and LangGraph use.
            conn = sqlite3.connect(target)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.close()
            # DBOS sets no `synchronous`: check what a new connection gets.
            conn = sqlite3.connect(target)
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
            conn.close()
            if (mode, sync) != ("wal", 2):
                raise RuntimeError(f"DBOS's SQLite is journal_mode={mode} synchronous={sync}")
        self.write_txns_per_step: Optional[float] = None
        if backend == "sqlite":
            counter = _SqliteCommitCounter()
            sa.event.listen(sa.engine.Engine, "connect", counter.on_connect)
            try:
                self.launch()
                counter.count = 0
                dbos_line(STEPS)
                self.write_txns_per_step = counter.count / STEPS
            finally:
                DBOS.destroy()
                sa.event.remove(sa.engine.Engine, "connect", counter.on_connect)
        else:
            self.launch()
            DBOS.destroy()

    def launch(self) -> None:
        DBOS(config=dbos_config(self.backend, self.target, self.schema))
        DBOS.launch()

    def round(self) -> float:
        self.launch()
        try:
            for _ in range(WARMUP_RUNS):
                dbos_line(STEPS)
            t = time.perf_counter()
            for _ in range(RUNS_PER_ROUND):
                if dbos_line(STEPS) != STEPS:
                    raise RuntimeError("DBOS workflow returned a wrong result")
            return us(time.perf_counter() - t) / (RUNS_PER_ROUND * STEPS)
        finally:
            DBOS.destroy()

    def resume_once(self) -> dict:
        """A child process runs a 1,001-step workflow and is SIGKILLed in
        the last step; this (launched, warm) process then recovers it."""
        self.launch()
        try:
            return self._resume_once()
        finally:
            DBOS.destroy()

    def _resume_once(self) -> dict:
        wfid = f"cairn-compare-{uuid.uuid4()}"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--dbos-park",
            self.backend,
            self.target,
            self.schema or "",
            wfid,
        ]
        t = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            sel = selectors.DefaultSelector()
            sel.register(child.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 600
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    raise RuntimeError("the DBOS child did not reach its last step in 600 s")
                line = child.stdout.readline()
                if line == "":
                    raise RuntimeError(f"the DBOS child exited ({child.wait()}) before its last step")
                if line.strip() == "PARKED":
                    break
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        park_s = time.perf_counter() - t

        status = DBOS.get_workflow_status(wfid)
        steps = DBOS.list_workflow_steps(wfid)
        if status is None or status.status != "PENDING" or len(steps) != RESUME_DONE:
            raise RuntimeError(
                f"DBOS workflow {wfid} is {status and status.status} "
                f"with {len(steps)} recorded steps"
            )
        DBOS_GATE.clear()
        DBOS_MARKS.clear()
        t = time.perf_counter()
        handles = DBOS._recover_pending_workflows(["local"])
        if [h.get_workflow_id() for h in handles] != [wfid]:
            raise RuntimeError(f"DBOS recovered {[h.get_workflow_id() for h in handles]}")
        if not DBOS_GATE.wait(timeout=120):
            raise RuntimeError("the recovered DBOS workflow never reached its last step")
        gate = DBOS_MARKS["gate"]
        if handles[0].get_result() != RESUME_DONE:
            raise RuntimeError("the recovered DBOS workflow returned a wrong result")
        return {
            "to_step_ms": ms(gate - t),
            "replay_ms": ms(gate - DBOS_MARKS["body"]),
            "dequeue_ms": ms(DBOS_MARKS["body"] - t),
            "park_s": park_s,
        }


def dbos_park_child(backend: str, target: str, schema: str, wfid: str) -> None:
    _DBOS_PARK.update(on=True, parent=os.getppid())
    DBOS(config=dbos_config(backend, target, schema or None))
    DBOS.launch()
    with SetWorkflowID(wfid):
        dbos_resume_line(RESUME_DONE)
    # Not reached: the gate blocks until this process is killed.
    os._exit(4)


# ---------------------------------------------------------------- report


def spread(values: list[float]) -> dict:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def fmt(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def r2(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)


def run_cairn_bench(url: str) -> dict:
    log("--cairn: cargo run --release -p cairn-bench …")
    env = dict(os.environ, CAIRN_BENCH_DATABASE_URL=url)
    out = subprocess.run(
        ["cargo", "run", "--release", "-p", "cairn-bench"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"cairn-bench exited {out.returncode}")
    print("cairn-bench:")
    for line in lines[:-1]:
        print(f"  {line}")
    return json.loads(lines[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument("--resume-reps", type=int, default=RESUME_REPS)
    p.add_argument("--cairn", action="store_true", help="also run cairn-bench and merge it in")
    p.add_argument("--run-id", default=None, help=argparse.SUPPRESS)
    p.add_argument("--drop-schemas", metavar="RUN_ID", help=argparse.SUPPRESS)
    p.add_argument("--dbos-park", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    url = os.environ.get("CAIRN_BENCH_DATABASE_URL") or DEFAULT_PG_URL

    if args.dbos_park:
        dbos_park_child(*args.dbos_park)
        return 0
    if args.drop_schemas:
        try:
            for name in drop_schemas(url, args.drop_schemas):
                log(f"dropped leftover schema {name}")
        except psycopg.OperationalError:
            pass
        return 0

    # SIGTERM unwinds like Ctrl-C, so the finally blocks below clean up.
    def on_term(*_: Any) -> None:
        log("stopped by SIGTERM: cleaning up")
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    run_id = args.run_id or secrets.token_hex(4)
    if not run_id.isalnum():
        p.error("--run-id must be alphanumeric")
    prefix = schema_prefix(run_id)
    work = Path(tempfile.mkdtemp(prefix="cairn-compare-"))
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t_start = time.perf_counter()
    pg_note = None
    pg_version = None
    try:
        try:
            with pg_connect(url, autocommit=True) as conn:
                pg_version = conn.execute("SHOW server_version").fetchone()[0]
                conn.execute(f"CREATE SCHEMA {prefix}")
        except psycopg.OperationalError as e:
            pg_note = f"PostgreSQL is unreachable ({str(e).strip().splitlines()[0]}); its numbers are null."
            log(f"note: {pg_note}")
        has_pg = pg_note is None

        log(f"work dir {work}" + (f"; PostgreSQL schemas {prefix}, {prefix}_dbos" if has_pg else ""))
        subjects: list[Any] = [RawSqlite(work / "raw.db")]
        subjects.append(LangGraph("sqlite", str(work / "langgraph.db"), None))
        subjects.append(Dbos("sqlite", str(work / "dbos.db"), None))
        if has_pg:
            subjects.append(RawPostgres(url, prefix))
            subjects.append(LangGraph("postgres", url, prefix))
            subjects.append(Dbos("postgres", url, f"{prefix}_dbos"))
        # Interleaved: raw, LangGraph and DBOS alternate backends.
        order = ["raw", "langgraph", "dbos"]
        subjects.sort(key=lambda s: (order.index(s.system), s.backend != "sqlite"))

        per_round: dict[tuple[str, str], list[float]] = {
            (s.system, s.backend): [] for s in subjects
        }
        for r in range(args.rounds):
            # The order rotates every round.
            k = r % len(subjects)
            for s in subjects[k:] + subjects[:k]:
                per_round[(s.system, s.backend)].append(s.round())
            log(
                f"round {r + 1}/{args.rounds}: "
                + ", ".join(f"{a}/{b} {v[-1]:.0f} µs" for (a, b), v in per_round.items())
            )

        resumers = [s for s in subjects if s.system in ("langgraph", "dbos")]
        resumes: dict[tuple[str, str], list[dict]] = {
            (s.system, s.backend): [] for s in resumers
        }
        for rep in range(args.resume_reps):
            for s in resumers:
                resumes[(s.system, s.backend)].append(s.resume_once())
            log(
                f"resume {rep + 1}/{args.resume_reps}: "
                + ", ".join(
                    f"{a}/{b} {v[-1].get('to_node_ms', v[-1].get('to_step_ms')):.1f} ms"
                    for (a, b), v in resumes.items()
                )
            )
        for s in subjects:
            if hasattr(s, "close"):
                s.close()
    finally:
        try:
            DBOS.destroy()
        except Exception:
            pass
        shutil.rmtree(work, ignore_errors=True)
        if pg_note is None:
            try:
                drop_schemas(url, run_id)
            except Exception as e:  # noqa: BLE001
                log(f"warning: could not drop schemas {prefix}*: {e}")
    elapsed = time.perf_counter() - t_start
    load_end = os.getloadavg()

    # ------------------------------------------------------------ figures
    steps = {k: spread(v) for k, v in per_round.items()}
    txns = {(s.system, s.backend): s.write_txns_per_step for s in subjects if s.system != "raw"}
    out: dict[str, Any] = {}
    for backend in ("sqlite", "postgres"):
        raw = steps.get(("raw", backend))
        out[f"{backend}_raw_commit_us"] = r2(raw and raw["median"])
        for system in ("langgraph", "dbos"):
            st = steps.get((system, backend))
            out[f"{system}_{backend}_step_us"] = r2(st and st["median"])
            out[f"{system}_{backend}_step_ratio"] = r2(
                st and raw and st["median"] / raw["median"]
            )
    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    for backend in ("sqlite", "postgres"):
        lg = resumes.get(("langgraph", backend))
        out[f"langgraph_{backend}_resume_1000_ms"] = r2(lg and med(lg, "to_node_ms"))
        out[f"langgraph_{backend}_resume_1000_full_ms"] = r2(lg and med(lg, "full_ms"))
        out[f"langgraph_{backend}_run_1000_s"] = r2(lg and med(lg, "park_s"))
        out[f"langgraph_{backend}_thread_1000_mb"] = r2(lg and med(lg, "thread_mb"))
        db = resumes.get(("dbos", backend))
        out[f"dbos_{backend}_resume_1000_ms"] = r2(db and med(db, "to_step_ms"))
        out[f"dbos_{backend}_resume_1000_dequeue_ms"] = r2(db and med(db, "dequeue_ms"))
        out[f"dbos_{backend}_replay_1000_ms"] = r2(db and med(db, "replay_ms"))
    for (system, backend), v in txns.items():
        if v is not None:
            out[f"{system}_{backend}_commits_per_step"] = r2(v)
    out.update(
        rounds=args.rounds,
        resume_reps=args.resume_reps,
        langgraph_version=pkg_version("langgraph"),
        langgraph_checkpoint_sqlite_version=pkg_version("langgraph-checkpoint-sqlite"),
        langgraph_checkpoint_postgres_version=pkg_version("langgraph-checkpoint-postgres"),
        dbos_version=pkg_version("dbos"),
        psycopg_version=pkg_version("psycopg"),
        python_version=platform.python_version(),
        sqlite_version=sqlite3.sqlite_version,
        postgres_version=pg_version,
        load_avg_start=round(load_start[0], 2),
        load_avg_end=round(load_end[0], 2),
        seconds=round(elapsed, 1),
    )

    cairn: Optional[dict] = None
    if args.cairn:
        cairn = run_cairn_bench(url)
        for key, value in cairn.items():
            out[f"cairn_{key}"] = value

        def ratio(a: Any, b: Any) -> Optional[float]:
            return r2(a / b) if a is not None and b else None

        for backend in ("sqlite", "postgres"):
            c_step = cairn.get(f"{backend}_step_us")
            c_resume = cairn.get(f"{backend}_resume_1000_ms")
            for system in ("langgraph", "dbos"):
                out[f"cairn_vs_{system}_{backend}"] = ratio(
                    c_step, out[f"{system}_{backend}_step_us"]
                )
                out[f"cairn_vs_{system}_{backend}_resume"] = ratio(
                    c_resume, out[f"{system}_{backend}_resume_1000_ms"]
                )

    # ------------------------------------------------------------ table
    print()
    print(
        f"Per step: {args.rounds} interleaved rounds; per round {RUNS_PER_ROUND} runs of "
        f"a {STEPS}-step line per framework (wall time / {STEPS}) and "
        f"{COMMITS_PER_ROUND} raw commits of a {ROW_BYTES}-byte row per database. "
        "Median of the round figures (min-max)."
    )
    print(
        f"{'system':<10} {'backend':<9} {'µs per step/commit':>26} {'÷ raw commit':>13} "
        f"{'SQLite COMMITs/step':>20}"
    )
    for system in ("raw", "langgraph", "dbos", "cairn"):
        for backend in ("sqlite", "postgres"):
            if system == "cairn":
                if cairn is None:
                    continue
                v = cairn.get(f"{backend}_step_us")
                rr = cairn.get(f"{backend}_step_ratio")
                raw_c = cairn.get(f"{backend}_raw_commit_us")
                print(
                    f"{system:<10} {backend:<9} {fmt(v):>26} "
                    f"{(fmt(rr, 2) + '×') if rr is not None else '-':>13} "
                    f"  (its raw commit {fmt(raw_c)} µs)"
                )
                continue
            st = steps.get((system, backend))
            if st is None:
                print(f"{system:<10} {backend:<9} {'(not measured)':>26}")
                continue
            cell = f"{st['median']:.1f} ({st['min']:.0f}-{st['max']:.0f})"
            rr = out.get(f"{system}_{backend}_step_ratio")
            c = txns.get((system, backend))
            print(
                f"{system:<10} {backend:<9} {cell:>26} "
                f"{(fmt(rr, 2) + '×') if system != 'raw' else '':>13} "
                f"{fmt(c, 2) if c is not None else '':>20}"
            )
    print()
    print(
        f"Resume of {RESUME_DONE} finished steps and 1 pending, median of "
        f"{args.resume_reps}: ms from the call to the pending node/step being entered."
    )
    print(
        f"{'system':<10} {'backend':<9} {'to pending ms':>14} {'full call ms':>13} "
        f"{'dequeue ms':>11} {'replay ms':>10} {'thread MB':>10} {'1,000 steps s':>14}"
    )
    for system in ("langgraph", "dbos", "cairn"):
        for backend in ("sqlite", "postgres"):
            if system == "cairn":
                if cairn is None:
                    continue
                print(
                    f"{system:<10} {backend:<9} "
                    f"{fmt(cairn.get(f'{backend}_resume_1000_ms'), 2):>14} "
                    f"{fmt(cairn.get(f'{backend}_resume_1000_full_ms'), 2):>13}"
                )
                continue
            if (system, backend) not in resumes:
                print(f"{system:<10} {backend:<9} {'(not measured)':>14}")
                continue
            g = lambda key: out.get(f"{system}_{backend}_{key}")  # noqa: E731
            print(
                f"{system:<10} {backend:<9} {fmt(g('resume_1000_ms'), 2):>14} "
                f"{fmt(g('resume_1000_full_ms'), 2):>13} "
                f"{fmt(g('resume_1000_dequeue_ms'), 2):>11} {fmt(g('replay_1000_ms'), 2):>10} "
                f"{fmt(g('thread_1000_mb'), 1):>10} {fmt(g('run_1000_s'), 2):>14}"
            )
    if pg_note:
        print(f"note: {pg_note}")
    if cairn is not None:
        print(
            "cairn_vs_*: Cairn's figure / the other's (below 1: Cairn takes less time); "
            "cairn-bench ran after the rounds above, not interleaved with them."
        )
    print(
        f"{started}; {elapsed:.0f} s; load average {load_start[0]:.2f} at the start, "
        f"{load_end[0]:.2f} at the end"
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
