"""Retries of 429 and 503, honouring Retry-After, against a local fake server
(the real server does not answer 503 on demand)."""

from __future__ import annotations

import email.utils
import json
import time

import httpx
import pytest

from cairn_client import (
    AsyncClient,
    Client,
    RetryPolicy,
    ServerError,
    ServiceUnavailable,
    TooManyRequests,
)
from cairn_client._retry import retry_after
from helpers import FakeServer, error, run_json


def scripted(*replies):
    """A handler that answers `replies` in order, then 200 `{"waits": []}`."""
    queue = list(replies)
    return lambda seen: queue.pop(0) if queue else (200, {}, {"waits": []})


@pytest.fixture
def fake():
    servers = []

    def start(*replies) -> FakeServer:
        servers.append(FakeServer(scripted(*replies)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_a_503_is_tried_again_after_its_retry_after(fake):
    server = fake(error(503, "unavailable", {"Retry-After": "1"}))
    with Client(server.url, "t" * 20) as client:
        assert client.waits.list() == []
    assert len(server.seen) == 2
    assert server.seen[1].at - server.seen[0].at >= 1.0


def test_429s_are_retried_and_a_post_is_sent_again_whole(fake):
    run = run_json()
    server = fake(error(429, "too_many_attempts", {"Retry-After": "0"}),
                  error(429, "too_many_attempts", {"Retry-After": "0"}),
                  (201, {}, run))
    with Client(server.url, "t" * 20) as client:
        submitted = client.submit("review", {"topic": "again"}, key="k-1")
    assert str(submitted.id) == run["id"]
    assert [(s.method, s.path) for s in server.seen] == [("POST", "/v1/runs")] * 3
    bodies = {s.body for s in server.seen}
    assert len(bodies) == 1 and json.loads(bodies.pop())["idempotency_key"] == "k-1"


def test_retries_are_bounded(fake):
    server = fake(*[error(503, "unavailable", {"Retry-After": "0"})] * 10)
    with Client(server.url, "t" * 20, retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(ServiceUnavailable) as caught:
            client.waits.list()
    assert len(server.seen) == 3
    raised = caught.value
    assert (raised.status, raised.code, raised.retry_after) == (503, "unavailable", 0)


def test_a_retry_after_longer_than_max_wait_is_raised_at_once(fake):
    server = fake(error(429, "too_many_attempts", {"Retry-After": "120"}))
    started = time.monotonic()
    with Client(server.url, "t" * 20, retry=RetryPolicy(max_wait=5)) as client:
        with pytest.raises(TooManyRequests) as caught:
            client.waits.list()
    assert time.monotonic() - started < 1.0
    assert len(server.seen) == 1 and caught.value.retry_after == 120


def test_other_errors_are_not_retried(fake):
    server = fake(error(500, "internal"), error(500, "internal"))
    with Client(server.url, "t" * 20) as client:
        with pytest.raises(ServerError) as caught:
            client.waits.list()
    assert len(server.seen) == 1 and (caught.value.status, caught.value.code) == (500, "internal")


def test_retry_after_reads_seconds_and_http_dates():
    def answer(value: str) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value})

    assert retry_after(answer("3")) == 3
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after(answer(later)) <= 30
    assert retry_after(answer("soon")) is None
    assert retry_after(httpx.Response(503)) is None


@pytest.mark.anyio
async def test_the_async_client_retries_the_same_way(fake):
    server = fake(error(503, "too_many_streams", {"Retry-After": "1"}))
    async with AsyncClient(server.url, "t" * 20) as client:
        assert await client.waits.list() == []
    assert len(server.seen) == 2
    assert server.seen[1].at - server.seen[0].at >= 1.0
