/**
 * The `fetch` every call goes through: adds the bearer token and retries
 * answers of 429 and 503 after the server's `Retry-After` (bounded).
 *
 * @module
 */

/** How answers of 429 and 503 are retried. */
export interface RetryPolicy {
  /** Retries after the first try (default 3; 0: none). */
  retries?: number;
  /**
   * The longest wait before one retry, in ms (default 30 000). A
   * `Retry-After` beyond it is not waited for: the 429 or 503 is the answer.
   */
  maxDelayMs?: number;
}

/** A `fetch` as this client calls it. */
export type FetchLike = (input: Request) => Promise<Response>;

const RETRIED = new Set([429, 503]);

/** The delay a `Retry-After` value asks for, in ms; `undefined` if none or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The delay before retry `n` (1, 2, …): the server's, else 0.5 s doubling. */
function delayFor(response: Response, n: number): number {
  return retryAfterMs(response.headers.get("retry-after")) ?? 500 * 2 ** (n - 1);
}

/**
 * A `fetch` that sends `Authorization: Bearer <token>` (when there is a
 * token) and retries 429 and 503 per `policy`. The request is cloned per
 * try, so a body is sent whole each time.
 */
export function transport(base: FetchLike, token: () => string | undefined, policy: RetryPolicy = {}): FetchLike {
  const retries = policy.retries ?? 3;
  const maxDelayMs = policy.maxDelayMs ?? 30_000;
  return async (request) => {
    const bearer = token();
    if (bearer !== undefined) request.headers.set("authorization", `Bearer ${bearer}`);
    for (let n = 1; ; n++) {
      const response = await base(request.clone());
      if (!RETRIED.has(response.status) || n > retries) return response;
      const delay = delayFor(response, n);
      if (delay > maxDelayMs) return response;
      await response.body?.cancel().catch(() => undefined);
      await sleep(delay, request.signal);
    }
  };
}
