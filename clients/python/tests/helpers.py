"""Test helpers: a scripted fake HTTP server, a proxy that can cut
connections, and a review run driven to its waits."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cairn_client import Client

POLL = 0.1  # tests poll faster than the default


@dataclass
class Seen:
    """A request the fake server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)


Reply = tuple[int, dict[str, str], Any]


class FakeServer:
    """A local HTTP server a test scripts: `handle(seen) -> (status, headers, json body)`."""

    def __init__(self, handle: Callable[[Seen], Reply]):
        self.seen: list[Seen] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                seen = Seen(self.command, self.path, dict(self.headers), self.rfile.read(length))
                fake.seen.append(seen)
                status, headers, body = handle(seen)
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def run_json(**fields: Any) -> dict[str, Any]:
    """A run view as a server sends it (for the fake server)."""
    return {"id": "01a2278b-359e-7099-b9e6-a8b344a52fc9", "crew": "review", "crew_version": "1",
            "crew_fingerprint": "sha256:0123456789abcdef", "status": "queued", "cursor": 0,
            "step_count": 2, "input": {}, "lease_epoch": 0,
            "created_at": "2026-11-29T13:00:00Z", "updated_at": "2026-11-29T13:00:00Z",
            "crew_definition": {"name": "review", "version": "1", "agents": []}, "steps": [],
            **fields}


def error(status: int, code: str, headers: dict[str, str] | None = None) -> Reply:
    return status, headers or {}, {"error": {"code": code, "message": f"{code} (fake)"}}


class CuttingProxy:
    """A TCP proxy to a real server that can drop every open connection at once."""

    def __init__(self, target_url: str):
        host, port = target_url.removeprefix("http://").split(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.request_heads: list[str] = []
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closed:
                client.close()
                return
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                if requests:
                    self.request_heads += [h for h in data.decode("latin-1").split("\r\n\r\n") if h]
                dst.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        """Drops every open connection, both ways, mid-stream."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        """Stops accepting (new connections are refused) and drops the open ones."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        self.cut()

    def last_event_ids(self) -> list[str | None]:
        """The `Last-Event-ID` of every event-stream request, in order (None: absent)."""
        out = []
        for head in self.request_heads:
            if "/events" not in head.split("\r\n", 1)[0]:
                continue
            found = [line.split(":", 1)[1].strip() for line in head.split("\r\n")
                     if line.lower().startswith("last-event-id:")]
            out.append(found[0] if found else None)
        return out


def open_wait(cairn: Client, run_id: Any, timeout: float = 30) -> Any:
    """The run's one open wait, once the run has stopped at it."""
    run = cairn.wait(run_id, until="stopped", timeout=timeout, poll=POLL)
    assert str(run.status) == "waiting", f"run {run_id} is {run.status}, not waiting"
    waits = cairn.waits.list(run=run_id, status="open")
    assert len(waits) == 1, waits
    return waits[0]


def review_to_success(cairn: Client, topic: str) -> Any:
    """Submits a review run and approves its review and its publishing."""
    run = cairn.submit("review", {"topic": topic})
    cairn.waits.answer(open_wait(cairn, run.id).id, "approve")
    cairn.waits.answer(open_wait(cairn, run.id).id, "approve")
    done = cairn.wait(run.id, until="done", timeout=30, poll=POLL)
    assert str(done.status) == "succeeded", done
    return done
