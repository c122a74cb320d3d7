"""Listings page by page: runs by cursor, threads by the Link header."""

from __future__ import annotations

import uuid

from cairn_client import Page


def test_runs_list_walks_every_page_in_order(cairn):
    tenant = f"pages-{uuid.uuid4().hex[:12]}"
    submitted = [cairn.submit("review", {"n": i}, tenant=tenant).id for i in range(5)]

    first = cairn.runs.page(tenant=tenant, limit=2)
    assert isinstance(first, Page) and len(first.items) == 2 and first.next_cursor
    listed = [run.id for run in cairn.runs.list(tenant=tenant, page_size=2)]
    assert listed == submitted
    newest = [run.id for run in cairn.runs.list(tenant=tenant, page_size=2, order="newest")]
    assert newest == submitted[::-1]


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
