"""The synchronous client: `Client(url, token)`."""

from __future__ import annotations

import builtins
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
from httpx_sse import EventSource, SSEError, connect_sse

from . import _ops, _waiting, _wire
from ._generated import models as m
from ._generated.client import Client as RawClient
from ._retry import RetryPolicy, RetryTransport
from .errors import ConnectionLost, ResponseNotUnderstood, WaitTimeout
from .events import RunEvent, WatchState

T = TypeVar("T")
log = logging.getLogger("cairn_client")
VERSION = "0.1.0"
USER_AGENT = f"cairn-client-python/{VERSION}"


def http_timeout(timeout: float) -> httpx.Timeout:
    """The timeout of ordinary requests."""
    return httpx.Timeout(timeout, connect=min(timeout, 10.0))


def stream_timeout(timeout: float) -> httpx.Timeout:
    """An event stream's: reads wait longer than the server's 15 s keep-alives."""
    return httpx.Timeout(timeout, connect=min(timeout, 10.0), read=max(timeout, 45.0))


class Client:
    """A Cairn server's HTTP API, synchronously.

    `url` is the server's address (`http://127.0.0.1:7700`); `token` its
    bearer token (None for a server in development mode). The token is
    sent on every request and shown nowhere: not in the repr, logs or
    errors. 429 and 503 answers are retried as `retry` says (bounded,
    honouring `Retry-After`). Use it as a context manager, or `close()` it.

    `runs`, `waits`, `threads` and `signals` group the other operations; `raw` is the
    generated client (every operation of docs/openapi.json) on the same
    connection pool.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0,
                 retry: RetryPolicy | None = None, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, verify: bool | str = True):
        self.url = url.rstrip("/")
        self._timeout = timeout
        inner = transport or httpx.HTTPTransport(verify=verify)
        self._http = httpx.Client(
            base_url=self.url, auth=_wire.BearerToken(token) if token else None,
            timeout=http_timeout(timeout), headers={"User-Agent": USER_AGENT, **(headers or {})},
            transport=RetryTransport(inner, retry or RetryPolicy()))
        self._doc: tuple[dict[str, Any] | None] | None = None
        self.runs = Runs(self)
        self.waits = Waits(self)
        self.threads = Threads(self)
        self.signals = Signals(self)

    @classmethod
    def from_env(cls, **kwargs: Any) -> Client:
        """A client of `CAIRN_SERVER` (default http://127.0.0.1:7700) with `CAIRN_TOKEN`."""
        url = os.environ.get("CAIRN_SERVER", "http://127.0.0.1:7700")
        return cls(url, os.environ.get("CAIRN_TOKEN") or None, **kwargs)

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def raw(self) -> RawClient:
        """The generated client (`cairn_client.api`), sharing this client's
        connections, token and retries: `get_run.sync(id, client=c.raw)`."""
        raw = RawClient(base_url=self.url)
        raw.set_httpx_client(self._http)
        return raw

    # --- the main verbs -------------------------------------------------

    def submit(self, crew: str, input: Any, *, key: str | None = None,
               thread: str | None = None, tenant: str | None = None,
               priority: int | None = None, budget: m.Budget | Mapping[str, Any] | None = None,
               on_busy: str | None = None, crew_version: str | None = None,
               upgrade: str | None = None, traceparent: str | None = None) -> m.RunView:
        """Submits a run of `crew` with `input` (any JSON value); returns the run.

        key: an idempotency key: the same key again returns the same run.
        thread: the conversation thread; tenant: whose run it is;
        priority: -1000 to 1000; budget: limits on its model use
        (`{"tokens": 5000, ...}`); on_busy: "queue", "reject" or "interrupt".
        """
        return self._send(_ops.submit(crew, input, key=key, thread=thread, tenant=tenant,
                                      priority=priority, budget=budget, on_busy=on_busy,
                                      crew_version=crew_version, upgrade=upgrade,
                                      traceparent=traceparent))

    def wait(self, run_id: Any, until: str = "done", timeout: float | None = None,
             poll: float = 0.5) -> m.RunView:
        """Waits until the run is `done` (succeeded, failed or cancelled) or
        `stopped` (done, interrupted, or waiting for a person); returns it.

        Polls the run, from 50 ms up to `poll` seconds apart. Raises
        `WaitTimeout` (a `TimeoutError`, carrying the last view) after
        `timeout` seconds; None waits as long as it takes.
        """
        _waiting.check_until(until)
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = _waiting.Backoff(most=poll)
        while True:
            run = self.runs.get(run_id)
            if self._reached(run, until):
                return run
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(str(run_id), until, timeout or 0.0, run)
            time.sleep(backoff() if left is None else min(backoff(), left))

    def watch(self, run_id: Any, *, after: int = 0, follow: bool = True,
              reconnects: int = 5) -> Iterator[RunEvent]:
        """The run's events, in order, then new ones as they happen: stored
        `Event`s and live `OutputDelta` text.

        Ends when the run has succeeded, failed or been cancelled (with
        `follow=False`: after the events stored now). A dropped connection
        is resumed with `Last-Event-ID`: no stored event is skipped or
        repeated. `after`: start after this `seq`. `reconnects`: tries in a
        row without getting the stream back before `ConnectionLost`.
        """
        state, failures = WatchState(after), 0
        call = _ops.events(run_id, follow=follow)
        while True:
            before = state.last_seq
            try:
                with self._open_stream(call, state) as source:
                    failures = 0
                    yield from self._read_stream(source, state, call)
            except httpx.TransportError as e:
                failures += 1
                if failures > reconnects:
                    raise ConnectionLost(f"run {run_id}: the event stream broke {failures} "
                                         f"times in a row ({type(e).__name__})") from e
                log.info("cairn-client: run %s: event stream broke (%s); resuming after %d",
                         run_id, type(e).__name__, state.last_seq)
            else:
                if not follow or state.ended:
                    return
                if state.last_seq == before and self._run_ended(run_id):
                    return
            time.sleep(min(0.05 * 2 ** failures, 2.0))

    def crews(self) -> list[m.CrewSummary]:
        """The crews the server offers (every loaded version)."""
        return self._send(_ops.list_crews())

    def unsupported_operations(self) -> list[str]:
        """The operations this client uses that the server's API document lacks."""
        doc = self._send(_ops.openapi())
        return _wire.operations_lacking(doc, _ops.ALL)

    # --- plumbing -------------------------------------------------------

    def _send(self, call: _ops.Call[T]) -> T:
        response = self._http.request(call.op.method, call.path, params=call.params or None,
                                      json=call.body)
        if response.is_success:
            return _wire.read_success(call, response)
        raise self._error(response, call)

    def _error(self, response: httpx.Response, call: _ops.Call[Any]) -> Exception:
        error = _wire.api_error(response, call.op.id)
        if not _wire.may_be_older_server(error, call):
            return error
        known, doc = self._server_doc()
        lacking = _wire.unsupported(doc, call, error) if known else None
        if lacking is None:
            return error
        lacking.__cause__ = error
        return lacking

    def _server_doc(self) -> tuple[bool, dict[str, Any] | None]:
        """(whether it could be told, the server's API document or None if it has none)."""
        if self._doc is not None:
            return True, self._doc[0]
        try:
            response = self._http.get(_ops.OPENAPI.path)
        except httpx.HTTPError:
            return False, None
        if response.status_code not in (200, 404):
            return False, None
        self._doc = (_wire.parse_doc(response),)
        return True, self._doc[0]

    @contextmanager
    def _open_stream(self, call: _ops.Call[Any], state: WatchState) -> Iterator[EventSource]:
        with connect_sse(self._http, "GET", call.path, params=call.params or None,
                         headers=state.headers(), timeout=stream_timeout(self._timeout)) as source:
            if not source.response.is_success:
                source.response.read()
                raise self._error(source.response, call)
            yield source

    @staticmethod
    def _read_stream(source: EventSource, state: WatchState,
                     call: _ops.Call[Any]) -> Iterator[RunEvent]:
        try:
            for sse in source.iter_sse():
                item = state.accept(sse)
                if item is not None:
                    yield item
        except (SSEError, ValueError, KeyError, TypeError) as e:
            raise ResponseNotUnderstood(call.op.id, f"{type(e).__name__}: {e}") from None

    def _run_ended(self, run_id: Any) -> bool:
        """Whether the run has succeeded, failed or been cancelled."""
        return str(self.runs.get(run_id).status) in _waiting.ENDED

    def _reached(self, run: m.RunView, until: str) -> bool:
        verdict = _waiting.verdict(run, until)
        if verdict is not None:
            return verdict
        if self.waits.list(run=run.id, status="open"):
            return True
        return _waiting.has_children(run) and _waiting.waits_under(
            run.id, self.waits.list(status="open"))


def _iterate(fetch: Callable[[str | None], _ops.Page[T]]) -> Iterator[T]:
    """Every item of every page, fetching the next page as the last is used up."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if not page.next_cursor or not page.items:
            return
        cursor = page.next_cursor


class Runs:
    """Runs: read, list, and act on them (`client.runs`)."""

    def __init__(self, client: Client):
        self._c = client

    def get(self, run_id: Any) -> m.RunView:
        """The run with its steps."""
        return self._c._send(_ops.get_run(run_id))

    def list(self, *, status: str | None = None, crew: str | None = None,
             tenant: str | None = None, parent: Any = None, order: str | None = None,
             page_size: int | None = None) -> Iterator[m.Run]:
        """Every run that matches, oldest first (`order="newest"`: newest), page by page."""
        return _iterate(lambda cursor: self.page(status=status, crew=crew, tenant=tenant,
                                                 parent=parent, order=order, limit=page_size,
                                                 cursor=cursor))

    def page(self, *, status: str | None = None, crew: str | None = None,
             tenant: str | None = None, parent: Any = None, order: str | None = None,
             limit: int | None = None, cursor: str | None = None) -> _ops.Page[m.Run]:
        """One page of runs and the cursor of the next."""
        return self._c._send(_ops.runs_page(status=status, crew=crew, tenant=tenant,
                                            parent=parent, order=order, limit=limit,
                                            cursor=cursor))

    def journal(self, run_id: Any,
                step: int | None = None) -> builtins.list[m.JournalEntry]:
        """The run's journal items (model text, tool calls and results, answers)."""
        return self._c._send(_ops.journal(run_id, step))

    def events(self, run_id: Any) -> builtins.list[RunEvent]:
        """The run's events stored now (the stream with `follow=false`)."""
        return list(self._c.watch(run_id, follow=False))

    def retry(self, run_id: Any, *, by: str | None = None, reason: str | None = None,
              rerun_children: bool | None = None) -> m.RunView:
        """Runs a failed run's failed step again."""
        return self._c._send(_ops.retry(run_id, by=by, reason=reason,
                                        rerun_children=rerun_children))

    def continue_(self, run_id: Any, *, by: str | None = None, reason: str | None = None,
                  raise_budget: m.Budget | Mapping[str, Any] | None = None) -> m.RunView:
        """Carries an interrupted run on (raising its budget first, if given)."""
        return self._c._send(_ops.continue_(run_id, by=by, reason=reason,
                                            raise_budget=raise_budget))

    def cancel(self, run_id: Any, *, by: str | None = None,
               reason: str | None = None) -> m.RunView:
        """Cancels the run (a running one stops at once; see the API doc)."""
        return self._c._send(_ops.cancel(run_id, by=by, reason=reason))

    def fork(self, run_id: Any, from_step: int, *, input: Any = None, thread: str | None = None,
             crew_version: str | None = None, rerun_children: bool | None = None,
             by: str | None = None, reason: str | None = None) -> m.RunView:
        """A new run with the source's steps before `from_step`, executing from there."""
        return self._c._send(_ops.fork(run_id, from_step, input=input, thread=thread,
                                       crew_version=crew_version, rerun_children=rerun_children,
                                       by=by, reason=reason))

    def add_context(self, run_id: Any, context: Mapping[str, Any], *, by: str | None = None,
                    reason: str | None = None) -> m.RunView:
        """Merges a JSON object into a queued or interrupted run's input."""
        return self._c._send(_ops.add_context(run_id, context, by=by, reason=reason))


class Waits:
    """Human waits: reviews, approvals and questions (`client.waits`)."""

    def __init__(self, client: Client):
        self._c = client

    def list(self, *, run: Any = None, status: str | None = None) -> list[m.Wait]:
        """Waits, oldest first: of one run, and/or with one status ("open", ...)."""
        return self._c._send(_ops.list_waits(run=run, status=status))

    def answer(self, wait_id: Any, decision: str, *, feedback: str | None = None,
               output: Any = None, value: Any = None, by: str | None = None,
               reason: str | None = None) -> m.Answered:
        """Answers a wait: "approve"; "reject" with `feedback`; "edit" with
        `output`; "answer" (a question) with `value`. Returns the wait and
        the run as the answer left it. A closed wait is `Conflict`
        (`wait_closed`, whose `details` name the run's open wait)."""
        return self._c._send(_ops.answer(wait_id, decision, feedback=feedback, output=output,
                                         value=value, by=by, reason=reason))


class Threads:
    """Conversation threads (`client.threads`)."""

    def __init__(self, client: Client):
        self._c = client

    def list(self, *, page_size: int = 100) -> Iterator[m.ThreadSummary]:
        """Every thread, the one whose newest run is oldest first, page by page."""
        return _iterate(lambda cursor: self.page(limit=page_size, cursor=cursor))

    def page(self, *, limit: int | None = None,
             cursor: str | None = None) -> _ops.Page[m.ThreadSummary]:
        """One page (with `limit`) and the cursor of the next, from the `Link` header."""
        return self._c._send(_ops.threads_page(limit=limit, cursor=cursor))

    def get(self, thread_id: str) -> m.ThreadView:
        """A thread: its runs, totals and budget."""
        return self._c._send(_ops.get_thread(thread_id))


class Signals:
    """Signals: named messages to runs, which their `signal` steps wait for (`client.signals`)."""

    def __init__(self, client: Client):
        self._c = client

    def send(self, target: str, name: str, payload: Any = None, id: str | None = None,
             start: m.SignalStart | Mapping[str, Any] | None = None) -> m.Sent:
        """Sends the signal `name` (with `payload`, any JSON) to the one unfinished run
        `target` names: a run id, `key:K` (the run submitted with idempotency key K) or
        `thread:T` (the thread's one unfinished run). Returns the `Sent` answer: the
        `signal` stored, and whether the send was a `duplicate`, `woke` the run or
        `started` it.

        id: an idempotency id: the same id again stores nothing and answers the first
        signal (`duplicate` true). start: signal-with-submit, `{"crew": NAME,
        "version"?: V, "input"?: JSON}` (or a `SignalStart`): a `key:` or `thread:`
        target without an unfinished run starts a run of that crew and gives it the
        signal. No such run is `NotFound` (`no_signal_target`), several `Conflict`
        (`ambiguous_target`), a bad name, target or id `BadRequest` (`bad_signal`).
        """
        return self._c._send(_ops.send_signal(target, name, payload=payload, id=id,
                                              start=start))

    def list(self, run_id: Any) -> m.RunSignals:
        """The run's signals, buffered and consumed, oldest first (`signals`), and what
        its open `signal` step waits for (`listening`: its `names`; None when none)."""
        return self._c._send(_ops.run_signals(run_id))


__all__ = ["Client", "Runs", "Signals", "Threads", "Waits"]
