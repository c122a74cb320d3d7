/**
 * The five-minute example of clients/typescript/README.md: submit a run of
 * the article crew, follow the model's text as it streams, answer the
 * draft's review, wait for the end. The code below is the README's block,
 * character for character (the client's tests compare them).
 *
 *   cairn serve --crews examples/typescript-service/crews      # another terminal
 *   node dist/quickstart.js "durable workflows"
 */
import { Client } from "@cairn/client";

const cairn = new Client({ url: process.env.CAIRN_URL ?? "http://127.0.0.1:7700", token: process.env.CAIRN_TOKEN });

// 1. Submit: a run of the crew `article` with this input.
const run = await cairn.submit("article", { topic: process.argv[2] ?? "durable workflows" });
console.log(`run ${run.id} ${run.status}`);

// 2. Follow it: its events in order, and the model's text as it streams.
for await (const item of cairn.watch(run.id)) {
  if (item.type === "text") process.stdout.write(item.delta.text);
  else if (item.event.kind === "wait_opened") break; // the draft waits for a person
}

// 3. Answer the review (approve; or {decision: "reject", feedback} to have it rewritten).
const [review] = await cairn.waits.list({ run: run.id, status: "open" });
if (!review) throw new Error(`run ${run.id} has no open review`);
await cairn.waits.answer(review.id, { decision: "approve", reason: "reads well" });

// 4. Wait for the end.
const done = await cairn.wait(run.id, { until: "done", timeoutMs: 60_000 });
console.log(`\nrun ${run.id} ${done.status}: ${JSON.stringify(done.steps[0]?.output)}`);
