"""Listings page by page: runs by cursor, threads by the Link header."""

from __future__ import annotations

import uuid

import httpx

from cairn_client import Client, Page


def test_runs_list_walks_every_page_in_order(cairn):
    tenant = f"pages-{uuid.uuid4().hex[:12]}"
    submitted = [cairn.submit("review", {"n": i}, tenant=tenant).id for i in range(5)]

    first = cairn.runs.page(tenant=tenant, limit=2)
    assert isinstance(first, Page) and len(first.items) == 2 and first.next_cursor
    listed = [run.id for run in cairn.runs.list(tenant=tenant, page_size=2)]
    assert listed == submitted
    newest = [run.id for run in cairn.runs.list(tenant=tenant, page_size=2, order="newest")]
    assert newest == submitted[::-1]


class CountingTransport(httpx.HTTPTransport):
    """Counts the GET /v1/runs requests (pages of runs) it sends."""

    pages = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/v1/runs":
            self.pages += 1
        return super().handle_request(request)


def test_runs_list_yields_each_of_250_runs_exactly_once(server, cairn):
    """250 runs of one tenant on one thread: the first stops at its review,
    the others stay queued behind it, so the server does little work."""
    tenant, thread = f"many-{uuid.uuid4().hex[:12]}", f"many-{uuid.uuid4()}"
    submitted = [cairn.submit("review", {"n": i}, tenant=tenant, thread=thread).id
                 for i in range(250)]
    assert len(set(submitted)) == 250

    counting = CountingTransport()
    with Client(server.url, server.token, transport=counting) as client:
        listed = [run.id for run in client.runs.list(tenant=tenant, page_size=32)]
    assert len(listed) == 250, f"{len(listed)} runs listed, not 250"
    assert set(listed) == set(submitted)
    assert counting.pages == 8  # 7 full pages of 32 and one of 26, none after it


def test_the_last_page_has_no_next_cursor(cairn):
    tenant = f"last-{uuid.uuid4().hex[:12]}"
    cairn.submit("review", {}, tenant=tenant)
    page = cairn.runs.page(tenant=tenant, limit=5)
    assert len(page.items) == 1 and page.next_cursor is None


def test_threads_list_follows_the_link_header(cairn):
    ours = [f"pages-{uuid.uuid4()}" for _ in range(3)]
    for thread in ours:
        cairn.submit("review", {"topic": thread}, thread=thread)
    first = cairn.threads.page(limit=2)
    assert len(first.items) == 2 and first.next_cursor is not None
    listed = [t.thread_id for t in cairn.threads.list(page_size=2)]
    assert len(listed) == len(set(listed)), "a thread came twice"
    assert listed[-3:] == ours  # the thread whose newest run is newest comes last
    assert cairn.threads.get(ours[0]).runs[0].thread_id == ours[0]
