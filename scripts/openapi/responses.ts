/** The edge-level parts of the OpenAPI document: the error envelope and responses (docs/api.md "Errors"), and the response headers. */
import { ERROR_STATUS } from '@fcd/service-kit';
import { type JsonObject, ref } from './json';

export const RATE_LIMIT_HEADERS: JsonObject = {
  'X-Request-Id': ref('headers', 'X-Request-Id'),
  'X-RateLimit-Limit': ref('headers', 'X-RateLimit-Limit'),
  'X-RateLimit-Remaining': ref('headers', 'X-RateLimit-Remaining'),
  'X-RateLimit-Reset': ref('headers', 'X-RateLimit-Reset'),
};

const ERROR_RESPONSES: Record<string, { status: number; description: string; codes: string[]; headers?: string[]; details?: JsonObject }> =
  {
    BadRequest: {
      status: 400,
      codes: ['VALIDATION_ERROR', 'BAD_REQUEST'],
      description:
        'VALIDATION_ERROR: a bad or unknown query parameter or body field; `details.fields` lists every problem at once. BAD_REQUEST: the body is not valid JSON, not an object, nests arrays or objects deeper than 32 levels, or has `__proto__` / `constructor.prototype` keys; or the URL has a percent-encoding that does not decode, or the request is not valid HTTP/1.1 (e.g. both Content-Length and Transfer-Encoding, two Content-Lengths, CR, LF or NUL in a header), both answered before authentication.',
    },
    Unauthorized: {
      status: 401,
      codes: ['UNAUTHORIZED'],
      description: 'The key is missing, malformed, unknown or revoked (one message for all). No rate-limit headers.',
    },
    Forbidden: {
      status: 403,
      codes: ['FORBIDDEN'],
      description:
        'Authenticated but not allowed: a Free account on any path and method under `/v1/webhooks` or `/v1/exports` (before its body is read); `details: { required_tier, tier }`.',
      details: {
        type: 'object',
        required: ['required_tier', 'tier'],
        properties: {
          required_tier: { type: 'string', const: 'pro', description: 'Webhooks need the Pro tier or above.' },
          tier: { type: 'string', enum: ['free'], description: "The account's tier (below Pro)." },
        },
      },
    },
    NotFound: {
      status: 404,
      codes: ['NOT_FOUND'],
      description: 'Unknown route or id, or an id that belongs to another account.',
    },
    RequestTimeout: {
      status: 408,
      codes: ['REQUEST_TIMEOUT'],
      description:
        'The request head did not arrive within 10 s, or the whole request within 30 s (the operator may change both). Answered before authentication; the connection is closed.',
    },
    Conflict: {
      status: 409,
      codes: ['LIMIT_REACHED', 'IDEMPOTENCY_KEY_IN_USE'],
      description:
        'LIMIT_REACHED: a per-account quota is reached (more than 25 webhook subscriptions), or a recovery of the subscription is in progress (`details.limit: "recovery_in_progress"`, `Retry-After`). IDEMPOTENCY_KEY_IN_USE: a request with this `Idempotency-Key` is still being processed after waiting for it (`Retry-After`).',
    },
    UnprocessableContent: {
      status: 422,
      codes: ['IDEMPOTENCY_KEY_REUSED'],
      description: 'This `Idempotency-Key` was used in the last 24 hours with another request (method, path or body). Nothing was done.',
    },
    PayloadTooLarge: { status: 413, codes: ['PAYLOAD_TOO_LARGE'], description: 'The body is over 64 KiB.' },
    UnsupportedMediaType: {
      status: 415,
      codes: ['UNSUPPORTED_MEDIA_TYPE'],
      description: 'A body without `Content-Type: application/json`.',
    },
    HeadersTooLarge: {
      status: 431,
      codes: ['HEADERS_TOO_LARGE'],
      description: 'The request head is over 16 KiB. Answered before authentication; the connection is closed.',
    },
    TooManyRequests: {
      status: 429,
      codes: ['RATE_LIMIT_EXCEEDED', 'CONCURRENCY_LIMIT_EXCEEDED'],
      description:
        'A Free account over its daily limit (not counted). `details: { limit, remaining: 0, resets_at }`; `Retry-After` is the number of seconds to the reset. On POST /v1/webhooks/{webhook_id}/recover: more than 10 calls a minute for the account, `details: { limit, window_seconds, retry_after_seconds }`. CONCURRENCY_LIMIT_EXCEEDED: the account already runs its most bulk exports at once (2 on Pro, 4 on Enterprise); `details: { limit }`, `Retry-After: 5`.',
      headers: ['Retry-After'],
    },
    InternalError: {
      status: 500,
      codes: ['INTERNAL_ERROR'],
      description: 'A bug. The message quotes the request id; never a stack trace.',
    },
    ServiceUnavailable: {
      status: 503,
      codes: ['SERVICE_UNAVAILABLE'],
      description: 'A dependency is down; nothing was half-written. `Retry-After` is set.',
      headers: ['Retry-After'],
    },
  };

export const ERROR_SCHEMA: JsonObject = {
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
        message: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
      },
    },
  },
};

export const HEADERS: JsonObject = {
  'X-Request-Id': {
    description: 'Echoes a well-formed incoming `X-Request-Id` (`[A-Za-z0-9._:-]{1,128}`), else a generated `req_<uuid>`.',
    schema: { type: 'string' },
  },
  'X-RateLimit-Limit': { description: "The account's daily limit.", schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'max(0, limit − requests today).', schema: { type: 'integer' } },
  'X-RateLimit-Reset': {
    description: 'The next reset (00:00:00.000Z of the next UTC day).',
    schema: { type: 'string', format: 'date-time' },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
  ETag: {
    description:
      'Strong entity tag of this representation (a hash of its exact bytes). Send it back in `If-None-Match`: while the representation is unchanged the answer is 304 Not Modified, which is not counted against the daily limit.',
    schema: { type: 'string' },
  },
  'Cache-Control': {
    description:
      "`private, max-age=N`: N is 60 s for facility data (facilities, violations, cases; they change when an import runs) and 0 for an account's own webhooks and usage report (revalidate every time; a 304 costs nothing).",
    schema: { type: 'string' },
  },
  'X-Usage-Stale': {
    description:
      "Present (`true`) when the billing figures of earlier days came from the usage service's cache because its store was unreachable; they may miss counts made since. Today's count is live.",
    required: false,
    schema: { type: 'string', enum: ['true'] },
  },
};

export function errorResponses(): JsonObject {
  const out: JsonObject = {};
  for (const [name, r] of Object.entries(ERROR_RESPONSES)) {
    // Answered before authorization (or refusing it): no rate-limit headers.
    const headers: JsonObject = [401, 408, 431].includes(r.status)
      ? { 'X-Request-Id': ref('headers', 'X-Request-Id') }
      : { ...RATE_LIMIT_HEADERS };
    for (const h of r.headers ?? []) headers[h] = ref('headers', h);
    out[name] = {
      description: `${r.codes.join(' or ')}. ${r.description}`,
      headers,
      content: {
        'application/json': {
          schema: {
            allOf: [
              ref('schemas', 'Error'),
              {
                type: 'object',
                properties: {
                  error: { type: 'object', properties: { code: { enum: r.codes }, ...(r.details ? { details: r.details } : {}) } },
                },
              },
            ],
          },
        },
      },
    };
  }
  return out;
}

export const STATUS_RESPONSE: Record<number, string> = Object.fromEntries(Object.entries(ERROR_RESPONSES).map(([n, r]) => [r.status, n]));
