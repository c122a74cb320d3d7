"""Signals on a real server: a run's `signal` step, woken by `signals.send`
(by idempotency key, exactly once by id), `signals.list`, the typed errors,
and signal-with-submit; sync and async (the payment crew, tests/crews)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from cairn_client import AsyncClient, BadRequest, Client, NotFound
from cairn_client.models import RunSignals, Sent
from helpers import POLL


def waiting_for_signal(cairn: Client, run_id: Any, timeout: float = 30) -> RunSignals:
    """The run's signals once it is `waiting` at its signal step.

    (`wait(until="stopped")` waits for a person; a run waiting for a signal
    is not stopped, so this polls the run itself.)"""
    deadline = time.monotonic() + timeout
    while True:
        status = str(cairn.runs.get(run_id).status)
        if status == "waiting":
            return cairn.signals.list(run_id)
        assert status in ("queued", "running"), f"run {run_id} is {status}, not waiting"
        assert time.monotonic() < deadline, f"run {run_id} is still {status} after {timeout} s"
        time.sleep(POLL)


def test_a_signal_by_key_wakes_the_run_once(cairn):
    key = f"order-{uuid.uuid4()}"
    run = cairn.submit("payment", {"order": 42}, key=key)

    listed = waiting_for_signal(cairn, run.id)
    assert isinstance(listed, RunSignals)
    assert listed.signals == []
    assert listed.listening is not None
    assert (listed.listening.names, listed.listening.idx) == (["paid"], 1)

    payload = {"amount": 42, "currency": "EUR"}
    sent = cairn.signals.send(f"key:{key}", "paid", payload, id="evt-1")
    assert isinstance(sent, Sent)
    assert (sent.duplicate, sent.started) == (False, False)
    assert (sent.signal.id, sent.signal.name, sent.signal.payload) == ("evt-1", "paid", payload)
    assert sent.signal.run_id == run.id

    again = cairn.signals.send(f"key:{key}", "paid", {"amount": 0}, id="evt-1")
    assert again.duplicate is True
    assert again.woke is False
    assert (again.signal.id, again.signal.payload) == ("evt-1", payload), "not the first signal"

    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert str(done.status) == "succeeded"
    assert done.steps[1].output == payload
    assert done.steps[2].output == 'shipped {"amount":42,"currency":"EUR"}'

    after = cairn.signals.list(run.id)
    assert [s.id for s in after.signals] == ["evt-1"], "the duplicate was stored"
    assert after.signals[0].consumed_by == [1, 1]
    assert after.listening is None


def test_a_signal_sent_before_the_step_waits_is_buffered(cairn):
    thread = f"buffered-{uuid.uuid4()}"
    run = cairn.submit("payment", {"order": 7}, thread=thread)
    sent = cairn.signals.send(str(run.id), "paid", {"early": True})
    assert sent.signal.run_id == run.id and sent.signal.id  # an id the server made
    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert (str(done.status), done.steps[1].output) == ("succeeded", {"early": True})


def test_no_unfinished_run_is_not_found_no_signal_target(cairn):
    with pytest.raises(NotFound) as caught:
        cairn.signals.send("key:nobody", "paid", {"amount": 1})
    error = caught.value
    assert (error.status, error.code, error.operation) == (404, "no_signal_target", "sendSignal")


def test_a_bad_signal_name_is_a_bad_request_bad_signal(cairn):
    run = cairn.submit("payment", {"order": 1})
    with pytest.raises(BadRequest) as caught:
        cairn.signals.send(str(run.id), "", None)
    assert (caught.value.status, caught.value.code) == (400, "bad_signal")
    cairn.runs.cancel(run.id)


def test_signals_of_an_unknown_run_is_run_not_found(cairn):
    with pytest.raises(NotFound) as caught:
        cairn.signals.list(uuid.uuid4())
    assert (caught.value.code, caught.value.operation) == ("run_not_found", "getRunSignals")


def test_signal_with_submit_starts_a_run_on_the_thread(cairn):
    sent = cairn.signals.send("thread:t-1", "paid", {"order": 5}, start={"crew": "payment"})
    assert (sent.started, sent.duplicate) == (True, False)
    run = cairn.runs.get(sent.signal.run_id)
    assert (run.crew, run.thread_id, run.input_) == ("payment", "t-1", {"order": 5})
    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert (str(done.status), done.steps[1].output) == ("succeeded", {"order": 5})


@pytest.mark.anyio
async def test_the_async_client_sends_and_lists_signals(server, cairn):
    key = f"async-order-{uuid.uuid4()}"
    run = cairn.submit("payment", {"order": 9}, key=key)
    waiting_for_signal(cairn, run.id)
    async with AsyncClient(server.url, server.token) as client:
        listed = await client.signals.list(run.id)
        assert listed.listening is not None and listed.listening.names == ["paid"]
        sent = await client.signals.send(f"key:{key}", "paid", {"amount": 9}, id="async-1")
        assert (sent.duplicate, sent.signal.run_id) == (False, run.id)
        assert (await client.signals.send(f"key:{key}", "paid", id="async-1")).duplicate
        with pytest.raises(NotFound) as caught:
            await client.signals.send("key:nobody", "paid")
        assert caught.value.code == "no_signal_target"
        started = await client.signals.send(f"thread:async-{key}", "paid", {"order": 10},
                                            start={"crew": "payment", "version": "1"})
        assert started.started
    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert done.steps[1].output == {"amount": 9}
