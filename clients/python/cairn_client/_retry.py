"""Bounded retries of 429 and 503 answers, honouring `Retry-After`.

They live in an httpx transport, so every request of the client (the
generated operations of `client.raw` too, and the event stream's first
answer) gets them. A 429 or 503 means the server refused before acting
(too many wrong tokens, connections or streams, or the database did not
answer), so POSTs are retried too; a submit's `key` makes that safe anyway.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import httpx

log = logging.getLogger("cairn_client")


@dataclass(frozen=True)
class RetryPolicy:
    """How the client retries a 429 or 503.

    attempts: tries in all, the first included (1: never retry).
    max_wait: the longest single wait in seconds; an answer asking for more
        (`Retry-After`) is not waited for: its error is raised at once, with
        `retry_after` set.
    default_wait: the wait without `Retry-After`, doubled after each try.
    """

    attempts: int = 4
    max_wait: float = 30.0
    default_wait: float = 0.5
    statuses: frozenset[int] = frozenset({429, 503})

    def delay(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before trying again after try `attempt`, or None to stop."""
        if response.status_code not in self.statuses or attempt >= self.attempts:
            return None
        wait = retry_after(response)
        if wait is None:
            wait = self.default_wait * 2 ** (attempt - 1)
        return wait if wait <= self.max_wait else None


def retry_after(response: httpx.Response) -> float | None:
    """The answer's `Retry-After` in seconds (delta-seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _note(request: httpx.Request, response: httpx.Response, wait: float, attempt: int) -> None:
    log.info("cairn-client: %s %s answered %d; try %d in %.1f s",
             request.method, request.url.path, response.status_code, attempt + 1, wait)


class RetryTransport(httpx.BaseTransport):
    """Wraps a transport; retries 429/503 answers as `policy` says."""

    def __init__(self, inner: httpx.BaseTransport, policy: RetryPolicy,
                 sleep: Callable[[float], None] = time.sleep):
        self._inner, self._policy, self._sleep = inner, policy, sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            response = self._inner.handle_request(request)
            wait = self._policy.delay(response, attempt)
            if wait is None:
                return response
            response.read()
            response.close()
            _note(request, response, wait, attempt)
            self._sleep(wait)
            attempt += 1

    def close(self) -> None:
        self._inner.close()


class AsyncRetryTransport(httpx.AsyncBaseTransport):
    """The async twin of `RetryTransport` (sleeps with anyio: asyncio or trio)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, policy: RetryPolicy,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep):
        self._inner, self._policy, self._sleep = inner, policy, sleep

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            response = await self._inner.handle_async_request(request)
            wait = self._policy.delay(response, attempt)
            if wait is None:
                return response
            await response.aread()
            await response.aclose()
            _note(request, response, wait, attempt)
            await self._sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self._inner.aclose()
