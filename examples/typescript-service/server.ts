/**
 * A small web service in front of Cairn: `POST /articles` submits a run of
 * the review crew for a topic, `GET /articles/{id}` reports where it stands.
 * A person (or answer-waits.ts) answers the run's reviews; Cairn carries
 * the run on.
 *
 *   CAIRN_URL=http://127.0.0.1:7700 CAIRN_TOKEN=… PORT=8080 node dist/server.js
 *   curl -X POST localhost:8080/articles -H 'idempotency-key: a-1' -d '{"topic": "durable agents"}'
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CairnError, Client, type RunView } from "@cairn/client";

const cairn = new Client({ url: process.env.CAIRN_URL ?? "http://127.0.0.1:7700", token: process.env.CAIRN_TOKEN });
const crew = process.env.CAIRN_CREW ?? "review";

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<{ topic?: unknown }> {
  let text = "";
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : {};
}

/** What a caller sees of a run. */
function article(run: RunView) {
  const output = run.status === "succeeded" ? run.steps.at(-1)?.output : undefined;
  return { id: run.id, status: run.status, output, url: `/articles/${run.id}` };
}

/** `POST /articles {"topic"}`: a run per topic; an `Idempotency-Key` header makes a retry safe. */
async function submit(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { topic } = await readJson(req);
  if (typeof topic !== "string" || topic === "") return send(res, 400, { error: "a topic is required" });
  const key = req.headers["idempotency-key"];
  const run = await cairn.submit(crew, { topic }, { key: typeof key === "string" ? key : undefined });
  send(res, 202, article(run));
}

async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? "/", "http://service").pathname;
  const id = path.match(/^\/articles\/([0-9a-f-]+)$/)?.[1];
  if (req.method === "POST" && path === "/articles") return submit(req, res);
  if (req.method === "GET" && id) return send(res, 200, article(await cairn.runs.get(id)));
  send(res, 404, { error: "no such route" });
}

const server = createServer((req, res) => {
  route(req, res).catch((error: unknown) => {
    // Cairn's answer, passed on with its stable code (never the token: CairnError holds none).
    if (error instanceof CairnError && error.status >= 400 && error.status < 500) {
      return send(res, error.status, { error: error.code, message: error.message });
    }
    console.error(error instanceof Error ? error.message : error);
    send(res, 502, { error: "cairn is not answering" });
  });
});

server.listen(Number(process.env.PORT ?? 8080), "127.0.0.1", () => {
  const { port } = server.address() as AddressInfo;
  console.log(`listening on http://127.0.0.1:${port}`);
});
process.on("SIGTERM", () => server.close());
