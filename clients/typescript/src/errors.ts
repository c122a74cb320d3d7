/**
 * The errors this client throws. Every one is a {@link CairnError}: an
 * answer of the server carries its HTTP `status` and the API's stable
 * `code` (docs/openapi.json lists them); a failure on the client's side
 * has `status` 0 and one of the client's own codes, which never collide
 * with the server's: `network_error`, `stream_lost`, `wait_timeout`,
 * `unsupported_by_server`, `bad_response`.
 *
 * @module
 */

/** Where a failed call was going: the API's operation, its method and path. */
export interface Operation {
  /** The `operationId` in docs/openapi.json, e.g. `submitRun`. */
  id: string;
  /** e.g. `POST /v1/runs`, with the path's template (`/v1/runs/{id}`). */
  route: string;
}

/** Fields of a {@link CairnError}. */
export interface CairnErrorInit {
  status: number;
  code: string;
  message: string;
  operation: Operation;
  /** The server's `error` object (e.g. `run_id`, `open_wait` of `wait_closed`). */
  details?: Record<string, unknown>;
  /** The server's `Retry-After`, in milliseconds, when it sent one. */
  retryAfterMs?: number;
}

/**
 * A failed call. `status` is the HTTP status (0: no answer from the
 * server), `code` the API's stable error code (`unknown_crew`,
 * `unauthorized`, `wait_closed`, …) or the client's own (see the module).
 * Never carries the API token.
 */
export class CairnError extends Error {
  override name = "CairnError";
  readonly status: number;
  readonly code: string;
  readonly operation: Operation;
  readonly details: Record<string, unknown>;
  readonly retryAfterMs: number | undefined;

  constructor(init: CairnErrorInit) {
    super(`${init.operation.id} (${init.operation.route}): ${describe(init)}`);
    this.status = init.status;
    this.code = init.code;
    this.operation = init.operation;
    this.details = init.details ?? {};
    this.retryAfterMs = init.retryAfterMs;
  }
}

function describe(init: CairnErrorInit): string {
  const status = init.status === 0 ? "" : `${init.status} `;
  return `${status}${init.code}: ${init.message}`;
}

/**
 * The server does not know an operation this client calls: the client is
 * newer than the server. Thrown instead of the route's bare 404 (or 405)
 * once the server's own `/v1/openapi.json` confirms it lacks the route.
 */
export class UnsupportedByServer extends CairnError {
  override name = "UnsupportedByServer";

  constructor(operation: Operation, server: string) {
    super({
      status: 0,
      code: "unsupported_by_server",
      operation,
      message:
        `the server at ${server} does not offer ${operation.route}: ` +
        `this client is newer than the server; upgrade the server, or use a client as old as it`,
    });
  }
}

/** {@link Client.wait} ran out of time; `run` is the run as last read. */
export class WaitTimeout extends CairnError {
  override name = "WaitTimeout";
  readonly run: unknown;

  constructor(operation: Operation, message: string, run: unknown) {
    super({ status: 0, code: "wait_timeout", operation, message });
    this.run = run;
  }
}
