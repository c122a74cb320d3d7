/**
 * examples/typescript-service, compiled with the tests, and the README's
 * five-minute example, taken from README.md as it is written, against a
 * real `cairn serve` on SQLite and on PostgreSQL.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import ts from "typescript";
import { eachBackend, ROOT, unique } from "./harness.js";

const example = (name: string) => fileURLToPath(new URL(`../../../examples/typescript-service/${name}`, import.meta.url));

/** The fenced blocks of README.md's "Five minutes" section: the `ts` program and the output block after it. */
function fiveMinutes(): { code: string; output: string } {
  const readme = readFileSync(path.join(ROOT, "clients/typescript/README.md"), "utf8");
  const start = readme.indexOf("\n## Five minutes\n");
  assert.ok(start >= 0, "README.md has no '## Five minutes' section");
  const section = readme.slice(start + 1).split(/\n## /)[0]!;
  const fenced = [...section.matchAll(/^```(\w*)\n([^]*?)^```$/gm)].map((m) => ({ lang: m[1]!, body: m[2]! }));
  const at = fenced.findIndex((block) => block.lang === "ts");
  assert.ok(at >= 0, "the Five minutes section has no ts block");
  const output = fenced[at + 1];
  assert.ok(output && output.lang === "", "the Five minutes section shows no output after its ts block");
  return { code: fenced[at]!.body, output: output.body };
}

/**
 * The README's output as a pattern: a run id stands for any run id (the
 * same one each time), `…` for any text on its line.
 */
function outputPattern(shown: string): RegExp {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const ids = new Set(shown.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g));
  assert.equal(ids.size, 1, "the README's output names one run");
  const [id] = ids;
  const pieces = shown.split(id!).map((piece) => piece.split("…").map(escape).join("[^\\n]*"));
  const body = pieces.map((piece, i) => (i === 0 ? "" : i === 1 ? "(?<id>[0-9a-f-]{36})" : "\\k<id>") + piece).join("");
  return new RegExp(`^${body}$`);
}

/**
 * `out` with the streamed line made whole: live text is never replayed
 * (README, `watch`), so pieces the model streamed before the example's
 * watch connected are missing from it. The last line prints the run's
 * whole output; a streamed line that is a part of its end gets its head
 * back. Anything else is left as it is, for the README's pattern to judge.
 */
function withMissedHead(out: string): { out: string; missed: string } {
  const lines = out.split("\n");
  const quoted = lines.at(-2)?.match(/: (".*")$/)?.[1];
  const streamed = lines[1];
  if (lines.length !== 4 || quoted === undefined || streamed === undefined) return { out, missed: "" };
  const whole = JSON.parse(quoted) as unknown;
  if (typeof whole !== "string" || whole === streamed || !whole.endsWith(streamed)) return { out, missed: "" };
  lines[1] = whole;
  return { out: lines.join("\n"), missed: whole.slice(0, whole.length - streamed.length) };
}

test("quickstart.ts is the README's five-minute example, as written", () => {
  const file = readFileSync(path.join(ROOT, "examples/typescript-service/quickstart.ts"), "utf8");
  const code = file.replace(/^\/\*\*[^]*?\*\/\n/, ""); // its header comment
  assert.equal(code, fiveMinutes().code, "examples/typescript-service/quickstart.ts differs from README.md's block: make them the same");
});

eachBackend((cairn) => {
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
    const env = { ...process.env, CAIRN_URL: cairn.url, CAIRN_TOKEN: cairn.token, PORT: "0" };
    service = spawn(process.execPath, [example("server.js")], { env, stdio: ["ignore", "pipe", "inherit"] });
    serviceUrl = await listening(service);
  });

  after(async () => {
    if (service?.pid !== undefined && service.exitCode === null && service.signalCode === null) {
      const exited = once(service, "exit");
      process.kill(service.pid, "SIGTERM");
      await exited;
    }
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

  test("README.md's five-minute example runs as written and prints what the README shows", async (t) => {
    const { code, output } = fiveMinutes();
    // The block itself, compiled as it is (no type-check here: quickstart.ts, the same text, is type-checked
    // with the tests), next to a node_modules/@cairn/client that is this package (its dist/).
    const dir = await mkdtemp(path.join(tmpdir(), "cairn-ts-readme-"));
    try {
      await mkdir(path.join(dir, "node_modules/@cairn"), { recursive: true });
      await symlink(path.join(ROOT, "clients/typescript"), path.join(dir, "node_modules/@cairn/client"), "dir");
      const js = ts.transpileModule(code, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        reportDiagnostics: true,
      });
      assert.deepEqual(js.diagnostics ?? [], [], "the README's block does not parse");
      const program = path.join(dir, "five-minutes.mjs");
      await writeFile(program, js.outputText);

      // Only the URL and the token, through the variables the example reads.
      const env = { ...process.env, CAIRN_URL: cairn.url, CAIRN_TOKEN: cairn.token };
      const child = spawn(process.execPath, [program], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout!.on("data", (chunk) => (out += chunk));
      child.stderr!.on("data", (chunk) => (err += chunk));
      const [status] = await once(child, "exit");
      assert.equal(status, 0, `the README's example exited ${status}:\n${out}\n${err}`);
      const whole = withMissedHead(out);
      if (whole.missed) t.diagnostic(`the watch connected after the model had streamed ${JSON.stringify(whole.missed)}`);
      assert.match(whole.out, outputPattern(output), "the README's example printed something else than the README shows");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
