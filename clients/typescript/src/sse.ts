/**
 * A small Server-Sent Events parser (the WHATWG event-stream format) over a
 * `fetch` response body, so the client needs no `EventSource` and can send
 * headers (`Authorization`, `Last-Event-ID`).
 *
 * @module
 */

/** One dispatched event. */
export interface SseMessage {
  /** This event's own `id` field; `undefined` when it had none. */
  id: string | undefined;
  /** The `event` field; `"message"` when absent. */
  event: string;
  /** The `data` lines, joined with `\n`. */
  data: string;
}

interface Pending {
  id: string | undefined;
  event: string;
  data: string[];
}

const fresh = (): Pending => ({ id: undefined, event: "", data: [] });

/** Applies one line; returns the message a blank line completes, if any. */
function feed(pending: Pending, line: string): SseMessage | undefined {
  if (line === "") {
    if (pending.data.length === 0) return undefined;
    return { id: pending.id, event: pending.event || "message", data: pending.data.join("\n") };
  }
  if (line.startsWith(":")) return undefined; // a comment: keep-alive
  const colon = line.indexOf(":");
  const field = colon < 0 ? line : line.slice(0, colon);
  let value = colon < 0 ? "" : line.slice(colon + 1);
  if (value.startsWith(" ")) value = value.slice(1);
  if (field === "data") pending.data.push(value);
  else if (field === "event") pending.event = value;
  else if (field === "id" && !value.includes("\0")) pending.id = value;
  return undefined; // `retry` and unknown fields are ignored
}

/** Splits off the complete lines of `buffer`; returns them and the rest. */
export function splitLines(buffer: string): { lines: string[]; rest: string } {
  const lines: string[] = [];
  const eol = /\r\n|\r|\n/g;
  let start = 0;
  for (let m = eol.exec(buffer); m !== null; m = eol.exec(buffer)) {
    // A `\r` at the very end may be the first half of `\r\n`: wait for more.
    if (m[0] === "\r" && m.index === buffer.length - 1) break;
    lines.push(buffer.slice(start, m.index));
    start = m.index + m[0].length;
  }
  return { lines, rest: buffer.slice(start) };
}

/**
 * The events of a stream, in order. An event cut off by the end of the
 * stream (no closing blank line) is dropped, as the format says. Stopping
 * the iteration cancels the stream.
 */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder(); // UTF-8; drops a leading byte order mark
  let buffer = "";
  let pending = fresh();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const { lines, rest } = splitLines(buffer + decoder.decode(value, { stream: true }));
      buffer = rest;
      for (const line of lines) {
        const message = feed(pending, line);
        if (line === "") pending = fresh();
        if (message) yield message;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
