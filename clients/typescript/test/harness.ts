/**
 * Test helpers: a real `cairn serve` on a free loopback port, on a
 * temporary SQLite database or a fresh PostgreSQL schema, stopped by its own
 * pid (the schema dropped); {@link eachBackend} runs a file's suite on both;
 * tiny local HTTP stubs.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe } from "node:test";

/** The repository's root: the check runs the tests from clients/typescript. */
export const ROOT = process.env.CAIRN_REPO_ROOT ?? path.resolve(process.cwd(), "../..");
const BIN = process.env.CAIRN_BIN ?? path.join(ROOT, "target/debug/cairn");

/** The databases the server-backed tests run on. */
export type Backend = "sqlite" | "postgres";

/**
 * Both, unless `CAIRN_CLIENT_SKIP_POSTGRES=1`: without it a PostgreSQL that
 * does not answer fails the tests (it is never skipped silently).
 */
export const BACKENDS: readonly Backend[] = process.env.CAIRN_CLIENT_SKIP_POSTGRES === "1" ? ["sqlite"] : ["sqlite", "postgres"];

/** The PostgreSQL server (trust auth): `CAIRN_TEST_DATABASE_URL`, as CI exports it, or the local default. */
export const PG_URL = process.env.CAIRN_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

/** The URL without its password, for messages. */
const shownPgUrl = PG_URL.replace(/^(\w+:\/\/[^:/@]*):[^@/]*@/, "$1:***@");

const psqlArgs = (sql: string) => ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", PG_URL, "-c", sql];
const psqlEnv = () => ({ ...process.env, PGCONNECT_TIMEOUT: "5", PGOPTIONS: "-c client_min_messages=warning" });

/** Runs `sql` with psql; a failure (PostgreSQL not answering, say) says so plainly. */
function psql(sql: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("psql", psqlArgs(sql), { env: psqlEnv(), timeout: 20_000 }, (error, _stdout, stderr) => {
      if (!error) return resolve();
      const why = String(stderr).trim() || error.message;
      reject(
        new Error(
          `PostgreSQL at ${shownPgUrl} (CAIRN_TEST_DATABASE_URL) refused \`${sql}\`: ${why}\n` +
            "Start one (.ci/start-postgres), point CAIRN_TEST_DATABASE_URL at one, " +
            "or set CAIRN_CLIENT_SKIP_POSTGRES=1 to run the tests on SQLite only.",
        ),
      );
    });
  });
}

/**
 * A fresh schema's name: `cairn_ts_` and, under the check, its run's tag
 * (`CAIRN_TS_SCHEMA_TAG`, so it can tell that none was left), then random.
 */
function schemaName(): string {
  const tag = (process.env.CAIRN_TS_SCHEMA_TAG ?? "").replace(/[^a-z0-9]/g, "");
  return `cairn_ts_${tag ? `${tag}_` : ""}${randomBytes(6).toString("hex")}`;
}

export interface CairnServer {
  backend: Backend;
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

/**
 * A crews directory: the review crew, the agents crew, examples/typescript-service's
 * article crew and the tests' own payment crew (test/crews/payment.toml, a `signal` step).
 */
async function crews(dir: string): Promise<string> {
  const crewsDir = path.join(dir, "crews");
  await mkdir(crewsDir);
  await cp(path.join(ROOT, "examples/review.toml"), path.join(crewsDir, "review.toml"));
  await cp(path.join(ROOT, "examples/agents/crew.toml"), path.join(crewsDir, "agents.toml"));
  await cp(path.join(ROOT, "examples/agents/scripts"), path.join(crewsDir, "scripts"), { recursive: true });
  const article = path.join(ROOT, "examples/typescript-service/crews");
  await cp(path.join(article, "article.toml"), path.join(crewsDir, "article.toml"));
  await cp(path.join(article, "scripts"), path.join(crewsDir, "scripts"), { recursive: true });
  await cp(path.join(ROOT, "clients/typescript/test/crews/payment.toml"), path.join(crewsDir, "payment.toml"));
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

/**
 * Starts `cairn serve` (API token, the review, agents, article and payment crews) on
 * `backend`: SQLite in a temporary directory, or a schema of its own
 * created in PostgreSQL (`search_path`), dropped by `stop` (and, should the
 * test process exit without stopping it, by an exit hook).
 */
export async function startCairn(backend: Backend = "sqlite"): Promise<CairnServer> {
  if (!existsSync(BIN)) throw new Error(`no cairn binary at ${BIN} (set CAIRN_BIN)`);
  const schema = backend === "postgres" ? schemaName() : undefined;
  if (schema) await psql(`CREATE SCHEMA ${schema}`);
  let dir: string | undefined;
  let child: ChildProcess | undefined;
  // A process that exits without `stop` (a crash, process.exit) still ends the server and drops its schema.
  const onExit = () => {
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(child.pid, "SIGKILL");
    if (schema) spawnSync("psql", psqlArgs(`DROP SCHEMA IF EXISTS ${schema} CASCADE`), { env: psqlEnv(), timeout: 20_000 });
  };
  process.once("exit", onExit);
  const stop = async () => {
    process.off("exit", onExit);
    try {
      if (child) await stopChild(child);
      if (schema) await psql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  };
  try {
    dir = await mkdtemp(path.join(tmpdir(), "cairn-ts-client-"));
    const db = schema ? `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}options[search_path]=${schema}` : `sqlite://${dir}/api.db`;
    const port = await freePort();
    const token = randomBytes(24).toString("hex");
    const url = `http://127.0.0.1:${port}`;
    const log = path.join(dir, "serve.log");
    const args = ["--db", db, "serve", "--crews", await crews(dir), "--listen", `127.0.0.1:${port}`];
    const env = { ...process.env, CAIRN_API_TOKENS: token, CAIRN_NOTES_LOG: path.join(dir, "notes.log") };
    const out = openSync(log, "w");
    child = spawn(BIN, args, { env, stdio: ["ignore", out, out] });
    closeSync(out);
    await healthy(url, child, log);
    return { backend, url, token, dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Declares the file's server-backed suite once per backend (a `describe`
 * named after it), each with a `cairn serve` of its own started before its
 * tests and stopped after them. `server` is filled in before the first
 * test: read its fields inside hooks and tests.
 */
export function eachBackend(suite: (server: CairnServer) => void): void {
  for (const backend of BACKENDS) {
    describe(backend, () => {
      const server = { backend } as CairnServer;
      let started: CairnServer | undefined;
      before(async () => {
        started = await startCairn(backend);
        Object.assign(server, started);
      });
      after(() => started?.stop());
      suite(server);
    });
  }
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
