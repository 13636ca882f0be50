/**
 * The one error type of the domain. Domain code throws AppError with a code from
 * the public catalogue (docs/api.md "Errors"); only the edges map it (HTTP error handler,
 * gRPC adapter, NATS consumer).
 */
export const ERROR_STATUS = {
  UNAUTHORIZED: 401,
  RATE_LIMIT_EXCEEDED: 429,
  CONCURRENCY_LIMIT_EXCEEDED: 429,
  FORBIDDEN: 403,
  VALIDATION_ERROR: 400,
  BAD_REQUEST: 400,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HEADERS_TOO_LARGE: 431,
  LIMIT_REACHED: 409,
  IDEMPOTENCY_KEY_IN_USE: 409,
  IDEMPOTENCY_KEY_REUSED: 422,
  SERVICE_UNAVAILABLE: 503,
  INTERNAL_ERROR: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface FieldProblem {
  field: string;
  message: string;
}

export interface AppErrorOptions {
  details?: Record<string, unknown>;
  /** True when the same call may succeed later (dependency down, timeout). */
  retryable?: boolean;
  /** Seconds for a Retry-After header. */
  retryAfterSeconds?: number;
  headers?: Record<string, string>;
  cause?: unknown;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly retryable: boolean;
  readonly retryAfterSeconds: number | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.retryable = options.retryable ?? code === 'SERVICE_UNAVAILABLE';
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.headers = options.headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const UNAUTHORIZED_MESSAGE = 'A valid API key is required. Send it in the X-API-Key header.';

export function unauthorized(): AppError {
  return new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
}

export function validationError(fields: FieldProblem[], message?: string): AppError {
  const text =
    message ??
    (fields.length === 1 ? `Invalid request: ${fields[0]?.field}: ${fields[0]?.message}` : `Invalid request: ${fields.length} problems`);
  return new AppError('VALIDATION_ERROR', text, { details: { fields } });
}

export function notFound(what = 'resource'): AppError {
  return new AppError('NOT_FOUND', `No such ${what}.`);
}

export function serviceUnavailable(dependency: string, retryAfterSeconds = 1, cause?: unknown): AppError {
  return new AppError(
    'SERVICE_UNAVAILABLE',
    `The service is temporarily unavailable (${dependency}). Retry after ${retryAfterSeconds} s.`,
    { retryable: true, retryAfterSeconds, details: { dependency }, cause },
  );
}

export interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

export function errorBody(code: string, message: string, details?: Record<string, unknown>): ErrorBody {
  return details === undefined ? { error: { code, message } } : { error: { code, message, details } };
}

/** The message of anything thrown (only the message: the object may carry connection details). */
export function errMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : String(err);
}
