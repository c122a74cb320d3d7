"""Versions: a client newer than the server says so; unknown fields are ignored;
the hand-written operations are the document's."""

from __future__ import annotations

import copy
import json

import pytest

from cairn_client import AsyncClient, BadRequest, Client, NotFound, ResponseNotUnderstood
from cairn_client import UnsupportedByServer, _ops
from conftest import REPO
from helpers import FakeServer, error, run_json

DOC = json.loads((REPO / "docs" / "openapi.json").read_text())


def older_doc() -> dict:
    """The API document of a server without fork, signals, submit's `budget` or
    listRuns' `parent`."""
    doc = copy.deepcopy(DOC)
    del doc["paths"]["/v1/runs/{id}/fork"]
    del doc["paths"]["/v1/signals"]
    del doc["paths"]["/v1/runs/{id}/signals"]
    del doc["components"]["schemas"]["SubmitRequest"]["properties"]["budget"]
    params = doc["paths"]["/v1/runs"]["get"]["parameters"]
    doc["paths"]["/v1/runs"]["get"]["parameters"] = [p for p in params if p["name"] != "parent"]
    return doc


def older_server(seen):
    """Answers as that older server would."""
    if seen.path == "/v1/openapi.json":
        return 200, {}, older_doc()
    if seen.path.endswith(("/fork", "/signals")):
        return error(404, "not_found")
    if seen.method == "POST" and seen.path == "/v1/runs":
        return error(400, "invalid_body")
    if "parent=" in seen.path:
        return error(400, "bad_query")
    return error(404, "run_not_found")


@pytest.fixture
def old():
    server = FakeServer(older_server)
    yield server
    server.close()


def test_a_route_the_server_lacks_is_unsupported_by_server(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(UnsupportedByServer) as caught:
            client.runs.fork("01a2278b-359e-7099-b9e6-a8b344a52fc9", 1)
    assert caught.value.operation == "forkRun"
    assert "POST /v1/runs/{id}/fork" in str(caught.value)
    assert isinstance(caught.value.__cause__, NotFound)


def test_a_field_the_server_lacks_is_unsupported_by_server(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(UnsupportedByServer) as caught:
            client.submit("review", {}, budget={"tokens": 10})
    assert (caught.value.operation, caught.value.missing) == ("submitRun", "the field `budget`")


def test_a_parameter_the_server_lacks_is_unsupported_by_server(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(UnsupportedByServer) as caught:
            list(client.runs.list(parent="01a2278b-359e-7099-b9e6-a8b344a52fc9"))
    assert caught.value.missing == "the query parameter `parent`"


def test_signals_on_a_server_without_them_are_unsupported_by_server(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(UnsupportedByServer) as sent:
            client.signals.send("key:order-1", "paid", {"amount": 1}, id="evt-1",
                                start={"crew": "payment"})
        with pytest.raises(UnsupportedByServer) as listed:
            client.signals.list("01a2278b-359e-7099-b9e6-a8b344a52fc9")
    assert (sent.value.operation, sent.value.missing) == ("sendSignal",
                                                          "the route POST /v1/signals")
    assert isinstance(sent.value.__cause__, NotFound)
    assert (listed.value.operation, listed.value.missing) == (
        "getRunSignals", "the route GET /v1/runs/{id}/signals")


def test_a_field_of_send_the_server_lacks_is_unsupported_by_server():
    """A server with signals but without signal-with-submit refuses `start`."""
    doc = copy.deepcopy(DOC)
    del doc["components"]["schemas"]["SignalRequest"]["properties"]["start"]

    def answer(seen):
        if seen.path == "/v1/openapi.json":
            return 200, {}, doc
        return error(400, "invalid_body")

    server = FakeServer(answer)
    try:
        with Client(server.url) as client:
            with pytest.raises(UnsupportedByServer) as caught:
                client.signals.send("thread:t-1", "paid", start={"crew": "payment"})
            with pytest.raises(BadRequest):  # the document knows `id`: a plain 400
                client.signals.send("thread:t-1", "paid", id="evt-1")
    finally:
        server.close()
    assert (caught.value.operation, caught.value.missing) == ("sendSignal", "the field `start`")


def test_no_signal_target_is_not_found_without_asking_for_the_document():
    server = FakeServer(lambda seen: error(404, "no_signal_target"))
    try:
        with Client(server.url) as client:
            with pytest.raises(NotFound) as caught:
                client.signals.send("key:nobody", "paid")
    finally:
        server.close()
    assert (caught.value.code, caught.value.operation) == ("no_signal_target", "sendSignal")
    assert [s.path for s in server.seen] == ["/v1/signals"]


def test_a_plain_404_of_a_route_the_server_has_stays_not_found(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(NotFound) as caught:
            client.runs.get("01a2278b-359e-7099-b9e6-a8b344a52fc9")
    assert caught.value.code == "run_not_found"
    asked = [s.path for s in old.seen if s.path == "/v1/openapi.json"]
    assert not asked, "asked for the API document needlessly"


def test_a_400_the_document_cannot_explain_stays_a_bad_request(old):
    with Client(old.url, "t" * 20) as client:
        with pytest.raises(BadRequest) as caught:
            client.submit("review", {}, priority=5)  # the old document knows `priority`
    assert caught.value.code == "invalid_body"


@pytest.mark.anyio
async def test_the_async_client_says_unsupported_too(old):
    async with AsyncClient(old.url, "t" * 20) as client:
        with pytest.raises(UnsupportedByServer):
            await client.runs.fork("01a2278b-359e-7099-b9e6-a8b344a52fc9", 1)
        with pytest.raises(UnsupportedByServer) as caught:
            await client.signals.send("key:order-1", "paid")
        assert caught.value.operation == "sendSignal"
        assert await client.unsupported_operations() == ["forkRun", "sendSignal",
                                                         "getRunSignals"]


def test_the_real_server_supports_every_operation_of_the_client(cairn):
    assert cairn.unsupported_operations() == []


def test_every_hand_written_operation_is_the_documents():
    ops = {(op["operationId"], method.upper(), path)
           for path, item in DOC["paths"].items() for method, op in item.items()}
    for op in _ops.ALL:
        assert (op.id, op.method, op.path) in ops, op


def fake_answer(body):
    server = FakeServer(lambda seen: (200, {}, body))
    try:
        with Client(server.url) as client:
            return client.runs.get("01a2278b-359e-7099-b9e6-a8b344a52fc9")
    finally:
        server.close()


def test_unknown_fields_are_kept_aside_not_refused():
    run = fake_answer(run_json(a_field_from_the_future={"x": 1}))
    assert str(run.status) == "queued"
    assert run.additional_properties["a_field_from_the_future"] == {"x": 1}


def test_a_value_newer_than_the_client_is_response_not_understood():
    with pytest.raises(ResponseNotUnderstood) as caught:
        fake_answer(run_json(status="hibernating"))
    assert caught.value.operation == "getRun"
