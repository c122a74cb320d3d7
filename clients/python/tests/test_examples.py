"""examples/python-service, run as a person would: the web service submits an
article's run, answer_waits.py approves its waits, the service shows it published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import REPO, free_port, stop
from helpers import POLL

EXAMPLE = REPO / "examples" / "python-service"


def call(url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def env(server):
    return {**os.environ, "CAIRN_SERVER": server.url, "CAIRN_TOKEN": server.token}


@pytest.fixture
def service(env):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(EXAMPLE / "service.py")],
                            env={**env, "PORT": str(port)}, stdout=subprocess.PIPE, text=True)
    try:
        assert "articles on" in proc.stdout.readline()
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        proc.stdout.close()


def approve_waits(env, run_id: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLE / "answer_waits.py"), "--approve",
                           "--run", run_id], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_service_submits_and_answer_waits_approves(service, env, cairn):
    status, created = call(f"{service}/articles", {"topic": "services"},
                           {"Idempotency-Key": f"svc-{time.time_ns()}"})
    assert status == 202 and created["href"] == f"/articles/{created['run_id']}"
    run_id = created["run_id"]
    for _ in range(2):  # the review, then the approval to publish
        cairn.wait(run_id, until="stopped", timeout=30, poll=POLL)
        assert "answered 1 wait(s)" in approve_waits(env, run_id)
    cairn.wait(run_id, until="done", timeout=30, poll=POLL)
    status, shown = call(f"{service}{created['href']}")
    assert (status, shown["status"]) == (200, "succeeded")
    assert shown["output"].startswith("PUBLISHED Draft: A first, long-winded draft about services")


def test_the_service_refuses_a_bad_body_and_an_unknown_run(service):
    assert call(f"{service}/articles", {"title": "no topic"})[0] == 400
    assert call(f"{service}/articles/01a2278b-359e-7099-b9e6-a8b344a52fc9")[0] == 404
