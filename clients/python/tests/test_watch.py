"""watch(): stored events in order, live model text, and a resumed stream."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from cairn_client import Client, ConnectionLost, Event, OutputDelta
from helpers import CuttingProxy, open_wait


def queued_agents_run(cairn: Client):
    """An agents run queued behind a waiting review run on the same thread,
    so a watch can connect before its model text streams; and the blocker."""
    thread = f"live-{uuid.uuid4()}"
    blocker = cairn.submit("review", {"topic": "blocker"}, thread=thread)
    open_wait(cairn, blocker.id)
    run = cairn.submit("agents", {"topic": "live text"}, thread=thread)
    assert str(cairn.runs.get(run.id).status) == "queued"
    return run, blocker


def assert_ordered_and_complete(cairn: Client, run_id, events: list[Event]) -> None:
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate: {seqs}"
    stored = [(e.seq, e.kind) for e in cairn.runs.events(run_id)]
    assert [(e.seq, e.kind) for e in events] == stored


def test_watch_yields_every_event_in_order_and_the_live_text(cairn):
    run, blocker = queued_agents_run(cairn)
    events, pieces = [], defaultdict(str)
    for item in cairn.watch(run.id):
        if isinstance(item, OutputDelta):
            pieces[(item.idx, item.after_seq)] += item.text
            continue
        events.append(item)
        if len(events) == 1:  # connected: now let the agents run start
            cairn.runs.cancel(blocker.id)
    assert (events[0].kind, events[-1].kind) == ("run_submitted", "run_succeeded")
    assert_ordered_and_complete(cairn, run.id, events)

    # Every piece is live text of a block the journal holds after it, whole.
    texts = [(j.idx, j.seq, j.payload["text"]) for j in cairn.runs.journal(run.id)
             if str(j.kind) == "assistant_text"]
    assert {idx for idx, _ in pieces} == {0, 1, 2}, "no live text from some step"
    for (idx, after), text in pieces.items():
        block = min((seq, t) for i, seq, t in texts if i == idx and seq > after)
        assert text == block[1]


def test_a_dropped_stream_resumes_with_last_event_id_without_gap_or_duplicate(server, cairn):
    proxy = CuttingProxy(server.url)
    run = cairn.submit("review", {"topic": "drops"})
    events, cut_at = [], None
    try:
        with Client(proxy.url, server.token) as through_proxy:
            for event in through_proxy.watch(run.id):
                if isinstance(event, OutputDelta):
                    continue
                events.append(event)
                if event.kind != "wait_opened":
                    continue
                if cut_at is None:  # the first wait: drop the stream, then answer
                    cut_at = event.seq
                    proxy.cut()
                for wait in cairn.waits.list(run=run.id, status="open"):
                    cairn.waits.answer(wait.id, "approve")
    finally:
        proxy.close()
    assert cut_at is not None and events[-1].kind == "run_succeeded"
    assert_ordered_and_complete(cairn, run.id, events)
    assert proxy.last_event_ids()[:2] == [None, str(cut_at)]


def test_watch_without_follow_ends_at_the_events_stored_now(cairn):
    run = cairn.submit("review", {"topic": "snapshot"})
    open_wait(cairn, run.id)
    events = list(cairn.watch(run.id, follow=False))
    assert events[-1].kind == "wait_opened"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert list(cairn.watch(run.id, follow=False, after=events[-2].seq)) == events[-1:]


def test_a_stream_that_cannot_come_back_is_connection_lost(server, cairn):
    proxy = CuttingProxy(server.url)
    run = cairn.submit("review", {"topic": "gone"})
    open_wait(cairn, run.id)
    with Client(proxy.url, server.token) as through_proxy:
        stream = through_proxy.watch(run.id, reconnects=2)
        first = next(stream)
        proxy.close()  # every connection dropped and no new one accepted
        with pytest.raises(ConnectionLost):
            for _ in stream:
                pass
    assert first.seq == 1
