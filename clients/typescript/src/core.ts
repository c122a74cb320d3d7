/**
 * The plumbing under {@link Client}: the typed `openapi-fetch` client, and
 * turning its answers into documents or {@link CairnError}s.
 *
 * @module
 */
import createClient, { type Client as OpenApiClient } from "openapi-fetch";
import { CairnError, UnsupportedByServer, type Operation } from "./errors.js";
import type { paths } from "./schema.js";
import { retryAfterMs, transport, type FetchLike, type RetryPolicy } from "./transport.js";

/** The typed client of every route, generated from docs/openapi.json. */
export type Api = OpenApiClient<paths>;

/** Options of {@link Client}. */
export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:7700` (the API is under `/v1`). */
  url: string;
  /** An API token (`CAIRN_API_TOKENS`, or a principal's); none for a development server. */
  token?: string;
  /** The `fetch` to send requests with (default: the global one). */
  fetch?: FetchLike;
  /** Retries of 429 and 503 answers. */
  retry?: RetryPolicy;
}

/** What openapi-fetch resolves to, seen loosely. */
interface Result<D> {
  data?: D;
  error?: unknown;
  response: Response;
}

/** The server's `error` object, if `body` is the API's error document. */
function errorObject(body: unknown): Record<string, unknown> | undefined {
  const error = (body as { error?: unknown } | null)?.error;
  if (typeof error !== "object" || error === null) return undefined;
  return typeof (error as { code?: unknown }).code === "string" ? (error as Record<string, unknown>) : undefined;
}

/** `METHOD /path/{}/…`: a route with its parameters' names left out. */
const routeKey = (route: string) => route.replace(/\{[^}]*\}/g, "{}");

/** The routes an OpenAPI document offers, as {@link routeKey}s. */
function routesOf(doc: { paths?: Record<string, Record<string, unknown>> }): Set<string> {
  const routes = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of Object.keys(item)) routes.add(routeKey(`${method.toUpperCase()} ${path}`));
  }
  return routes;
}

/** @internal The client's shared state; use {@link Client}. */
export class Core {
  readonly url: string;
  readonly api: Api;
  readonly #token: string | undefined;
  #serverRoutes: Promise<Set<string> | "none" | undefined> | undefined;

  constructor(options: ClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.#token = options.token;
    const base: FetchLike = options.fetch ?? ((request) => globalThis.fetch(request));
    this.api = createClient<paths>({ baseUrl: this.url, fetch: transport(base, () => this.#token, options.retry) });
  }

  /** The document of a successful answer, or throws a {@link CairnError}. */
  async call<D>(operation: Operation, send: () => Promise<Result<D>>): Promise<D> {
    const result = await this.send(operation, send);
    return result.data as D;
  }

  /** The whole answer (for its headers) when it succeeded, or throws a {@link CairnError}. */
  async send<D>(operation: Operation, send: () => Promise<Result<D>>): Promise<Result<D>> {
    let result: Result<D>;
    try {
      result = await send();
    } catch (error) {
      throw this.unreachable(operation, error);
    }
    if (result.response.ok) return result;
    throw await this.failure(operation, result.response, result.error);
  }

  /** `text` with the token blotted out (for messages built from what others wrote). */
  redact(text: string): string {
    return this.#token ? text.split(this.#token).join("[token]") : text;
  }

  /** A request that got no answer: `network_error`; an abort is passed on as it is. */
  unreachable(operation: Operation, error: unknown): unknown {
    const name = (error as { name?: string } | null)?.name;
    if (name === "AbortError" || name === "TimeoutError" || error instanceof CairnError) return error;
    if (error instanceof SyntaxError) {
      const message = this.redact(`the answer from ${this.url} is not JSON: ${error.message}`);
      return new CairnError({ status: 0, code: "bad_response", operation, message });
    }
    const cause = (error as { cause?: { code?: string; message?: string } } | null)?.cause;
    const why = cause?.code ?? cause?.message ?? (error as Error | null)?.message ?? String(error);
    const message = this.redact(`cannot reach ${this.url}: ${why}`);
    return new CairnError({ status: 0, code: "network_error", operation, message });
  }

  /** The error an answer that is not 2xx stands for. */
  async failure(operation: Operation, response: Response, body: unknown): Promise<CairnError> {
    const details = errorObject(body);
    const code = (details?.code as string | undefined) ?? `http_${response.status}`;
    const routeMissing = (response.status === 404 && (details === undefined || code === "not_found")) || response.status === 405;
    if (routeMissing && (await this.serverLacks(operation))) return new UnsupportedByServer(operation, this.url);
    const text = typeof details?.message === "string" ? details.message : response.statusText || "no error document";
    return new CairnError({
      status: response.status,
      code,
      operation,
      message: this.redact(text),
      details,
      retryAfterMs: retryAfterMs(response.headers.get("retry-after")),
    });
  }

  /** Whether the server's own OpenAPI document lacks the operation's route (`false` when it cannot tell). */
  async serverLacks(operation: Operation): Promise<boolean> {
    this.#serverRoutes ??= this.serverRoutes();
    const routes = await this.#serverRoutes;
    if (routes === undefined) this.#serverRoutes = undefined; // ask again next time
    if (routes === "none") return true;
    return routes !== undefined && !routes.has(routeKey(operation.route));
  }

  /** The server's routes; `"none"` for a server without `/v1/openapi.json`; `undefined` when unknown. */
  private async serverRoutes(): Promise<Set<string> | "none" | undefined> {
    try {
      const { data, response } = await this.api.GET("/v1/openapi.json");
      if (response.status === 404) return "none";
      return response.ok && data ? routesOf(data as Parameters<typeof routesOf>[0]) : undefined;
    } catch {
      return undefined;
    }
  }
}
