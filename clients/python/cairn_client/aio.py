"""The asynchronous client: `AsyncClient(url, token)`, the twin of `Client`.

Every method of `Client` is here as a coroutine, with the same arguments
and results; `watch()` is an async iterator; `runs.list()` and
`threads.list()` are async iterators. It runs on asyncio or trio (anyio).
"""

from __future__ import annotations

import builtins
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx
from httpx_sse import EventSource, SSEError, aconnect_sse

from . import _ops, _waiting, _wire
from ._generated import models as m
from ._generated.client import Client as RawClient
from ._retry import AsyncRetryTransport, RetryPolicy
from .client import USER_AGENT, http_timeout, stream_timeout
from .errors import ConnectionLost, ResponseNotUnderstood, WaitTimeout
from .events import RunEvent, WatchState

T = TypeVar("T")
log = logging.getLogger("cairn_client")


class AsyncClient:
    """A Cairn server's HTTP API, asynchronously. See `Client` for the arguments.

    Use it as `async with AsyncClient(url, token) as client:`, or `await
    client.aclose()`.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0,
                 retry: RetryPolicy | None = None, headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, verify: bool | str = True):
        self.url = url.rstrip("/")
        self._timeout = timeout
        inner = transport or httpx.AsyncHTTPTransport(verify=verify)
        self._http = httpx.AsyncClient(
            base_url=self.url, auth=_wire.BearerToken(token) if token else None,
            timeout=http_timeout(timeout), headers={"User-Agent": USER_AGENT, **(headers or {})},
            transport=AsyncRetryTransport(inner, retry or RetryPolicy()))
        self._doc: tuple[dict[str, Any] | None] | None = None
        self.runs = AsyncRuns(self)
        self.waits = AsyncWaits(self)
        self.threads = AsyncThreads(self)
        self.signals = AsyncSignals(self)

    @classmethod
    def from_env(cls, **kwargs: Any) -> AsyncClient:
        """A client of `CAIRN_SERVER` (default http://127.0.0.1:7700) with `CAIRN_TOKEN`."""
        url = os.environ.get("CAIRN_SERVER", "http://127.0.0.1:7700")
        return cls(url, os.environ.get("CAIRN_TOKEN") or None, **kwargs)

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def raw(self) -> RawClient:
        """The generated client, on this client's connections:
        `await get_run.asyncio(id, client=c.raw)`."""
        raw = RawClient(base_url=self.url)
        raw.set_async_httpx_client(self._http)
        return raw

    async def submit(self, crew: str, input: Any, *, key: str | None = None,
                     thread: str | None = None, tenant: str | None = None,
                     priority: int | None = None,
                     budget: m.Budget | Mapping[str, Any] | None = None,
                     on_busy: str | None = None, crew_version: str | None = None,
                     upgrade: str | None = None, traceparent: str | None = None) -> m.RunView:
        """Submits a run; see `Client.submit`."""
        return await self._send(_ops.submit(crew, input, key=key, thread=thread, tenant=tenant,
                                            priority=priority, budget=budget, on_busy=on_busy,
                                            crew_version=crew_version, upgrade=upgrade,
                                            traceparent=traceparent))

    async def wait(self, run_id: Any, until: str = "done", timeout: float | None = None,
                   poll: float = 0.5) -> m.RunView:
        """Waits until the run is `done` or `stopped`; see `Client.wait`."""
        _waiting.check_until(until)
        deadline = None if timeout is None else time.monotonic() + timeout
        backoff = _waiting.Backoff(most=poll)
        while True:
            run = await self.runs.get(run_id)
            if await self._reached(run, until):
                return run
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WaitTimeout(str(run_id), until, timeout or 0.0, run)
            await anyio.sleep(backoff() if left is None else min(backoff(), left))

    async def watch(self, run_id: Any, *, after: int = 0, follow: bool = True,
                    reconnects: int = 5) -> AsyncIterator[RunEvent]:
        """The run's events and live text; see `Client.watch`."""
        state, failures = WatchState(after), 0
        call = _ops.events(run_id, follow=follow)
        while True:
            before = state.last_seq
            try:
                async with self._open_stream(call, state) as source:
                    failures = 0
                    async for item in self._read_stream(source, state, call):
                        yield item
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
                if state.last_seq == before and await self._run_ended(run_id):
                    return
            await anyio.sleep(min(0.05 * 2 ** failures, 2.0))

    async def crews(self) -> list[m.CrewSummary]:
        """The crews the server offers."""
        return await self._send(_ops.list_crews())

    async def unsupported_operations(self) -> list[str]:
        """The operations this client uses that the server's API document lacks."""
        doc = await self._send(_ops.openapi())
        return _wire.operations_lacking(doc, _ops.ALL)

    async def _send(self, call: _ops.Call[T]) -> T:
        response = await self._http.request(call.op.method, call.path,
                                            params=call.params or None, json=call.body)
        if response.is_success:
            return _wire.read_success(call, response)
        raise await self._error(response, call)

    async def _error(self, response: httpx.Response, call: _ops.Call[Any]) -> Exception:
        error = _wire.api_error(response, call.op.id)
        if not _wire.may_be_older_server(error, call):
            return error
        known, doc = await self._server_doc()
        lacking = _wire.unsupported(doc, call, error) if known else None
        if lacking is None:
            return error
        lacking.__cause__ = error
        return lacking

    async def _server_doc(self) -> tuple[bool, dict[str, Any] | None]:
        if self._doc is not None:
            return True, self._doc[0]
        try:
            response = await self._http.get(_ops.OPENAPI.path)
        except httpx.HTTPError:
            return False, None
        if response.status_code not in (200, 404):
            return False, None
        self._doc = (_wire.parse_doc(response),)
        return True, self._doc[0]

    @asynccontextmanager
    async def _open_stream(self, call: _ops.Call[Any],
                           state: WatchState) -> AsyncIterator[EventSource]:
        async with aconnect_sse(self._http, "GET", call.path, params=call.params or None,
                                headers=state.headers(),
                                timeout=stream_timeout(self._timeout)) as source:
            if not source.response.is_success:
                await source.response.aread()
                raise await self._error(source.response, call)
            yield source

    @staticmethod
    async def _read_stream(source: EventSource, state: WatchState,
                           call: _ops.Call[Any]) -> AsyncIterator[RunEvent]:
        try:
            async for sse in source.aiter_sse():
                item = state.accept(sse)
                if item is not None:
                    yield item
        except (SSEError, ValueError, KeyError, TypeError) as e:
            raise ResponseNotUnderstood(call.op.id, f"{type(e).__name__}: {e}") from None

    async def _run_ended(self, run_id: Any) -> bool:
        return str((await self.runs.get(run_id)).status) in _waiting.ENDED

    async def _reached(self, run: m.RunView, until: str) -> bool:
        verdict = _waiting.verdict(run, until)
        if verdict is not None:
            return verdict
        if await self.waits.list(run=run.id, status="open"):
            return True
        return _waiting.has_children(run) and _waiting.waits_under(
            run.id, await self.waits.list(status="open"))


async def _iterate(fetch: Callable[[str | None], Awaitable[_ops.Page[T]]]) -> AsyncIterator[T]:
    cursor: str | None = None
    while True:
        page = await fetch(cursor)
        for item in page.items:
            yield item
        if not page.next_cursor or not page.items:
            return
        cursor = page.next_cursor


class AsyncRuns:
    """`client.runs`; see `Runs`."""

    def __init__(self, client: AsyncClient):
        self._c = client

    async def get(self, run_id: Any) -> m.RunView:
        return await self._c._send(_ops.get_run(run_id))

    def list(self, *, status: str | None = None, crew: str | None = None,
             tenant: str | None = None, parent: Any = None, order: str | None = None,
             page_size: int | None = None) -> AsyncIterator[m.Run]:
        """Every run that matches (an async iterator), page by page."""
        return _iterate(lambda cursor: self.page(status=status, crew=crew, tenant=tenant,
                                                 parent=parent, order=order, limit=page_size,
                                                 cursor=cursor))

    async def page(self, *, status: str | None = None, crew: str | None = None,
                   tenant: str | None = None, parent: Any = None, order: str | None = None,
                   limit: int | None = None, cursor: str | None = None) -> _ops.Page[m.Run]:
        return await self._c._send(_ops.runs_page(status=status, crew=crew, tenant=tenant,
                                                  parent=parent, order=order, limit=limit,
                                                  cursor=cursor))

    async def journal(self, run_id: Any,
                      step: int | None = None) -> builtins.list[m.JournalEntry]:
        return await self._c._send(_ops.journal(run_id, step))

    async def events(self, run_id: Any) -> builtins.list[RunEvent]:
        return [e async for e in self._c.watch(run_id, follow=False)]

    async def retry(self, run_id: Any, *, by: str | None = None, reason: str | None = None,
                    rerun_children: bool | None = None) -> m.RunView:
        return await self._c._send(_ops.retry(run_id, by=by, reason=reason,
                                              rerun_children=rerun_children))

    async def continue_(self, run_id: Any, *, by: str | None = None, reason: str | None = None,
                        raise_budget: m.Budget | Mapping[str, Any] | None = None) -> m.RunView:
        return await self._c._send(_ops.continue_(run_id, by=by, reason=reason,
                                                  raise_budget=raise_budget))

    async def cancel(self, run_id: Any, *, by: str | None = None,
                     reason: str | None = None) -> m.RunView:
        return await self._c._send(_ops.cancel(run_id, by=by, reason=reason))

    async def fork(self, run_id: Any, from_step: int, *, input: Any = None,
                   thread: str | None = None, crew_version: str | None = None,
                   rerun_children: bool | None = None, by: str | None = None,
                   reason: str | None = None) -> m.RunView:
        return await self._c._send(_ops.fork(run_id, from_step, input=input, thread=thread,
                                             crew_version=crew_version,
                                             rerun_children=rerun_children, by=by,
                                             reason=reason))

    async def add_context(self, run_id: Any, context: Mapping[str, Any], *,
                          by: str | None = None, reason: str | None = None) -> m.RunView:
        return await self._c._send(_ops.add_context(run_id, context, by=by, reason=reason))


class AsyncWaits:
    """`client.waits`; see `Waits`."""

    def __init__(self, client: AsyncClient):
        self._c = client

    async def list(self, *, run: Any = None, status: str | None = None) -> list[m.Wait]:
        return await self._c._send(_ops.list_waits(run=run, status=status))

    async def answer(self, wait_id: Any, decision: str, *, feedback: str | None = None,
                     output: Any = None, value: Any = None, by: str | None = None,
                     reason: str | None = None) -> m.Answered:
        return await self._c._send(_ops.answer(wait_id, decision, feedback=feedback,
                                               output=output, value=value, by=by,
                                               reason=reason))


class AsyncThreads:
    """`client.threads`; see `Threads`."""

    def __init__(self, client: AsyncClient):
        self._c = client

    def list(self, *, page_size: int = 100) -> AsyncIterator[m.ThreadSummary]:
        return _iterate(lambda cursor: self.page(limit=page_size, cursor=cursor))

    async def page(self, *, limit: int | None = None,
                   cursor: str | None = None) -> _ops.Page[m.ThreadSummary]:
        return await self._c._send(_ops.threads_page(limit=limit, cursor=cursor))

    async def get(self, thread_id: str) -> m.ThreadView:
        return await self._c._send(_ops.get_thread(thread_id))


class AsyncSignals:
    """`client.signals`; see `Signals`."""

    def __init__(self, client: AsyncClient):
        self._c = client

    async def send(self, target: str, name: str, payload: Any = None, id: str | None = None,
                   start: m.SignalStart | Mapping[str, Any] | None = None) -> m.Sent:
        """Sends a signal to the run `target` names; see `Signals.send`."""
        return await self._c._send(_ops.send_signal(target, name, payload=payload, id=id,
                                                    start=start))

    async def list(self, run_id: Any) -> m.RunSignals:
        """The run's signals and what it waits for; see `Signals.list`."""
        return await self._c._send(_ops.run_signals(run_id))


__all__ = ["AsyncClient", "AsyncRuns", "AsyncSignals", "AsyncThreads", "AsyncWaits"]
