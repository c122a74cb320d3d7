/** Following a run's events and live text, and reconnecting after a drop, against a real `cairn serve`, on SQLite and on PostgreSQL. */
import assert from "node:assert/strict";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { before, describe, test } from "node:test";
import { Client, type OutputDelta, type RunEvent, type WatchItem } from "@cairn/client";
import { eachBackend, unique } from "./harness.js";

eachBackend((server) => {
  let cairn: Client;
  before(() => {
    cairn = new Client({ url: server.url, token: server.token });
  });

  async function collect(items: AsyncIterable<WatchItem>): Promise<{ events: RunEvent[]; deltas: OutputDelta[] }> {
    const events: RunEvent[] = [];
    const deltas: OutputDelta[] = [];
    for await (const item of items) {
      if (item.type === "event") events.push(item.event);
      else deltas.push(item.delta);
    }
    return { events, deltas };
  }

  const seqs = (events: RunEvent[]) => events.map((e) => e.seq);
  const oneToN = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  /**
   * An agents run queued behind a review run on the same thread, so the
   * watch is connected before it starts; `release` cancels the review run.
   */
  async function heldAgentsRun(): Promise<{ id: string; release: () => Promise<unknown> }> {
    const thread = unique("held");
    const blocker = await cairn.submit("review", { topic: "blocker" }, { thread });
    await cairn.wait(blocker.id, { until: "stopped", timeoutMs: 20_000 });
    const run = await cairn.submit("agents", { topic: "durable agents" }, { thread });
    assert.equal((await cairn.runs.get(run.id)).status, "queued");
    return { id: run.id, release: () => cairn.runs.cancel(blocker.id, { reason: "let the agents run" }) };
  }

  describe("watch", () => {
    test("yields the stored events in order and the live model text", async () => {
      const run = await heldAgentsRun();
      const items = cairn.watch(run.id);
      const first = await items.next(); // the stream is open: its first stored event came
      await run.release();
      const rest = await collect(items);
      assert.equal(first.done, false);
      const events = [(first.value as { event: RunEvent }).event, ...rest.events];
      const deltas = rest.deltas;

      assert.deepEqual(seqs(events), oneToN(events.length), "stored events in order, each once");
      assert.equal(events[0]?.kind, "run_submitted");
      assert.equal(events.at(-1)?.kind, "run_succeeded");
      const stored = await collect(cairn.watch(run.id, { follow: false }));
      assert.deepEqual(events, stored.events, "the watch saw exactly the stored log");
      assert.equal(stored.deltas.length, 0, "follow=false sends no live text");

      const writer = deltas.filter((d) => d.idx === 1);
      assert.ok(writer.length > 1, `the writer's text came in ${writer.length} piece(s)`);
      const journal = await cairn.runs.journal(run.id, 1);
      const text = journal.find((item) => item.kind === "assistant_text")?.payload as { text: string };
      assert.equal(writer.map((d) => d.text).join(""), text.text, "the pieces make up the journaled text");
      assert.ok(deltas.every((d) => d.kind === "output_delta" && d.run_id === run.id));
    });

    test("after starts past an event; break ends a watch of a waiting run", async () => {
      const run = await cairn.submit("review", { topic: "waiting" });
      await cairn.wait(run.id, { until: "stopped", timeoutMs: 20_000 });
      const seen: RunEvent[] = [];
      for await (const item of cairn.watch(run.id, { after: 1 })) {
        if (item.type !== "event") continue;
        seen.push(item.event);
        if (item.event.kind === "wait_opened") break; // the stream itself stays open while the run waits
      }
      assert.equal(seen[0]?.seq, 2);
      assert.deepEqual(seqs(seen), oneToN(seen.length + 1).slice(1));
    });

    test("an abort signal ends the watch with its reason", async () => {
      const run = await cairn.submit("review", { topic: "aborts" });
      const stop = new AbortController();
      const reason = new Error("enough");
      setTimeout(() => stop.abort(reason), 300);
      await assert.rejects(collect(cairn.watch(run.id, { signal: stop.signal })), (e) => e === reason);
    });
  });

  /** A TCP proxy to the server that cuts its first event stream after `cutAt` bytes of the answer. */
  async function cuttingProxy(target: string, cutAt: number) {
    const eventRequests: string[] = [];
    let cut = false;
    const sockets = new Set<Socket>();
    const proxy = createServer((client) => {
      const upstream = connect(Number(new URL(target).port), "127.0.0.1");
      sockets.add(client).add(upstream);
      let events = false;
      let sent = 0;
      client.on("data", (chunk: Buffer) => {
        const head = chunk.toString("latin1"); // a request's head comes in one piece from fetch
        if (/^GET \S*\/events/.test(head)) {
          events = true;
          eventRequests.push(head);
        }
        upstream.write(chunk);
      });
      upstream.on("data", (chunk: Buffer) => {
        if (cut || !events || sent + chunk.length <= cutAt) {
          sent += chunk.length;
          return client.write(chunk);
        }
        cut = true; // the first event stream: forward up to cutAt, then drop the connection
        client.end(chunk.subarray(0, cutAt - sent), () => client.destroy());
        upstream.destroy();
      });
      for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
        a.on("error", () => b.destroy());
        a.on("close", () => b.destroy());
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const close = () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => proxy.close(resolve));
    };
    return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, eventRequests, close, wasCut: () => cut };
  }

  describe("reconnect", () => {
    test("a dropped stream resumes with Last-Event-ID: no gap, no duplicate", async () => {
      const run = await cairn.submit("agents", { topic: "drops" });
      const proxy = await cuttingProxy(server.url, 1500);
      try {
        const viaProxy = new Client({ url: proxy.url, token: server.token });
        const received: RunEvent[] = [];
        let beforeCut = 0;
        for await (const item of viaProxy.watch(run.id)) {
          if (item.type !== "event") continue;
          received.push(item.event);
          // The watch reconnects only once it has yielded all the first stream held.
          if (proxy.eventRequests.length === 1) beforeCut = item.event.seq;
        }
        assert.ok(proxy.wasCut(), "the proxy cut the stream");
        assert.ok(beforeCut >= 1, "some events came before the cut");
        assert.ok(beforeCut < received.length, "the cut came before the last event");
        const [opened, resumed, drained] = proxy.eventRequests;
        assert.equal(proxy.eventRequests.length, 3, "the stream, its resumption, a last read once the run ended");
        assert.match(opened!, /follow=true[^]*last-event-id: 0\r\n/i);
        assert.match(resumed!, new RegExp(`follow=true[^]*last-event-id: ${beforeCut}\\r\\n`, "i"));
        assert.match(drained!, new RegExp(`follow=false[^]*last-event-id: ${received.length}\\r\\n`, "i"));
        assert.deepEqual(seqs(received), oneToN(received.length), "no gap, no duplicate");
        const stored = await collect(cairn.watch(run.id, { follow: false }));
        assert.deepEqual(received, stored.events);
        assert.equal(received.at(-1)?.kind, "run_succeeded");
      } finally {
        await proxy.close();
      }
    });
  });
});
