/**
 * Test helpers: a real `cairn serve` on a free loopback port with a
 * temporary SQLite database, stopped by its own pid; tiny local HTTP stubs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

/** The repository's root: the check runs the tests from clients/typescript. */
export const ROOT = process.env.CAIRN_REPO_ROOT ?? path.resolve(process.cwd(), "../..");
const BIN = process.env.CAIRN_BIN ?? path.join(ROOT, "target/debug/cairn");

export interface CairnServer {
  url: string;
  token: string;
  dir: string;
  stop(): Promise<void>;
}

/** A free loopback port (asked of the OS, then released). */
export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A crews directory: the review crew, the agents crew and examples/typescript-service's article crew. */
async function crews(dir: string): Promise<string> {
  const crewsDir = path.join(dir, "crews");
  await mkdir(crewsDir);
  await cp(path.join(ROOT, "examples/review.toml"), path.join(crewsDir, "review.toml"));
  await cp(path.join(ROOT, "examples/agents/crew.toml"), path.join(crewsDir, "agents.toml"));
  await cp(path.join(ROOT, "examples/agents/scripts"), path.join(crewsDir, "scripts"), { recursive: true });
  const article = path.join(ROOT, "examples/typescript-service/crews");
  await cp(path.join(article, "article.toml"), path.join(crewsDir, "article.toml"));
  await cp(path.join(article, "scripts"), path.join(crewsDir, "scripts"), { recursive: true });
  return crewsDir;
}

function logTail(file: string): string {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").slice(-30).join("\n") : "(no log)";
}

async function healthy(url: string, child: ChildProcess, log: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (child.exitCode !== null) throw new Error(`cairn serve exited with ${child.exitCode}:\n${logTail(log)}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`cairn serve did not answer ${url}/healthz within 15 s:\n${logTail(log)}`);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  process.kill(child.pid, "SIGTERM");
  const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, "SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/** Starts `cairn serve` (API token, SQLite in a temporary directory, both crews). */
export async function startCairn(): Promise<CairnServer> {
  if (!existsSync(BIN)) throw new Error(`no cairn binary at ${BIN} (set CAIRN_BIN)`);
  const dir = await mkdtemp(path.join(tmpdir(), "cairn-ts-client-"));
  const port = await freePort();
  const token = randomBytes(24).toString("hex");
  const url = `http://127.0.0.1:${port}`;
  const log = path.join(dir, "serve.log");
  const out = openSync(log, "w");
  const args = ["--db", `sqlite://${dir}/api.db`, "serve", "--crews", await crews(dir), "--listen", `127.0.0.1:${port}`];
  const env = { ...process.env, CAIRN_API_TOKENS: token, CAIRN_NOTES_LOG: path.join(dir, "notes.log") };
  const child = spawn(BIN, args, { env, stdio: ["ignore", out, out] });
  closeSync(out);
  const killOnExit = () => child.pid !== undefined && child.exitCode === null && process.kill(child.pid, "SIGKILL");
  process.once("exit", killOnExit);
  const stop = async () => {
    process.off("exit", killOnExit);
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await healthy(url, child, log);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, token, dir, stop };
}

/** A local HTTP server answering with `handle`; it records each request. */
export interface Stub {
  url: string;
  requests: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[];
  close(): Promise<void>;
}

export async function stub(handle: (req: IncomingMessage, res: ServerResponse, n: number) => void): Promise<Stub> {
  const requests: Stub["requests"] = [];
  const server = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      handle(req, res, requests.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const close = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { url: `http://127.0.0.1:${port}`, requests, close };
}

/** Answers `status` with a JSON body (and extra headers). */
export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** A unique name for this test's runs (tenants, keys, threads). */
export const unique = (prefix: string) => `${prefix}-${randomBytes(6).toString("hex")}`;
