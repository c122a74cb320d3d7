/**
 * The hand-written layer: {@link Client} and its `runs`, `waits`,
 * `threads` and `signals`.
 *
 * @module
 */
import { Core, type Api, type ClientOptions } from "./core.js";
import { WaitTimeout, type Operation } from "./errors.js";
import { sleep } from "./transport.js";
import type {
  Answered,
  AnswerRequest,
  Budget,
  JournalEntry,
  ListRunsQuery,
  Run,
  RunSignals,
  RunStatus,
  RunView,
  Sent,
  SignalRequest,
  SubmitRequest,
  ThreadSummary,
  ThreadView,
  Wait,
  WaitStatus,
  WatchItem,
} from "./types.js";
import { watchRun, type WatchOptions } from "./watch.js";

const op = (id: string, route: string): Operation => ({ id, route });

/** The operations this layer calls, by their `operationId` in docs/openapi.json. */
export const OPERATIONS = {
  submitRun: op("submitRun", "POST /v1/runs"),
  listRuns: op("listRuns", "GET /v1/runs"),
  getRun: op("getRun", "GET /v1/runs/{id}"),
  streamRunEvents: op("streamRunEvents", "GET /v1/runs/{id}/events"),
  getRunJournal: op("getRunJournal", "GET /v1/runs/{id}/journal"),
  retryRun: op("retryRun", "POST /v1/runs/{id}/retry"),
  continueRun: op("continueRun", "POST /v1/runs/{id}/continue"),
  cancelRun: op("cancelRun", "POST /v1/runs/{id}/cancel"),
  forkRun: op("forkRun", "POST /v1/runs/{id}/fork"),
  listWaits: op("listWaits", "GET /v1/waits"),
  answerWait: op("answerWait", "POST /v1/waits/{id}/answer"),
  listThreads: op("listThreads", "GET /v1/threads"),
  getThread: op("getThread", "GET /v1/threads/{id}"),
  sendSignal: op("sendSignal", "POST /v1/signals"),
  getRunSignals: op("getRunSignals", "GET /v1/runs/{id}/signals"),
} as const;

/** Options of {@link Client.submit}; each maps to a field of `POST /v1/runs`. */
export interface SubmitOptions {
  /** `idempotency_key`: submitting again with it returns the same run. */
  key?: string;
  /** `thread_id`: the conversation the run belongs to. */
  thread?: string;
  /** Whose run it is (claims go round-robin across tenants). */
  tenant?: string;
  /** -1000 to 1000, higher claimed first (default 0). */
  priority?: number;
  /** Limits over the crew's `[budget]`. */
  budget?: Budget;
  /** What to do when the thread is busy: `queue` (default), `reject`, `interrupt`. */
  onBusy?: "queue" | "reject" | "interrupt";
  /** One of the crew's loaded versions (default: the newest). */
  crewVersion?: string;
  /** The run's upgrade policy over its crew's: `pinned`, `compatible` or `manual`. */
  upgrade?: SubmitRequest["upgrade"];
  /** The caller's W3C trace (`00-<trace id>-<span id>-<flags>`), which the run's spans join. */
  traceparent?: string;
}

/** Options of {@link Client.wait}. */
export interface WaitOptions {
  /**
   * `done` (default): until the run succeeded, failed or was cancelled.
   * `stopped`: also until it waits for a person (`waiting`: a wait to
   * answer; `interrupted`: a continue to give).
   */
  until?: "done" | "stopped";
  /** Give up with {@link WaitTimeout} after this long (default 300 000 ms). */
  timeoutMs?: number;
  /** The longest pause between two reads of the run (default 1000 ms). */
  maxIntervalMs?: number;
  signal?: AbortSignal;
}

/** Who acts and why: kept on the action's event (the actor is the token's principal). */
export interface ActionOptions {
  by?: string;
  reason?: string;
}

/** Options of {@link Runs.fork}. */
export interface ForkOptions extends ActionOptions {
  /** Steps before it are copied; the fork executes from this step. */
  fromStep: number;
  /** A new input, only with `fromStep` 0. */
  input?: unknown;
  thread?: string;
  crewVersion?: string;
  rerunChildren?: boolean;
}

/** Filters of {@link Runs.list}, and its page size. */
export type RunFilter = Omit<ListRunsQuery, "limit" | "cursor"> & { pageSize?: number };

const DONE: ReadonlySet<RunStatus> = new Set(["succeeded", "failed", "cancelled"]);
const STOPPED: ReadonlySet<RunStatus> = new Set([...DONE, "waiting", "interrupted"]);

/** Runs: read, list, and the operator's actions. */
export class Runs {
  readonly #core: Core;

  /** @internal Made by {@link Client}. */
  constructor(core: Core) {
    this.#core = core;
  }

  /** The run with its steps. */
  get(id: string): Promise<RunView> {
    return this.#core.call(OPERATIONS.getRun, () => this.#core.api.GET("/v1/runs/{id}", { params: { path: { id } } }));
  }

  /** Every run that matches, oldest first (or `order: "newest"`), fetched a page at a time. */
  async *list(filter: RunFilter = {}): AsyncGenerator<Run, void> {
    const { pageSize = 100, ...query } = filter;
    let cursor: string | undefined;
    do {
      const page = await this.#core.call(OPERATIONS.listRuns, () =>
        this.#core.api.GET("/v1/runs", { params: { query: { ...query, limit: pageSize, cursor } } }),
      );
      yield* page.runs;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The run's journal (every model text, tool call and result), optionally of one step. */
  async journal(id: string, step?: number): Promise<JournalEntry[]> {
    const list = await this.#core.call(OPERATIONS.getRunJournal, () =>
      this.#core.api.GET("/v1/runs/{id}/journal", { params: { path: { id }, query: { step } } }),
    );
    return list.items;
  }

  /** A failed run runs its failed step again. */
  retry(id: string, options: ActionOptions & { rerunChildren?: boolean } = {}): Promise<RunView> {
    const body = { by: options.by, reason: options.reason, rerun_children: options.rerunChildren };
    return this.#core.call(OPERATIONS.retryRun, () =>
      this.#core.api.POST("/v1/runs/{id}/retry", { params: { path: { id } }, body }),
    );
  }

  /** An interrupted run carries on, its budget raised by `raise` first. */
  continue(id: string, options: ActionOptions & { raise?: Budget } = {}): Promise<RunView> {
    const body = { by: options.by, reason: options.reason, raise: options.raise };
    return this.#core.call(OPERATIONS.continueRun, () =>
      this.#core.api.POST("/v1/runs/{id}/continue", { params: { path: { id } }, body }),
    );
  }

  /** Cancels the run (a running step is stopped). */
  cancel(id: string, options: ActionOptions = {}): Promise<RunView> {
    const body = { by: options.by, reason: options.reason };
    return this.#core.call(OPERATIONS.cancelRun, () =>
      this.#core.api.POST("/v1/runs/{id}/cancel", { params: { path: { id } }, body }),
    );
  }

  /** A new run with the run's first `fromStep` steps copied. */
  fork(id: string, options: ForkOptions): Promise<RunView> {
    const body = {
      from_step: options.fromStep,
      input: options.input,
      thread_id: options.thread,
      crew_version: options.crewVersion,
      rerun_children: options.rerunChildren,
      by: options.by,
      reason: options.reason,
    };
    return this.#core.call(OPERATIONS.forkRun, () =>
      this.#core.api.POST("/v1/runs/{id}/fork", { params: { path: { id } }, body }),
    );
  }
}

/** Human waits: reviews, approvals and questions. */
export class Waits {
  readonly #core: Core;

  /** @internal Made by {@link Client}. */
  constructor(core: Core) {
    this.#core = core;
  }

  /** The waits, optionally of one run and/or with one status (`open`, …). */
  async list(filter: { run?: string; status?: WaitStatus } = {}): Promise<Wait[]> {
    const list = await this.#core.call(OPERATIONS.listWaits, () =>
      this.#core.api.GET("/v1/waits", { params: { query: filter } }),
    );
    return list.waits;
  }

  /**
   * Answers a wait: `{decision: "approve"}`, `{decision: "reject", feedback}`,
   * `{decision: "edit", output}` or `{decision: "answer", value}`, each with
   * optional `by` and `reason`. A closed wait is `wait_closed` (409), whose
   * `details.open_wait` is the run's open wait, if any.
   */
  answer(id: string, answer: AnswerRequest): Promise<Answered> {
    return this.#core.call(OPERATIONS.answerWait, () =>
      this.#core.api.POST("/v1/waits/{id}/answer", { params: { path: { id } }, body: answer }),
    );
  }
}

/** The cursor in a `Link: <…>; rel="next"` header, if there is one. */
export function nextCursor(link: string | null, base: string): string | undefined {
  const next = link?.split(",").find((part) => /;\s*rel="?next"?/.test(part));
  const target = next?.match(/<([^>]*)>/)?.[1];
  return target === undefined ? undefined : (new URL(target, base).searchParams.get("cursor") ?? undefined);
}

/** Conversation threads. */
export class Threads {
  readonly #core: Core;

  /** @internal Made by {@link Client}. */
  constructor(core: Core) {
    this.#core = core;
  }

  /** Every thread, the one whose newest run is oldest first, fetched a page at a time. */
  async *list(options: { pageSize?: number } = {}): AsyncGenerator<ThreadSummary, void> {
    const limit = options.pageSize ?? 100;
    let cursor: string | undefined;
    do {
      const { data, response } = await this.#core.send(OPERATIONS.listThreads, () =>
        this.#core.api.GET("/v1/threads", { params: { query: { limit, cursor } } }),
      );
      yield* data ?? [];
      cursor = nextCursor(response.headers.get("link"), this.#core.url);
    } while (cursor !== undefined);
  }

  /** One thread: its runs and what they spent. */
  get(id: string): Promise<ThreadView> {
    return this.#core.call(OPERATIONS.getThread, () =>
      this.#core.api.GET("/v1/threads/{id}", { params: { path: { id } } }),
    );
  }
}

/** Signals: named messages to runs, which their `signal` steps wait for (docs/signals.md). */
export class Signals {
  readonly #core: Core;

  /** @internal Made by {@link Client}. */
  constructor(core: Core) {
    this.#core = core;
  }

  /**
   * Sends the signal `name` (with `payload`, any JSON) to the one unfinished
   * run `target` names: a run id, `key:K` (the run submitted with idempotency
   * key K) or `thread:T` (the thread's one unfinished run). A signal sent
   * before the run's step waits is kept until it does.
   *
   * `id` is an idempotency id: the same id again stores nothing and answers
   * the first signal (`duplicate: true`). `start: {crew, version?, input?}`
   * (signal-with-submit): a `key:` or `thread:` target without an unfinished
   * run starts a run of that crew and gives it the signal (`started: true`).
   * No such run is `no_signal_target` (404), several `ambiguous_target`
   * (409), a bad name, target or id `bad_signal` (400); nothing is stored.
   */
  send(request: SignalRequest): Promise<Sent> {
    const body: SignalRequest = {
      target: request.target,
      name: request.name,
      payload: request.payload,
      id: request.id,
      start: request.start,
    };
    return this.#core.call(OPERATIONS.sendSignal, () => this.#core.api.POST("/v1/signals", { body }));
  }

  /**
   * The run's signals, buffered and consumed, oldest first (`signals`), and
   * its open signal wait (`listening`: the `names` it waits for; `null` when
   * it waits for none).
   */
  list(runId: string): Promise<RunSignals> {
    return this.#core.call(OPERATIONS.getRunSignals, () =>
      this.#core.api.GET("/v1/runs/{id}/signals", { params: { path: { id: runId } } }),
    );
  }
}

/**
 * A client of one Cairn server.
 *
 * ```ts
 * const cairn = new Client({ url: "http://127.0.0.1:7700", token: process.env.CAIRN_TOKEN });
 * const run = await cairn.submit("review", { topic: "durable agents" }, { key: "article-42" });
 * ```
 */
export class Client {
  /** The server's address, without a trailing `/`. */
  readonly url: string;
  /**
   * Every route of docs/openapi.json, typed (openapi-fetch), with the
   * token and the retries of this client: for what the methods here do not cover.
   */
  readonly api: Api;
  readonly runs: Runs;
  readonly waits: Waits;
  readonly threads: Threads;
  readonly signals: Signals;
  readonly #core: Core;

  constructor(options: ClientOptions) {
    this.#core = new Core(options);
    this.url = this.#core.url;
    this.api = this.#core.api;
    this.runs = new Runs(this.#core);
    this.waits = new Waits(this.#core);
    this.threads = new Threads(this.#core);
    this.signals = new Signals(this.#core);
  }

  /** Submits a run of `crew` with `input`; with the same `key` again, the same run. */
  submit(crew: string, input: unknown, options: SubmitOptions = {}): Promise<RunView> {
    const body: SubmitRequest = {
      crew,
      input,
      idempotency_key: options.key,
      thread_id: options.thread,
      tenant: options.tenant,
      priority: options.priority,
      budget: options.budget,
      on_busy: options.onBusy,
      crew_version: options.crewVersion,
      upgrade: options.upgrade,
      traceparent: options.traceparent,
    };
    return this.#core.call(OPERATIONS.submitRun, () => this.api.POST("/v1/runs", { body }));
  }

  /** Reads the run until it is done (or stopped, see {@link WaitOptions.until}); returns it then. */
  async wait(runId: string, options: WaitOptions = {}): Promise<RunView> {
    const { until = "done", timeoutMs = 300_000, maxIntervalMs = 1000, signal } = options;
    const statuses = until === "stopped" ? STOPPED : DONE;
    const deadline = Date.now() + timeoutMs;
    for (let pause = 50; ; pause = Math.min(pause * 2, maxIntervalMs)) {
      const run = await this.runs.get(runId);
      if (statuses.has(run.status)) return run;
      const left = deadline - Date.now();
      if (left <= 0) {
        const message = `run ${runId} is still ${run.status} after ${timeoutMs} ms (waiting until ${until})`;
        throw new WaitTimeout(OPERATIONS.getRun, message, run);
      }
      await sleep(Math.min(pause, left), signal);
    }
  }

  /**
   * The run's stored events in order, and its live model text between them,
   * as the server streams them. After a dropped connection it reconnects
   * with `Last-Event-ID`, so no stored event is missed or repeated (live
   * text sent while disconnected is not replayed: it is in the journal).
   * Ends once the run has succeeded, failed or been cancelled; `break` ends
   * it sooner.
   */
  watch(runId: string, options: WatchOptions = {}): AsyncGenerator<WatchItem, void> {
    const core = this.#core;
    const operation = OPERATIONS.streamRunEvents;
    return watchRun(
      {
        operation,
        open: (after, follow, signal) =>
          core.call(operation, () =>
            core.api.GET("/v1/runs/{id}/events", {
              params: { path: { id: runId }, query: { follow }, header: { "Last-Event-ID": after } },
              parseAs: "stream",
              signal,
            }),
          ) as Promise<ReadableStream<Uint8Array>>,
        finished: async () => DONE.has((await this.runs.get(runId)).status),
      },
      options,
    );
  }
}
