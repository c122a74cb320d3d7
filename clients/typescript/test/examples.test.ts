/** examples/typescript-service (and the README's five-minute example), compiled with the tests, against a real `cairn serve`. */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { startCairn, unique, type CairnServer } from "./harness.js";

const example = (name: string) => fileURLToPath(new URL(`../../../examples/typescript-service/${name}`, import.meta.url));

let cairn: CairnServer;
let service: ChildProcess;
let serviceUrl: string;

/** The service's first line: `listening on URL`. */
async function listening(child: ChildProcess): Promise<string> {
  let out = "";
  for await (const chunk of child.stdout!) {
    out += chunk;
    const url = out.match(/listening on (\S+)\n/)?.[1];
    if (url) return url;
  }
  throw new Error(`the service exited before listening: ${out}`);
}

before(async () => {
  cairn = await startCairn();
  const env = { ...process.env, CAIRN_URL: cairn.url, CAIRN_TOKEN: cairn.token, PORT: "0" };
  service = spawn(process.execPath, [example("server.js")], { env, stdio: ["ignore", "pipe", "inherit"] });
  serviceUrl = await listening(service);
});

after(async () => {
  if (service?.pid !== undefined && service.exitCode === null) {
    process.kill(service.pid, "SIGTERM");
    await once(service, "exit");
  }
  await cairn?.stop();
});

async function post(topic: string, key: string) {
  const res = await fetch(`${serviceUrl}/articles`, {
    method: "POST",
    headers: { "idempotency-key": key },
    body: JSON.stringify({ topic }),
  });
  return { status: res.status, body: (await res.json()) as { id: string; status: string; output?: string } };
}

test("the service submits a run, answer-waits approves its waits, the article is published", async () => {
  const key = unique("article");
  const first = await post("services", key);
  assert.equal(first.status, 202);
  assert.equal((await post("services", key)).body.id, first.body.id, "the same Idempotency-Key, the same run");

  const env = { ...process.env, CAIRN_URL: cairn.url, CAIRN_TOKEN: cairn.token };
  const answering = spawn(process.execPath, [example("answer-waits.js"), "--run", first.body.id], { env, stdio: ["ignore", "pipe", "inherit"] });
  let log = "";
  answering.stdout!.on("data", (chunk) => (log += chunk));
  const [code] = await once(answering, "exit");
  assert.equal(code, 0, `answer-waits exited ${code}:\n${log}`);
  assert.match(log, /^review \S+ of run \S+: approve/m);
  assert.match(log, /^approval \S+ of run \S+: approve/m);

  const article = (await (await fetch(`${serviceUrl}/articles/${first.body.id}`)).json()) as { status: string; output: string };
  assert.equal(article.status, "succeeded");
  assert.match(article.output, /^PUBLISHED Draft: A first, long-winded draft about services/);
});

test("the service passes Cairn's error code on", async () => {
  const res = await fetch(`${serviceUrl}/articles/01a2278a-0000-7000-8000-000000000000`);
  assert.equal(res.status, 404);
  assert.equal(((await res.json()) as { error: string }).error, "run_not_found");
});

test("the five-minute example (quickstart) runs as written", async () => {
  const env = { ...process.env, CAIRN_URL: cairn.url, CAIRN_TOKEN: cairn.token };
  const child = spawn(process.execPath, [example("quickstart.js"), "quick starts"], { env, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout!.on("data", (chunk) => (out += chunk));
  const [code] = await once(child, "exit");
  assert.equal(code, 0, `quickstart exited ${code}:\n${out}`);
  assert.match(out, /^run \S+ queued\n/);
  assert.match(out, /\nrun \S+ succeeded: "Durable workflows keep their place: .* before it counts\."\n$/);
});
