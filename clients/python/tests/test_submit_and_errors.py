"""Submit, idempotency keys, typed errors and the token's secrecy, on a real server."""

from __future__ import annotations

import logging
import uuid

import pytest

from cairn_client import BadRequest, Client, NotFound, Unauthorized
from cairn_client.models import RunView


def test_the_same_key_twice_is_the_same_run(cairn):
    key = f"order-{uuid.uuid4()}"
    first = cairn.submit("review", {"topic": "keys"}, key=key)
    again = cairn.submit("review", {"topic": "keys"}, key=key)
    other = cairn.submit("review", {"topic": "keys"}, key=f"{key}-other")
    assert isinstance(first, RunView)
    assert again.id == first.id
    assert again.idempotency_key == key
    assert other.id != first.id


def test_submit_sends_thread_tenant_priority_and_budget(cairn):
    thread = f"thread-{uuid.uuid4()}"
    run = cairn.submit("review", {"topic": "fields"}, thread=thread, tenant="acme",
                       priority=7, budget={"tokens": 1000})
    stored = cairn.runs.get(run.id)
    assert (stored.thread_id, stored.tenant, stored.priority) == (thread, "acme", 7)
    assert stored.budget.tokens == 1000


def test_an_unknown_crew_is_a_typed_not_found_with_its_code(cairn):
    with pytest.raises(NotFound) as caught:
        cairn.submit("no-such-crew", {})
    error = caught.value
    assert (error.status, error.code, error.operation) == (404, "unknown_crew", "submitRun")
    assert "no-such-crew" in error.message


def test_a_malformed_body_is_a_bad_request_not_an_older_server(cairn):
    with pytest.raises(BadRequest) as caught:
        cairn.submit("review", {}, priority=5000)  # out of range: -1000 to 1000
    assert (caught.value.status, caught.value.code) == (400, "invalid_body")


def test_an_unknown_run_is_not_found_run_not_found(cairn):
    with pytest.raises(NotFound) as caught:
        cairn.runs.get(uuid.uuid4())
    assert caught.value.code == "run_not_found"


def test_a_wrong_token_is_unauthorized(server):
    with Client(server.url, "wrong-token-0123456789abcdef") as bad:
        with pytest.raises(Unauthorized) as caught:
            bad.submit("review", {"topic": "nope"})
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")


def test_the_token_is_in_no_repr_log_or_error(server, caplog):
    caplog.set_level(logging.DEBUG)
    client = server.client()
    with client:
        client.submit("review", {"topic": "secrets"})
        with pytest.raises(NotFound) as caught:
            client.runs.get(uuid.uuid4())
        reprs = [repr(client), repr(client.raw), repr(client._http.auth), str(caught.value),
                 repr(caught.value), repr(caught.value.details)]
    assert caplog.records, "the client logged nothing at DEBUG: this test would prove nothing"
    assert server.token not in caplog.text
    for text in reprs:
        assert server.token not in text
