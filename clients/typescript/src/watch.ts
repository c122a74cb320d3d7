/**
 * Following a run's event stream: typed items, and reconnection with
 * `Last-Event-ID` after a dropped connection, so no stored event is missed
 * or repeated.
 *
 * @module
 */
import { CairnError, type Operation } from "./errors.js";
import { parseSse, type SseMessage } from "./sse.js";
import { sleep } from "./transport.js";
import type { OutputDelta, RunEvent, WatchItem } from "./types.js";

/** Options of {@link Client.watch}. */
export interface WatchOptions {
  /** Start after this event `seq`, as `Last-Event-ID` does (default 0: from the first). */
  after?: number;
  /**
   * `true` (default): follow until the run has succeeded, failed or been
   * cancelled (a `waiting` run's stream stays open). `false`: the events
   * stored now, then the end (no live text).
   */
  follow?: boolean;
  /** Ends the watch (the iteration throws the signal's reason). */
  signal?: AbortSignal;
  /** Reconnects in a row that bring nothing new before giving up with `stream_lost` (default 5). */
  maxReconnects?: number;
}

/** What the watch needs from the client. */
export interface StreamSource {
  operation: Operation;
  /** Opens the stream after `after`; throws a {@link CairnError}. */
  open(after: number, follow: boolean, signal: AbortSignal): Promise<ReadableStream<Uint8Array>>;
  /** Whether the run has succeeded, failed or been cancelled. */
  finished(signal: AbortSignal): Promise<boolean>;
}

interface State {
  after: number;
  follow: boolean;
  failures: number;
}

/** Parses a JSON `data` field, or throws `bad_response`. */
function json<T>(message: SseMessage, operation: Operation): T {
  try {
    return JSON.parse(message.data) as T;
  } catch {
    const text = `the ${message.event} event${message.id ? ` ${message.id}` : ""} is not JSON`;
    throw new CairnError({ status: 0, code: "bad_response", operation, message: text });
  }
}

/** A stored event (it has an `id`), live text, or `undefined` for a kind this client does not know. */
function toItem(message: SseMessage, operation: Operation): WatchItem | undefined {
  if (message.event === "output_delta") return { type: "text", delta: json<OutputDelta>(message, operation) };
  if (message.id === undefined) return undefined;
  return { type: "event", event: json<RunEvent>(message, operation) };
}

/** A lost connection, as opposed to an answer of the server or a bad document. */
function isDrop(error: unknown, signal: AbortSignal): boolean {
  if (signal.aborted) return false;
  return error instanceof CairnError ? error.code === "network_error" : true;
}

/** One connection: its items; `true` when the server ended the stream, `false` when it dropped. */
async function* connection(source: StreamSource, state: State, signal: AbortSignal): AsyncGenerator<WatchItem, boolean> {
  try {
    const body = await source.open(state.after, state.follow, signal);
    for await (const message of parseSse(body)) {
      const item = toItem(message, source.operation);
      if (item === undefined) continue;
      if (item.type === "event") {
        if (item.event.seq <= state.after) continue;
        state.after = item.event.seq;
      }
      state.failures = 0;
      yield item;
    }
    return true;
  } catch (error) {
    if (isDrop(error, signal)) return false;
    throw error;
  }
}

/** After a clean end: `"done"`, `"drain"` (the run ended: read what is left once) or `"again"`. */
async function afterEnd(source: StreamSource, state: State, signal: AbortSignal): Promise<"done" | "drain" | "again"> {
  if (!state.follow) return "done";
  try {
    return (await source.finished(signal)) ? "drain" : "again";
  } catch (error) {
    if (isDrop(error, signal)) return "again";
    throw error;
  }
}

async function backOff(source: StreamSource, state: State, max: number, signal: AbortSignal): Promise<void> {
  state.failures += 1;
  if (state.failures > max) {
    const message = `the event stream dropped ${state.failures} times in a row (last event seq ${state.after})`;
    throw new CairnError({ status: 0, code: "stream_lost", operation: source.operation, message });
  }
  await sleep(state.failures === 1 ? 0 : Math.min(250 * 2 ** (state.failures - 2), 5000), signal);
}

/** The run's items in order, reconnecting after `Last-Event-ID` until the stream ends. */
export async function* watchRun(source: StreamSource, options: WatchOptions = {}): AsyncGenerator<WatchItem, void> {
  const state: State = { after: options.after ?? 0, follow: options.follow ?? true, failures: 0 };
  const stop = new AbortController();
  const onAbort = () => stop.abort(options.signal?.reason);
  if (options.signal?.aborted) onAbort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const clean = yield* connection(source, state, stop.signal);
      const next = clean ? await afterEnd(source, state, stop.signal) : "again";
      if (next === "done") return;
      if (next === "drain") state.follow = false;
      else await backOff(source, state, options.maxReconnects ?? 5, stop.signal);
    }
  } catch (error) {
    throw stop.signal.aborted && options.signal?.aborted ? options.signal.reason : error;
  } finally {
    stop.abort();
    options.signal?.removeEventListener("abort", onAbort);
  }
}
