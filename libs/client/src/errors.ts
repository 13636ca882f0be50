import type { components } from './generated/openapi.js';
import { type RateLimit, rateLimitOf } from './rate-limit.js';
import { parseRetryAfter } from './retry.js';

/** The error envelope every non-2xx answer of the API carries. */
export type ErrorEnvelope = components['schemas']['Error'];
/** The documented error codes (`error.code`). */
export type ErrorCode = ErrorEnvelope['error']['code'];

/**
 * A non-2xx answer that is not the API's error envelope (a proxy's HTML page, an empty body):
 * `code` is then `UNEXPECTED_RESPONSE`.
 */
export const UNEXPECTED_RESPONSE = 'UNEXPECTED_RESPONSE';

const isEnvelope = (body: unknown): body is ErrorEnvelope =>
  typeof body === 'object' &&
  body !== null &&
  typeof (body as { error?: unknown }).error === 'object' &&
  (body as { error: object | null }).error !== null &&
  typeof (body as { error: { code?: unknown } }).error.code === 'string' &&
  typeof (body as { error: { message?: unknown } }).error.message === 'string';

/** A non-2xx answer of the API, with the envelope's code, message and details. */
export class FcdApiError extends Error {
  override readonly name: string = 'FcdApiError';
  /** The HTTP status. */
  readonly status: number;
  /** The envelope's `error.code`, or `UNEXPECTED_RESPONSE` when the body was not an envelope. */
  readonly code: ErrorCode | typeof UNEXPECTED_RESPONSE;
  /** The envelope's `error.details`, when it has some (e.g. `fields` of a VALIDATION_ERROR). */
  readonly details: Record<string, unknown> | undefined;
  /** `X-Request-Id` of the answer: quote it when asking for support. */
  readonly requestId: string | undefined;
  /** `Retry-After` in seconds (rounded up), when the answer has one (429, 503). */
  readonly retryAfter: number | undefined;
  /** The rate-limit headers of the answer, when it has them. */
  readonly rateLimit: RateLimit | undefined;
  /** The answer itself (its body already read). */
  readonly response: Response;

  constructor(response: Response, body: unknown, now: number = Date.now()) {
    const envelope = isEnvelope(body) ? body.error : undefined;
    super(envelope?.message ?? `HTTP ${response.status} ${response.statusText}`.trim());
    this.status = response.status;
    this.code = envelope?.code ?? UNEXPECTED_RESPONSE;
    this.details = envelope?.details;
    this.requestId = response.headers.get('x-request-id') ?? undefined;
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), now);
    this.retryAfter = retryAfterMs === undefined ? undefined : Math.ceil(retryAfterMs / 1000);
    this.rateLimit = rateLimitOf(response.headers);
    this.response = response;
  }
}

/** 429 RATE_LIMIT_EXCEEDED: the account is over its daily limit until `resetsAt`. */
export class RateLimitError extends FcdApiError {
  override readonly name: string = 'RateLimitError';
  /** `details.resets_at` of the envelope (or `X-RateLimit-Reset`), when given. */
  readonly resetsAt: Date | undefined;

  constructor(response: Response, body: unknown, now?: number) {
    super(response, body, now);
    const resetsAt = typeof this.details?.resets_at === 'string' ? Date.parse(this.details.resets_at) : Number.NaN;
    this.resetsAt = Number.isNaN(resetsAt) ? this.rateLimit?.reset : new Date(resetsAt);
  }
}

/** 503 SERVICE_UNAVAILABLE (after the client's retries): nothing was written; try again later. */
export class ServiceUnavailableError extends FcdApiError {
  override readonly name: string = 'ServiceUnavailableError';
}

/** The typed error for a non-2xx answer whose body has been read (parsed JSON, or text). */
export function errorFromResponse(response: Response, body: unknown, now?: number): FcdApiError {
  if (response.status === 429) return new RateLimitError(response, body, now);
  if (response.status === 503) return new ServiceUnavailableError(response, body, now);
  return new FcdApiError(response, body, now);
}
