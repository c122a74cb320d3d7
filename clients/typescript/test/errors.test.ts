/** Typed errors, the token kept out of them, retries, and a server older than the client. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { inspect } from "node:util";
import { CairnError, Client, UnsupportedByServer } from "@cairn/client";
import { eachBackend, freePort, json, stub } from "./harness.js";

/** The error `promise` rejects with, which must be a CairnError. */
async function failure(promise: Promise<unknown>): Promise<CairnError> {
  const error = await promise.then(
    () => assert.fail("the call succeeded"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof CairnError, `not a CairnError: ${String(error)}`);
  return error;
}

const RUN = { id: "01a2278a-8648-729a-bb37-f49daf2f9fbd", status: "queued", steps: [] };

// On SQLite and on PostgreSQL.
eachBackend((server) => {
  describe("errors from a real server", () => {
    test("an unknown crew is unknown_crew (404)", async () => {
      const cairn = new Client({ url: server.url, token: server.token });
      const error = await failure(cairn.submit("no-such-crew", {}));
      assert.equal(error.status, 404);
      assert.equal(error.code, "unknown_crew");
      assert.equal(error.operation.id, "submitRun");
      assert.match(error.message, /^submitRun \(POST \/v1\/runs\): 404 unknown_crew: no crew named `no-such-crew`/);
      assert.ok(!(error instanceof UnsupportedByServer));
    });

    test("a bad body is invalid_body (400)", async () => {
      const cairn = new Client({ url: server.url, token: server.token });
      const error = await failure(cairn.submit("review", {}, { priority: 5000 }));
      assert.equal(error.status, 400);
      assert.equal(error.code, "invalid_body");
    });

    test("an unknown run is run_not_found (404), not a missing route", async () => {
      const cairn = new Client({ url: server.url, token: server.token });
      const error = await failure(cairn.runs.get("01a2278a-0000-7000-8000-000000000000"));
      assert.equal(error.status, 404);
      assert.equal(error.code, "run_not_found");
    });

    test("a wrong token is unauthorized (401), and the token shows nowhere", async () => {
      const token = "not-the-token-but-a-secret-0123456789";
      const cairn = new Client({ url: server.url, token });
      const error = await failure(cairn.waits.list());
      assert.equal(error.status, 401);
      assert.equal(error.code, "unauthorized");
      for (const text of [error.message, String(error.stack), JSON.stringify(error), inspect(error, { depth: 9 }), inspect(cairn, { depth: 9 })]) {
        assert.ok(!text.includes(token), `the token shows in: ${text}`);
      }
    });
  });
});

describe("errors without a server's answer", () => {
  test("a closed port is network_error, without the token", async () => {
    const token = "a-secret-token-0123456789abcdef";
    const cairn = new Client({ url: `http://127.0.0.1:${await freePort()}`, token });
    const error = await failure(cairn.runs.get(RUN.id));
    assert.equal(error.status, 0);
    assert.equal(error.code, "network_error");
    assert.ok(!inspect(error, { depth: 9 }).includes(token));
  });
});

describe("retries", () => {
  test("503 with Retry-After is retried after it, with the same request", async () => {
    const server = await stub((_req, res, n) =>
      n === 1 ? json(res, 503, { error: { code: "unavailable", message: "busy" } }, { "retry-after": "1" }) : json(res, 201, RUN),
    );
    try {
      const cairn = new Client({ url: server.url, token: "t0123456789abcdef" });
      const started = Date.now();
      const run = await cairn.submit("review", { topic: "retries" }, { key: "k1" });
      assert.equal(run.id, RUN.id);
      assert.ok(Date.now() - started >= 950, `retried after ${Date.now() - started} ms, not Retry-After's 1 s`);
      assert.equal(server.requests.length, 2);
      const [first, second] = server.requests;
      assert.equal(second!.body, first!.body);
      assert.deepEqual(JSON.parse(second!.body), { crew: "review", input: { topic: "retries" }, idempotency_key: "k1" });
      assert.equal(second!.headers.authorization, "Bearer t0123456789abcdef");
    } finally {
      await server.close();
    }
  });

  test("429 with a Retry-After date is retried after it", async () => {
    const server = await stub((_req, res, n) => {
      const at = new Date(Date.now() + 2000).toUTCString(); // whole seconds: 1 to 2 s from now
      if (n === 1) json(res, 429, { error: { code: "too_many_attempts", message: "slow down" } }, { "retry-after": at });
      else json(res, 200, RUN);
    });
    try {
      const started = Date.now();
      const run = await new Client({ url: server.url }).runs.get(RUN.id);
      assert.equal(run.id, RUN.id);
      assert.ok(Date.now() - started >= 900, `retried after ${Date.now() - started} ms`);
      assert.equal(server.requests.length, 2);
    } finally {
      await server.close();
    }
  });

  test("retries are bounded: the last 503 is the error", async () => {
    const server = await stub((_req, res) =>
      json(res, 503, { error: { code: "too_many_streams", message: "full" } }, { "retry-after": "0" }),
    );
    try {
      const cairn = new Client({ url: server.url, retry: { retries: 2 } });
      const error = await failure(cairn.runs.get(RUN.id));
      assert.equal(error.status, 503);
      assert.equal(error.code, "too_many_streams");
      assert.equal(error.retryAfterMs, 0);
      assert.equal(server.requests.length, 3);
    } finally {
      await server.close();
    }
  });

  test("a Retry-After beyond maxDelayMs is not waited for", async () => {
    const server = await stub((_req, res) =>
      json(res, 429, { error: { code: "too_many_attempts", message: "wait" } }, { "retry-after": "120" }),
    );
    try {
      const started = Date.now();
      const error = await failure(new Client({ url: server.url }).runs.get(RUN.id));
      assert.equal(error.code, "too_many_attempts");
      assert.equal(error.retryAfterMs, 120_000);
      assert.equal(server.requests.length, 1);
      assert.ok(Date.now() - started < 1000);
    } finally {
      await server.close();
    }
  });

  test("other errors are not retried", async () => {
    const server = await stub((_req, res) => json(res, 500, { error: { code: "internal", message: "boom" } }));
    try {
      const error = await failure(new Client({ url: server.url }).runs.get(RUN.id));
      assert.equal(error.code, "internal");
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  });
});

describe("a server older than the client", () => {
  const doc = { openapi: "3.1.0", paths: { "/v1/runs/{run}": { get: {} }, "/v1/waits": { get: {} } } };

  test("a route the server's document lacks is UnsupportedByServer, naming the operation", async () => {
    const server = await stub((req, res) => {
      if (req.url === "/v1/openapi.json") return json(res, 200, doc);
      json(res, 404, { error: { code: "not_found", message: `no such route: ${req.url}` } });
    });
    try {
      const error = await failure(new Client({ url: server.url }).waits.answer(RUN.id, { decision: "approve" }));
      assert.ok(error instanceof UnsupportedByServer);
      assert.equal(error.code, "unsupported_by_server");
      assert.equal(error.operation.id, "answerWait");
      assert.match(error.message, /POST \/v1\/waits\/\{id\}\/answer/);
      assert.match(error.message, /newer than the server/);
    } finally {
      await server.close();
    }
  });

  test("signals on a server without them are UnsupportedByServer, both operations", async () => {
    const server = await stub((req, res) => {
      if (req.url === "/v1/openapi.json") return json(res, 200, doc);
      json(res, 404, { error: { code: "not_found", message: `no such route: ${req.url}` } });
    });
    try {
      const cairn = new Client({ url: server.url });
      const sent = await failure(
        cairn.signals.send({ target: "key:order-1", name: "paid", payload: { amount: 1 }, id: "evt-1", start: { crew: "payment" } }),
      );
      assert.ok(sent instanceof UnsupportedByServer);
      assert.equal(sent.operation.id, "sendSignal");
      assert.match(sent.message, /POST \/v1\/signals/);
      const listed = await failure(cairn.signals.list(RUN.id));
      assert.ok(listed instanceof UnsupportedByServer);
      assert.equal(listed.operation.id, "getRunSignals");
      assert.match(listed.message, /GET \/v1\/runs\/\{id\}\/signals/);
      assert.equal(server.requests.filter((r) => r.url === "/v1/openapi.json").length, 1, "the document is read once");
    } finally {
      await server.close();
    }
  });

  test("a no_signal_target 404 is the server's error, without asking for the document", async () => {
    const server = await stub((_req, res) => json(res, 404, { error: { code: "no_signal_target", message: "no run" } }));
    try {
      const error = await failure(new Client({ url: server.url }).signals.send({ target: "key:nobody", name: "paid" }));
      assert.ok(!(error instanceof UnsupportedByServer));
      assert.equal(error.status, 404);
      assert.equal(error.code, "no_signal_target");
      assert.deepEqual(server.requests.map((r) => r.url), ["/v1/signals"]);
      assert.deepEqual(JSON.parse(server.requests[0]!.body), { target: "key:nobody", name: "paid" });
    } finally {
      await server.close();
    }
  });

  test("a server without /v1/openapi.json lacks the route too", async () => {
    const server = await stub((_req, res) => json(res, 404, { error: { code: "not_found", message: "no" } }));
    try {
      const error = await failure(new Client({ url: server.url }).runs.fork(RUN.id, { fromStep: 0 }));
      assert.ok(error instanceof UnsupportedByServer);
      assert.equal(error.operation.id, "forkRun");
    } finally {
      await server.close();
    }
  });

  test("a route the server's document has keeps its 404 (whatever its parameters are called)", async () => {
    const server = await stub((req, res) => {
      if (req.url === "/v1/openapi.json") return json(res, 200, doc);
      json(res, 404, { error: { code: "not_found", message: "gone" } });
    });
    try {
      const error = await failure(new Client({ url: server.url }).runs.get(RUN.id));
      assert.ok(!(error instanceof UnsupportedByServer));
      assert.equal(error.status, 404);
      assert.equal(error.code, "not_found");
    } finally {
      await server.close();
    }
  });

  test("a 404 with another code does not ask for the document", async () => {
    const server = await stub((_req, res) => json(res, 404, { error: { code: "wait_not_found", message: "no wait" } }));
    try {
      const error = await failure(new Client({ url: server.url }).waits.answer(RUN.id, { decision: "approve" }));
      assert.equal(error.code, "wait_not_found");
      assert.deepEqual(server.requests.map((r) => r.url), [`/v1/waits/${RUN.id}/answer`]);
    } finally {
      await server.close();
    }
  });
});
