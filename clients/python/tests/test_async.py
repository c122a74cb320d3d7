"""AsyncClient does what Client does: submit, wait, answer, watch, list."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict

import pytest

from cairn_client import AsyncClient, NotFound, OutputDelta
from cairn_client.models import RunView
from helpers import POLL, CuttingProxy

pytestmark = pytest.mark.anyio


async def next_wait(client: AsyncClient, run_id):
    run = await client.wait(run_id, until="stopped", timeout=30, poll=POLL)
    assert str(run.status) == "waiting"
    (wait,) = await client.waits.list(run=run_id, status="open")
    return wait


async def test_submit_with_a_key_wait_answer_and_wait_until_done(server):
    async with AsyncClient(server.url, server.token) as client:
        key = f"async-{uuid.uuid4()}"
        run = await client.submit("review", {"topic": "async"}, key=key)
        assert isinstance(run, RunView)
        assert (await client.submit("review", {"topic": "async"}, key=key)).id == run.id

        review = await next_wait(client, run.id)
        answered = await client.waits.answer(review.id, "approve")
        assert str(answered.status) == "answered"
        await client.waits.answer((await next_wait(client, run.id)).id, "approve")
        done = await client.wait(run.id, until="done", timeout=30, poll=POLL)
        assert str(done.status) == "succeeded"
        assert done.steps[-1].output.startswith("PUBLISHED Draft: ")


async def test_async_errors_are_typed(server):
    async with AsyncClient(server.url, server.token) as client:
        with pytest.raises(NotFound) as caught:
            await client.submit("no-such-crew", {})
    assert caught.value.code == "unknown_crew"


def cancel_once_back(proxy: CuttingProxy, cairn, blocker) -> None:
    """Lets the agents run start once the watch has reconnected (so its text is live)."""
    deadline = time.monotonic() + 10
    while len(proxy.last_event_ids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    cairn.runs.cancel(blocker.id)


async def test_async_watch_in_order_with_live_text_across_a_drop(server, cairn):
    """The agents crew behind a blocker (see test_watch), watched through a
    proxy that drops the stream once, right after the first event."""
    thread = f"async-live-{uuid.uuid4()}"
    blocker = cairn.submit("review", {"topic": "blocker"}, thread=thread)
    cairn.wait(blocker.id, until="stopped", timeout=30, poll=POLL)
    run = cairn.submit("agents", {"topic": "async text"}, thread=thread)
    proxy = CuttingProxy(server.url)
    events, text = [], defaultdict(str)
    try:
        async with AsyncClient(proxy.url, server.token) as client:
            async for item in client.watch(run.id):
                if isinstance(item, OutputDelta):
                    text[item.idx] += item.text
                    continue
                events.append(item)
                if len(events) == 1:
                    proxy.cut()
                    threading.Thread(target=cancel_once_back, args=(proxy, cairn, blocker)).start()
    finally:
        proxy.close()
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)) and events[-1].kind == "run_succeeded"
    assert [(e.seq, e.kind) for e in events] == [(e.seq, e.kind) for e in cairn.runs.events(run.id)]
    assert proxy.last_event_ids()[:2] == [None, "1"]
    assert set(text) == {0, 1, 2}, "live text of some step did not reach the async watch"


async def test_async_runs_list_pages(server, cairn):
    tenant = f"async-pages-{uuid.uuid4().hex[:12]}"
    submitted = [cairn.submit("review", {"n": i}, tenant=tenant).id for i in range(3)]
    async with AsyncClient(server.url, server.token) as client:
        listed = [run.id async for run in client.runs.list(tenant=tenant, page_size=2)]
    assert listed == submitted
