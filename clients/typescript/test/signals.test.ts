/**
 * Signals against a real `cairn serve` (the payment crew of test/crews: a
 * `signal` step), on SQLite and on PostgreSQL: `signals.list`, a send by
 * idempotency key, exactly once by id, the typed errors, signal-with-submit.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { CairnError, Client, UnsupportedByServer, type RunSignals, type Sent } from "@cairn/client";
import { eachBackend, unique } from "./harness.js";

/** The error `promise` rejects with, which must be a CairnError. */
async function failure(promise: Promise<unknown>): Promise<CairnError> {
  const error = await promise.then(
    () => assert.fail("the call succeeded"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof CairnError, `not a CairnError: ${String(error)}`);
  return error;
}

eachBackend((server) => {
  let cairn: Client;
  before(() => {
    cairn = new Client({ url: server.url, token: server.token });
  });

  /** The run's signals once it waits at its signal step. */
  async function waitingForSignal(runId: string): Promise<RunSignals> {
    const run = await cairn.wait(runId, { until: "stopped", timeoutMs: 20_000 });
    assert.equal(run.status, "waiting", `run ${runId} stopped as ${run.status}, not waiting`);
    return cairn.signals.list(runId);
  }

  describe("signals", () => {
    test("a signal by key wakes the waiting run, stored once by its id", async () => {
      const key = unique("order");
      const run = await cairn.submit("payment", { order: 42 }, { key });

      const listed = await waitingForSignal(run.id);
      assert.deepEqual(listed.signals, []);
      assert.deepEqual(listed.listening?.names, ["paid"]);
      assert.equal(listed.listening?.idx, 1);

      const payload = { amount: 42, currency: "EUR" };
      const sent: Sent = await cairn.signals.send({ target: `key:${key}`, name: "paid", payload, id: "evt-1" });
      assert.equal(sent.duplicate, false);
      assert.equal(sent.started, false);
      assert.equal(sent.signal.run_id, run.id);
      assert.equal(sent.signal.id, "evt-1");
      assert.deepEqual(sent.signal.payload, payload);

      const again = await cairn.signals.send({ target: `key:${key}`, name: "paid", payload: { amount: 0 }, id: "evt-1" });
      assert.equal(again.duplicate, true);
      assert.equal(again.woke, false);
      assert.deepEqual(again.signal.payload, payload, "the duplicate answers the first signal");

      const done = await cairn.wait(run.id, { until: "done", timeoutMs: 20_000 });
      assert.equal(done.status, "succeeded");
      assert.deepEqual(done.steps[1]?.output, payload);
      assert.equal(done.steps[2]?.output, 'shipped {"amount":42,"currency":"EUR"}');

      const after = await cairn.signals.list(run.id);
      assert.deepEqual(after.signals.map((s) => s.id), ["evt-1"], "the duplicate was stored");
      assert.deepEqual(after.signals[0]?.consumed_by, [1, 1]);
      assert.equal(after.listening ?? null, null);
    });

    test("a signal sent at once is kept until the step waits", async () => {
      const run = await cairn.submit("payment", { order: 7 }, { thread: unique("buffered") });
      const sent = await cairn.signals.send({ target: run.id, name: "paid", payload: { early: true } });
      assert.equal(sent.signal.run_id, run.id);
      assert.ok(sent.signal.id, "the server made an id");
      const done = await cairn.wait(run.id, { until: "done", timeoutMs: 20_000 });
      assert.equal(done.status, "succeeded");
      assert.deepEqual(done.steps[1]?.output, { early: true });
    });

    test("no unfinished run for the target is no_signal_target (404)", async () => {
      const error = await failure(cairn.signals.send({ target: "key:nobody", name: "paid", payload: { amount: 1 } }));
      assert.ok(!(error instanceof UnsupportedByServer));
      assert.equal(error.status, 404);
      assert.equal(error.code, "no_signal_target");
      assert.equal(error.operation.id, "sendSignal");
      assert.match(error.message, /^sendSignal \(POST \/v1\/signals\): 404 no_signal_target: /);
    });

    test("an empty name is bad_signal (400)", async () => {
      const run = await cairn.submit("payment", { order: 1 });
      const error = await failure(cairn.signals.send({ target: run.id, name: "" }));
      assert.equal(error.status, 400);
      assert.equal(error.code, "bad_signal");
      await cairn.runs.cancel(run.id);
    });

    test("the signals of an unknown run are run_not_found (404)", async () => {
      const error = await failure(cairn.signals.list("01a2278a-0000-7000-8000-000000000000"));
      assert.equal(error.status, 404);
      assert.equal(error.code, "run_not_found");
      assert.equal(error.operation.id, "getRunSignals");
    });

    test("signal-with-submit starts a run on the thread and gives it the signal", async () => {
      const sent = await cairn.signals.send({ target: "thread:t-1", name: "paid", payload: { order: 5 }, start: { crew: "payment" } });
      assert.equal(sent.started, true);
      assert.equal(sent.duplicate, false);
      const run = await cairn.runs.get(sent.signal.run_id);
      assert.equal(run.crew, "payment");
      assert.equal(run.thread_id, "t-1");
      assert.deepEqual(run.input, { order: 5 });
      const done = await cairn.wait(run.id, { until: "done", timeoutMs: 20_000 });
      assert.equal(done.status, "succeeded");
      assert.deepEqual(done.steps[1]?.output, { order: 5 });
    });

    test("start with its own input and version", async () => {
      const thread = unique("started");
      const sent = await cairn.signals.send({
        target: `thread:${thread}`,
        name: "paid",
        payload: { amount: 3 },
        start: { crew: "payment", version: "1", input: { order: 3 } },
      });
      assert.equal(sent.started, true);
      const done = await cairn.wait(sent.signal.run_id, { until: "done", timeoutMs: 20_000 });
      assert.equal(done.status, "succeeded");
      assert.deepEqual(done.input, { order: 3 });
      assert.deepEqual(done.steps[1]?.output, { amount: 3 });
    });
  });
});
