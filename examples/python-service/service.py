"""A small web service that starts Cairn runs (stdlib http.server + cairn-client).

    POST /articles {"topic": "durable agents"}   -> 202 {"run_id", "status", "href"}
         (send `Idempotency-Key: ...` and a retried request gets the same run)
    GET  /articles/RUN_ID                         -> 200 {"run_id", "status", "output"}

It submits a run of the review crew (examples/review.toml; `ARTICLE_CREW`
names another) to the server of `CAIRN_SERVER` with `CAIRN_TOKEN`, and
answers at once: a person reviews the draft later (answer_waits.py).

    CAIRN_SERVER=http://127.0.0.1:7700 CAIRN_TOKEN=... python service.py   # PORT=8080
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cairn_client import ApiError, BadRequest, Client, NotFound

CREW = os.environ.get("ARTICLE_CREW", "review")


def article(run: Any) -> dict[str, Any]:
    """What the service shows of a run: the published text once it succeeded."""
    done = str(run.status) == "succeeded" and run.steps
    return {"run_id": str(run.id), "status": str(run.status),
            "output": run.steps[-1].output if done else None}


def topic_of(raw: bytes) -> str | None:
    """The request's `topic`, if the body is a JSON object with a non-empty one."""
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return None
    topic = body.get("topic") if isinstance(body, dict) else None
    return topic if isinstance(topic, str) and topic.strip() else None


def make_handler(cairn: Client) -> type[BaseHTTPRequestHandler]:
    """The request handler, sharing one client (httpx's pool is thread-safe)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/articles":
                return self.reply(404, {"error": "no such route"})
            topic = topic_of(self.rfile.read(int(self.headers.get("content-length") or 0)))
            if topic is None:
                return self.reply(400, {"error": "send a JSON object with a `topic` string"})
            key = self.headers.get("Idempotency-Key")
            try:
                run = cairn.submit(CREW, {"topic": topic}, key=key)
            except ApiError as e:
                return self.reply(502, {"error": e.code, "message": e.message})
            self.reply(202, {**article(run), "href": f"/articles/{run.id}"})

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) != 2 or parts[0] != "articles":
                return self.reply(404, {"error": "no such route"})
            try:
                self.reply(200, article(cairn.runs.get(parts[1])))
            except (NotFound, BadRequest) as e:
                self.reply(404, {"error": e.code})
            except ApiError as e:
                self.reply(502, {"error": e.code, "message": e.message})

        def reply(self, status: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    port = int(os.environ.get("PORT", "8080"))
    with Client.from_env() as cairn:
        httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(cairn))
        print(f"articles on http://127.0.0.1:{port}/articles; runs on {cairn.url}", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()


if __name__ == "__main__":
    main()
