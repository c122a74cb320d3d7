/** The Server-Sent Events parser, fed in awkward pieces. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseSse, type SseMessage } from "@cairn/client";

async function parse(...pieces: string[]): Promise<SseMessage[]> {
  const bytes = pieces.map((p) => new TextEncoder().encode(p));
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const b of bytes) controller.enqueue(b);
      controller.close();
    },
  });
  const out: SseMessage[] = [];
  for await (const message of parseSse(body)) out.push(message);
  return out;
}

test("fields, comments and blank lines", async () => {
  const messages = await parse(": keep-alive\n\nid: 1\nevent: run_submitted\ndata: {\"seq\":1}\n\nevent: output_delta\ndata: hi\n\n");
  assert.deepEqual(messages, [
    { id: "1", event: "run_submitted", data: "{\"seq\":1}" },
    { id: undefined, event: "output_delta", data: "hi" },
  ]);
});

test("lines split anywhere, CRLF split between pieces, multi-line data, no space after the colon", async () => {
  const messages = await parse("id: 7\r", "\ndata:a\r\nda", "ta: b\r\n\r", "\n", "data: é", "\n\n");
  assert.deepEqual(messages, [
    { id: "7", event: "message", data: "a\nb" },
    { id: undefined, event: "message", data: "é" },
  ]);
});

test("an event cut off by the end of the stream is dropped", async () => {
  const messages = await parse("id: 1\ndata: whole\n\nid: 2\ndata: cut of");
  assert.deepEqual(messages.map((m) => m.id), ["1"]);
});

test("a UTF-8 character split between pieces is decoded whole", async () => {
  const bytes = new TextEncoder().encode("data: ü\n\n");
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes.subarray(0, 7)); // the first byte of ü
      controller.enqueue(bytes.subarray(7));
      controller.close();
    },
  });
  const out: SseMessage[] = [];
  for await (const message of parseSse(body)) out.push(message);
  assert.equal(out[0]?.data, "ü");
});
