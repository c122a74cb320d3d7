"""Human waits and run actions on a real server (the review and agents crews)."""

from __future__ import annotations

import time

import pytest

from cairn_client import Conflict, WaitTimeout
from cairn_client.models import Answered
from helpers import POLL, open_wait, review_to_success


def test_reject_edit_approve_a_review_to_the_end(cairn):
    run = cairn.submit("review", {"topic": "clients"})
    first = open_wait(cairn, run.id)
    assert (str(first.kind), first.attempt) == ("review", 1)

    rejected = cairn.waits.answer(first.id, "reject", feedback="shorter")
    assert isinstance(rejected, Answered)
    assert (str(rejected.status), rejected.run.id) == ("answered", run.id)

    second = open_wait(cairn, run.id)
    assert (str(second.kind), second.attempt) == ("review", 2)
    assert "rewritten after review (shorter)" in second.prompt["body"]
    cairn.waits.answer(second.id, "edit", output={"title": "Edited", "body": "by a test"})

    approval = open_wait(cairn, run.id)
    assert str(approval.kind) == "approval"
    cairn.waits.answer(approval.id, "approve", by="pytest")

    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert str(done.status) == "succeeded"
    assert done.steps[-1].output == "PUBLISHED Edited: by a test"


def test_rejecting_the_approval_fails_the_run_and_retry_runs_it_again(cairn):
    run = cairn.submit("review", {"topic": "retries"})
    cairn.waits.answer(open_wait(cairn, run.id).id, "approve")
    cairn.waits.answer(open_wait(cairn, run.id).id, "reject", feedback="not now")
    failed = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert str(failed.status) == "failed"

    cairn.runs.retry(run.id, reason="now")
    cairn.waits.answer(open_wait(cairn, run.id).id, "approve")
    assert str(cairn.wait(run.id, timeout=30, poll=POLL).status) == "succeeded"


def test_a_closed_wait_is_a_conflict_naming_the_open_one(cairn):
    run = cairn.submit("review", {"topic": "closed"})
    first = open_wait(cairn, run.id)
    cairn.waits.answer(first.id, "reject", feedback="again")
    second = open_wait(cairn, run.id)
    with pytest.raises(Conflict) as caught:
        cairn.waits.answer(first.id, "approve")
    assert caught.value.code == "wait_closed"
    assert caught.value.details["open_wait"]["id"] == str(second.id)


def test_wait_gives_up_after_its_timeout(cairn):
    run = cairn.submit("review", {"topic": "patience"})
    open_wait(cairn, run.id)
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        cairn.wait(run.id, until="done", timeout=0.5, poll=POLL)
    assert 0.5 <= time.monotonic() - started < 2.0
    assert str(caught.value.run.status) == "waiting"


def test_wait_refuses_an_unknown_state(cairn):
    with pytest.raises(ValueError):
        cairn.wait("00000000-0000-0000-0000-000000000000", until="finished")


def test_cancel_a_waiting_run(cairn):
    run = cairn.submit("review", {"topic": "cancel"})
    open_wait(cairn, run.id)
    cairn.runs.cancel(run.id, reason="changed my mind")
    assert str(cairn.wait(run.id, timeout=30, poll=POLL).status) == "cancelled"


def test_fork_a_finished_run_from_its_last_step(cairn):
    source = review_to_success(cairn, "forks")
    fork = cairn.runs.fork(source.id, 1, reason="publish again")
    assert fork.id != source.id and fork.parent_run_id == source.id
    cairn.waits.answer(open_wait(cairn, fork.id).id, "approve")
    done = cairn.wait(fork.id, timeout=30, poll=POLL)
    assert (str(done.status), done.steps[-1].output) == ("succeeded", source.steps[-1].output)


def test_stopped_includes_interrupted_and_continue_carries_it_on(cairn):
    run = cairn.submit("agents", {"topic": "budgets"}, budget={"model_calls": 1})
    stopped = cairn.wait(run.id, until="stopped", timeout=30, poll=POLL)
    assert str(stopped.status) == "interrupted"
    assert stopped.error.kind == "budget_exceeded"

    cairn.runs.continue_(run.id, raise_budget={"model_calls": 20}, reason="more room")
    assert str(cairn.wait(run.id, timeout=30, poll=POLL).status) == "succeeded"


def test_continue_of_a_finished_run_is_wrong_state(cairn):
    source = review_to_success(cairn, "done already")
    with pytest.raises(Conflict) as caught:
        cairn.runs.continue_(source.id)
    assert caught.value.code == "wrong_state"
