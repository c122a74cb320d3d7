/** Submitting, waiting, answering and the run actions, against a real `cairn serve` (review crew), on SQLite and on PostgreSQL. */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { CairnError, Client, type RunView, type Wait } from "@cairn/client";
import { eachBackend, unique } from "./harness.js";

eachBackend((server) => {
  let cairn: Client;
  before(() => {
    cairn = new Client({ url: server.url, token: server.token });
  });

  /** The run's one open wait, once the run has stopped at it. */
  async function openWait(runId: string): Promise<Wait> {
    const run = await cairn.wait(runId, { until: "stopped", timeoutMs: 20_000 });
    assert.equal(run.status, "waiting", `run ${runId} stopped as ${run.status}, not waiting`);
    const waits = await cairn.waits.list({ run: runId, status: "open" });
    assert.equal(waits.length, 1, `run ${runId} has ${waits.length} open waits`);
    return waits[0]!;
  }

  /** A review run that stopped at its publisher's approval (its review approved). */
  async function atApproval(topic: string): Promise<RunView> {
    const run = await cairn.submit("review", { topic });
    const review = await openWait(run.id);
    await cairn.waits.answer(review.id, { decision: "approve" });
    const approval = await openWait(run.id);
    assert.equal(approval.kind, "approval");
    return run;
  }

  describe("submit", () => {
    test("the same key twice is the same run", async () => {
      const key = unique("key");
      const tenant = unique("tenant");
      const first = await cairn.submit("review", { topic: "keys" }, { key, tenant, priority: 5 });
      const second = await cairn.submit("review", { topic: "keys" }, { key, tenant, priority: 5 });
      assert.equal(second.id, first.id);
      assert.equal(first.idempotency_key, key);
      assert.equal(first.tenant, tenant);
      assert.equal(first.priority, 5);
      const runs = [];
      for await (const run of cairn.runs.list({ tenant })) runs.push(run.id);
      assert.deepEqual(runs, [first.id]);
    });

    test("a budget and a thread are stored with the run", async () => {
      const thread = unique("thread");
      const run = await cairn.submit("review", { topic: "budgets" }, { thread, budget: { tokens: 1000 } });
      assert.equal(run.thread_id, thread);
      assert.equal(run.budget?.tokens, 1000);
    });
  });

  describe("a run with reviews", () => {
    test("wait until stopped, reject, approve, approve, wait until done", async () => {
      const run = await cairn.submit("review", { topic: "durable agents" });
      const first = await openWait(run.id);
      assert.equal(first.kind, "review");
      assert.equal(first.attempt, 1);

      const rejected = await cairn.waits.answer(first.id, { decision: "reject", feedback: "shorter, with a title" });
      assert.equal(rejected.status, "answered");
      assert.equal(rejected.run.id, run.id);

      const second = await openWait(run.id);
      assert.equal(second.kind, "review");
      assert.equal(second.attempt, 2, "the rejection runs the writer again");
      await cairn.waits.answer(second.id, { decision: "approve" });

      const approval = await openWait(run.id);
      assert.equal(approval.kind, "approval");
      await cairn.waits.answer(approval.id, { decision: "approve" });

      const done = await cairn.wait(run.id, { until: "done", timeoutMs: 20_000 });
      assert.equal(done.status, "succeeded");
      assert.match(String(done.steps.at(-1)?.output), /^PUBLISHED On durable agents: Draft 2/);
    });

    test("answering a closed wait is wait_closed, naming the run's open wait", async () => {
      const run = await cairn.submit("review", { topic: "closed waits" });
      const first = await openWait(run.id);
      await cairn.waits.answer(first.id, { decision: "reject", feedback: "again" });
      const second = await openWait(run.id);
      const error = await cairn.waits.answer(first.id, { decision: "approve" }).then(
        () => assert.fail("a closed wait was answered"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof CairnError);
      assert.equal(error.status, 409);
      assert.equal(error.code, "wait_closed");
      assert.equal((error.details.open_wait as { id: string }).id, second.id);
    });

    test("wait gives up with wait_timeout while the run waits for a person", async () => {
      const run = await cairn.submit("review", { topic: "timeouts" });
      await openWait(run.id);
      await assert.rejects(cairn.wait(run.id, { until: "done", timeoutMs: 300 }), {
        name: "WaitTimeout",
        code: "wait_timeout",
      });
    });
  });

  describe("run actions", () => {
    test("a rejected approval fails the run; retry brings the approval back; cancel ends it", async () => {
      const run = await atApproval("actions");
      const [approval] = await cairn.waits.list({ run: run.id, status: "open" });
      await cairn.waits.answer(approval!.id, { decision: "reject", feedback: "not now" });
      assert.equal((await cairn.wait(run.id, { timeoutMs: 20_000 })).status, "failed");

      const retried = await cairn.runs.retry(run.id, { reason: "try again" });
      assert.equal(retried.id, run.id);
      const again = await openWait(run.id);
      assert.equal(again.kind, "approval");
      assert.notEqual(again.id, approval!.id);

      const cancelled = await cairn.runs.cancel(run.id, { by: "test", reason: "enough" });
      assert.equal(cancelled.status, "cancelled");
      assert.equal((await cairn.waits.list({ run: run.id, status: "open" })).length, 0);
    });

    test("fork copies the steps before from_step and runs from there", async () => {
      const source = await atApproval("forks");
      const fork = await cairn.runs.fork(source.id, { fromStep: 1, reason: "another approval" });
      assert.notEqual(fork.id, source.id);
      const wait = await openWait(fork.id);
      assert.equal(wait.kind, "approval", "the fork starts at the publisher, after the copied writer");
      assert.equal(wait.step_idx, 1);
    });

    test("continue of a run that is not interrupted is wrong_state", async () => {
      const run = await atApproval("continues");
      await assert.rejects(cairn.runs.continue(run.id), (error: unknown) => {
        assert.ok(error instanceof CairnError);
        assert.equal(error.status, 409);
        assert.equal(error.code, "wrong_state");
        assert.equal(error.operation.id, "continueRun");
        return true;
      });
    });
  });

  describe("pagination", () => {
    test("runs come a page at a time, in order, each once", async () => {
      const tenant = unique("pages");
      const submitted = [];
      for (let i = 0; i < 5; i++) submitted.push((await cairn.submit("review", { topic: `page ${i}` }, { tenant })).id);
      const pages: string[] = [];
      const counting = new Client({
        url: server.url,
        token: server.token,
        fetch: (request) => {
          if (new URL(request.url).pathname === "/v1/runs") pages.push(request.url);
          return fetch(request);
        },
      });
      const listed = [];
      for await (const run of counting.runs.list({ tenant, pageSize: 2 })) listed.push(run.id);
      assert.deepEqual(listed, submitted);
      assert.equal(pages.length, 3, `pages: ${pages.join(", ")}`);
      const newest = [];
      for await (const run of counting.runs.list({ tenant, pageSize: 2, order: "newest" })) newest.push(run.id);
      assert.deepEqual(newest, [...submitted].reverse());
    });

    test("250 runs over pages of 40: the iterator yields each exactly once", async () => {
      const tenant = unique("many");
      // One thread: its first run stops at its review, the other 249 queue behind it (the runner stays idle).
      const thread = unique("many");
      const submitted = new Set<string>();
      for (let batch = 0; batch < 250; batch += 25) {
        const runs = await Promise.all(
          Array.from({ length: 25 }, (_, i) => cairn.submit("review", { topic: `run ${batch + i}` }, { tenant, thread })),
        );
        for (const run of runs) submitted.add(run.id);
      }
      assert.equal(submitted.size, 250, "250 submits, 250 runs");
      let pages = 0;
      const counting = new Client({
        url: server.url,
        token: server.token,
        fetch: (request) => {
          if (new URL(request.url).pathname === "/v1/runs" && request.method === "GET") pages++;
          return fetch(request);
        },
      });
      const listed: string[] = [];
      for await (const run of counting.runs.list({ tenant, pageSize: 40 })) listed.push(run.id);
      assert.equal(listed.length, 250, `${listed.length} runs listed, not 250`);
      assert.equal(new Set(listed).size, 250, "a run was listed twice");
      assert.deepEqual(new Set(listed), submitted, "the listed runs are the submitted ones");
      assert.equal(pages, 7, `${pages} pages of 40 for 250 runs`);
    });

    test("threads come a page at a time, following the Link header", async () => {
      const threads = [unique("t"), unique("t"), unique("t")];
      for (const thread of threads) await cairn.submit("review", { topic: "threads" }, { thread, onBusy: "reject" });
      let requests = 0;
      const counting = new Client({
        url: server.url,
        token: server.token,
        fetch: (request) => {
          if (new URL(request.url).pathname === "/v1/threads") requests++;
          return fetch(request);
        },
      });
      const listed = [];
      for await (const thread of counting.threads.list({ pageSize: 2 })) listed.push(thread.thread_id);
      assert.equal(new Set(listed).size, listed.length, "a thread was listed twice");
      assert.deepEqual(listed.filter((id) => threads.includes(id)), threads);
      assert.ok(requests >= 2, `${requests} request(s) for ${listed.length} threads with pages of 2`);
      assert.equal(requests, Math.ceil(listed.length / 2), "a page per two threads, no empty last page");
    });
  });
});
