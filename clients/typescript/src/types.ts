/**
 * Names for the API's documents, taken from the types generated from
 * docs/openapi.json (`schema.ts`), plus the live-text event the document
 * describes only in prose.
 *
 * @module
 */
import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];

/** A run row (`GET /v1/runs`). */
export type Run = Schemas["Run"];
/** A run with its steps (`GET /v1/runs/{id}`, and what submit returns). */
export type RunView = Schemas["RunView"];
/** `queued`, `running`, `waiting`, `interrupted`, `succeeded`, `failed`, `cancelled`. */
export type RunStatus = Schemas["RunStatus"];
/** A human wait. */
export type Wait = Schemas["Wait"];
/** A wait plus `run`: what answering it returns. */
export type Answered = Schemas["Answered"];
/** `open`, `answered`, `expired`, `cancelled`. */
export type WaitStatus = Schemas["WaitStatus"];
/** An answer: `{decision: "approve" | "edit" | "reject" | "answer", …, by?, reason?}`. */
export type AnswerRequest = Schemas["AnswerRequest"];
/** A run's stored event (`seq` counts from 1 per run). */
export type RunEvent = Schemas["Event"];
/** A journal item (`GET /v1/runs/{id}/journal`). */
export type JournalEntry = Schemas["JournalEntry"];
/** A thread (`GET /v1/threads`). */
export type ThreadSummary = Schemas["ThreadSummary"];
/** A thread with its runs (`GET /v1/threads/{id}`). */
export type ThreadView = Schemas["ThreadView"];
/** A run's limits. */
export type Budget = Schemas["Budget"];
/** The body of `POST /v1/runs`. */
export type SubmitRequest = Schemas["SubmitRequest"];
/** The server's error document. */
export type ErrorResponse = Schemas["ErrorResponse"];
/** The body of `POST /v1/signals`: `{target, name, payload?, id?, start?}`. */
export type SignalRequest = Schemas["SignalRequest"];
/** Signal-with-submit: `{crew, version?, input?}`, the run a target without one starts. */
export type SignalStart = Schemas["SignalStart"];
/** A signal as stored: buffered, or consumed by a step (`consumed_at`, `consumed_by`). */
export type Signal = Schemas["Signal"];
/** What a send did: the `signal` stored (or the first of its `id`), `duplicate`, `woke`, `started`. */
export type Sent = Schemas["Sent"];
/** A run's open signal wait: the `names` its `signal` step waits for, and its `deadline`. */
export type Listening = Schemas["Listening"];
/** A run's signals and what it waits for (`GET /v1/runs/{id}/signals`). */
export type RunSignals = Schemas["RunSignals"];
/** The query of `GET /v1/runs`. */
export type ListRunsQuery = NonNullable<operations["listRuns"]["parameters"]["query"]>;

/**
 * A piece of an `llm` step's text as the model streams it. Never stored:
 * the whole block arrives later as a journal item with `seq` > `after_seq`.
 */
export interface OutputDelta {
  kind: "output_delta";
  run_id: string;
  /** The step. */
  idx: number;
  attempt: number;
  /** The step's journal `seq` this piece comes after. */
  after_seq: number;
  text: string;
}

/** What {@link Client.watch} yields: a stored event, or live text. */
export type WatchItem =
  | { type: "event"; event: RunEvent }
  | { type: "text"; delta: OutputDelta };
