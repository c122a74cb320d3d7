/**
 * `@cairn/client`: a typed client of Cairn's HTTP API.
 *
 * @packageDocumentation
 */
export { Client, Runs, Signals, Threads, Waits, OPERATIONS } from "./client.js";
export type { ActionOptions, ForkOptions, RunFilter, SubmitOptions, WaitOptions } from "./client.js";
export type { Api, ClientOptions } from "./core.js";
export { CairnError, UnsupportedByServer, WaitTimeout } from "./errors.js";
export type { CairnErrorInit, Operation } from "./errors.js";
export { parseSse } from "./sse.js";
export type { SseMessage } from "./sse.js";
export type { FetchLike, RetryPolicy } from "./transport.js";
export type * from "./types.js";
export type { WatchOptions } from "./watch.js";
export type { components, operations, paths } from "./schema.js";
