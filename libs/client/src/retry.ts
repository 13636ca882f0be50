/**
 * Retries of answers that say "try again later": 429 (rate limited) and 503 (a dependency of the
 * API is down; the API guarantees nothing was half-written, so a retry is safe for every method).
 * The wait is the answer's `Retry-After` when it has one, else an exponential backoff; retries and
 * the wait are capped. A `Retry-After` longer than the cap is not waited for: the answer is handed
 * back at once, and the client throws it as an error carrying `retryAfter` (a Free account over its
 * daily limit gets the seconds until midnight UTC, which no caller wants to sleep through).
 */

export interface RetryOptions {
  /** Retries after the first attempt (default 3); 0 turns retrying off. */
  maxRetries?: number;
  /**
   * The longest wait before one retry, in milliseconds (default 30 000). When `Retry-After` asks
   * for longer, the answer is returned instead of waited for.
   */
  maxDelayMs?: number;
  /** The first wait when an answer has no `Retry-After`, doubled for each retry (default 500 ms). */
  baseDelayMs?: number;
  /** The statuses retried (default 429 and 503). */
  statuses?: readonly number[];
}

/** Waits `ms` milliseconds; rejects with the signal's reason when it aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal | null) => Promise<void>;

export const DEFAULT_RETRY: Required<RetryOptions> = {
  maxRetries: 3,
  maxDelayMs: 30_000,
  baseDelayMs: 500,
  statuses: [429, 503],
};

export const sleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/**
 * `Retry-After` in milliseconds: delta-seconds (`120`) or an HTTP date, relative to `now`
 * (never negative). Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // An HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`); Date.parse alone would also take `-5` as a year.
  const date = /^[A-Za-z]{3}, /.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * How long to wait before retrying an answer (milliseconds), or undefined when it is not to be
 * retried: a status not retried, no retries left, or a `Retry-After` beyond `maxDelayMs`.
 * `retry` counts the retries already made (0 before the first).
 */
export function retryDelay(response: Response, retry: number, options: Required<RetryOptions>, now: number): number | undefined {
  if (!options.statuses.includes(response.status) || retry >= options.maxRetries) return undefined;
  const asked = parseRetryAfter(response.headers.get('retry-after'), now);
  if (asked !== undefined) return asked <= options.maxDelayMs ? asked : undefined;
  return Math.min(options.baseDelayMs * 2 ** retry, options.maxDelayMs);
}

export interface RetryingFetchOptions {
  retry?: RetryOptions;
  sleep?: Sleep;
  now?: () => number;
}

/**
 * Wraps a fetch function so that retryable answers are retried as `retryDelay` says. Each attempt
 * sends a clone of the request, so a body can be sent again; the body of an answer that is retried
 * is discarded (its connection goes back to the pool).
 */
export function retryingFetch(
  fetchFn: (request: Request) => Promise<Response>,
  options: RetryingFetchOptions = {},
): (request: Request) => Promise<Response> {
  const policy = { ...DEFAULT_RETRY, ...options.retry };
  const wait = options.sleep ?? sleep;
  const now = options.now ?? Date.now;
  return async (request) => {
    for (let retry = 0; ; retry++) {
      const response = await fetchFn(request.clone());
      const delay = retryDelay(response, retry, policy, now());
      if (delay === undefined) return response;
      await response.body?.cancel();
      await wait(delay, request.signal);
    }
  };
}
