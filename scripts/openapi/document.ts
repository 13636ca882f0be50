/**
 * Builds the OpenAPI 3.1 document of the public API from the route schemas.
 *
 * The facility and webhook route plugins are registered on a bare Fastify
 * instance with inert dependencies (nothing is called while routes register;
 * any access to a dependency throws), and an onRoute hook collects each
 * route's schema. The gateway's own route (GET /v1/account/usage) contributes
 * its exported TypeBox schemas; /healthz and /readyz are described here.
 * Only the routes of the gateway's table (PUBLIC_ROUTES) are kept, under the
 * gateway's parameter names. Everything edge-level (security, error envelope,
 * statuses of docs/api.md "Errors", rate-limit headers) is added here.
 */
import { ERROR_STATUS } from '@fcd/service-kit';
import Fastify from 'fastify';
import { ExportPublicQuery } from '../../services/facility/src/routes/exports';
import { publicRoutes as facilityRoutes } from '../../services/facility/src/routes/public';
import { CaseSchema, FacilitySchema, HealthResponse, ViolationSchema } from '../../services/facility/src/routes/schemas';
import { PUBLIC_ROUTES } from '../../services/gateway/src/routes/table';
import { NoQuery, UsageResponseSchema } from '../../services/gateway/src/routes/usage-schema';
import { eventRoutes } from '../../services/webhook/src/routes/events';
import { DELIVERY_ID_PATTERN, WEBHOOK_ID_PATTERN } from '../../services/webhook/src/routes/schemas';
import { webhookRoutes } from '../../services/webhook/src/routes/webhooks';
import { DELIVERY_HEADERS, EVENTS, envelopeSchema, RECEIVING_WEBHOOKS, RECORD_SCHEMAS, verificationSamples } from './events';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface CollectedRoute {
  method: string;
  /** Path in the gateway table's spelling, e.g. /v1/facilities/:facility_id. */
  path: string;
  schema: { querystring?: unknown; params?: unknown; body?: unknown; response?: Record<string, unknown> };
}

/** An object whose every property access throws: proves route registration calls nothing. */
function inert(name: string): never {
  return new Proxy(
    {},
    {
      get(_t, prop) {
        throw new Error(`openapi: ${name}.${String(prop)} was used while registering routes`);
      },
    },
  ) as never;
}

const shape = (url: string) => url.replace(/:[^/]+/g, ':');

/** The documented operations: table routes that a service registers with a handler, under the table's path. */
export async function collectRoutes(): Promise<{ routes: CollectedRoute[]; undocumented: string[] }> {
  const app = Fastify();
  const found = new Map<string, CollectedRoute['schema']>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) found.set(`${method} ${shape(route.url)}`, (route.schema ?? {}) as never);
  });
  await app.register(facilityRoutes, { db: inert('db') });
  await app.register(webhookRoutes, { service: inert('service'), internalAuth: inert('internalAuth') });
  await app.register(eventRoutes, { events: inert('events'), internalAuth: inert('internalAuth') });
  await app.ready();
  await app.close();
  found.set('GET /v1/account/usage', { querystring: NoQuery, response: { 200: UsageResponseSchema } });
  // Exports: the gateway walks the facility service's pages; rows are the list representations.
  const rowSchema = { facilities: FacilitySchema, violations: ViolationSchema, cases: CaseSchema };
  for (const kind of ['facilities', 'violations', 'cases'] as const) {
    found.set(`GET /v1/exports/${kind}`, { querystring: ExportPublicQuery[kind], response: { 200: rowSchema[kind] } });
  }

  const routes: CollectedRoute[] = [];
  const undocumented: string[] = [];
  for (const route of PUBLIC_ROUTES) {
    for (const method of route.methods) {
      const schema = found.get(`${method} ${shape(route.path)}`);
      if (schema) routes.push({ method, path: route.path, schema });
      else undocumented.push(`${method} ${route.path}`);
    }
  }
  return { routes, undocumented };
}

/** ajv-formats' keywords, not JSON Schema: the ranges they check are stated in the parameters' descriptions. */
const NON_STANDARD_KEYWORDS = new Set(['nullable', 'formatMinimum', 'formatMaximum', 'formatExclusiveMinimum', 'formatExclusiveMaximum']);

/** TypeBox → plain JSON Schema 2020-12 (OpenAPI 3.1): drops symbols and ajv-only keywords, turns `nullable: true` into a null branch. */
function toJsonSchema(schema: unknown): Json {
  const plain = JSON.parse(JSON.stringify(schema)) as Json;
  const walk = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(node)) if (!NON_STANDARD_KEYWORDS.has(k)) out[k] = walk(v);
    if (node.nullable === true) return { anyOf: [out, { type: 'null' }] };
    return out;
  };
  return walk(plain);
}

/** Keys sorted at every level, so the file is deterministic and diffs are readable. */
export function sortKeys(node: Json): Json {
  if (Array.isArray(node)) return node.map(sortKeys);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.keys(node)
      .sort()
      .map((k) => [k, sortKeys(node[k] as Json)]),
  );
}

interface OperationInfo {
  tag: string;
  operationId: string;
  summary: string;
  description?: string;
  /** Error statuses beyond the ones derived from the route's shape. */
  errors?: number[];
  /** Descriptions of this operation's query parameters, where they differ from QUERY_PARAMETERS. */
  query?: Record<string, string>;
}

const EXPORT_DESCRIPTION =
  'Pro tier and above (Free: 403). Streams every matching row in `id` order, NDJSON by default (one representation per line, then a last line `{"export":{"complete":true,"rows":N,"after":null}}`) or CSV with `Accept: text/csv` (a header row, RFC 4180 quoting, arrays joined with `;`). **Counted as one request per 1,000 rows** (at least one; 50,000 rows = 50 requests), each page counted before it is sent. If the export stops early, the NDJSON ends with `{"export":{"complete":false,"rows":N,"after":"<id>","error":{…}}}` and a CSV response is cut; either way `after=<id of the last row received>` resumes with no gap and no duplicate. Not conditional (no ETag).';

const OPERATIONS: Record<string, OperationInfo> = {
  'GET /healthz': { tag: 'Health', operationId: 'getHealth', summary: 'Liveness: the process serves' },
  'GET /readyz': {
    tag: 'Health',
    operationId: 'getReadiness',
    summary: 'Readiness: every dependency answers',
    description:
      'Checks the usage service, Postgres, Redis and the facility and webhook services. 503 SERVICE_UNAVAILABLE with `error.details.checks` naming each dependency and its state when one is down.',
  },
  'GET /v1/account/usage': {
    tag: 'Account',
    operationId: 'getAccountUsage',
    summary: "The calling account's usage today and in the billing period",
    description:
      'The call itself counts, and the figures include it. The billing period is the UTC calendar month. While the usage store (Postgres) is unreachable, an account the service knows is still answered: today is live, earlier days come from its cache, and the response carries `X-Usage-Stale: true`.',
  },
  'GET /v1/facilities': {
    tag: 'Facilities',
    operationId: 'listFacilities',
    summary: 'List facilities',
    description:
      'Filters combine with AND. `state` and `program` are case-insensitive; `q` matches names containing it. With `near` and `radius_km`: the facilities within the radius, nearest first, each with `distance_km`; a bad coordinate or radius is a VALIDATION_ERROR naming `near` or `radius_km`.',
  },
  'GET /v1/facilities/:facility_id': { tag: 'Facilities', operationId: 'getFacility', summary: 'Get one facility' },
  'GET /v1/facilities/:facility_id/violations': {
    tag: 'Facilities',
    operationId: 'listFacilityViolations',
    summary: "List a facility's violations",
  },
  'GET /v1/facilities/:facility_id/cases': {
    tag: 'Facilities',
    operationId: 'listFacilityCases',
    summary: 'List the enforcement cases involving a facility',
  },
  'GET /v1/violations': { tag: 'Violations', operationId: 'listViolations', summary: 'List violations' },
  'GET /v1/cases': { tag: 'Cases', operationId: 'listCases', summary: 'List enforcement cases' },
  'GET /v1/cases/:case_id': { tag: 'Cases', operationId: 'getCase', summary: 'Get one enforcement case' },
  'GET /v1/exports/facilities': {
    tag: 'Exports',
    operationId: 'exportFacilities',
    summary: 'Export every facility matching the filters (NDJSON or CSV)',
    description: EXPORT_DESCRIPTION,
  },
  'GET /v1/exports/violations': {
    tag: 'Exports',
    operationId: 'exportViolations',
    summary: 'Export every violation matching the filters (NDJSON or CSV)',
    description: `${EXPORT_DESCRIPTION} \`state\` is the facility's state.`,
  },
  'GET /v1/exports/cases': {
    tag: 'Exports',
    operationId: 'exportCases',
    summary: 'Export every enforcement case matching the filters (NDJSON or CSV)',
    description: EXPORT_DESCRIPTION,
  },
  'POST /v1/webhooks': {
    tag: 'Webhooks',
    operationId: 'createWebhook',
    summary: 'Create a webhook subscription',
    description:
      'Returns the subscription with its signing secret in clear: the only time it is shown. At most 25 subscriptions per account (409 LIMIT_REACHED). `facility_ids` omitted or null watches every facility.',
  },
  'GET /v1/webhooks': {
    tag: 'Webhooks',
    operationId: 'listWebhooks',
    summary: "List the account's webhook subscriptions, newest first",
  },
  'GET /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'getWebhook',
    summary: 'Get one webhook subscription (secret redacted)',
  },
  'PATCH /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'updateWebhook',
    summary: 'Update url, events, facility_ids or is_active',
    description: 'Any non-empty subset of the fields. `is_active: true` reactivates a subscription and resets its failure count.',
  },
  'DELETE /v1/webhooks/:webhook_id': {
    tag: 'Webhooks',
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook subscription',
    description: 'Nothing more is delivered to it.',
  },
  'GET /v1/webhooks/:webhook_id/deliveries': {
    tag: 'Webhooks',
    operationId: 'listWebhookDeliveries',
    summary: "A subscription's delivery log, newest first",
    description: 'Each delivery with its status, next attempt time and every attempt (response status, latency, error).',
  },
  'POST /v1/webhooks/:webhook_id/deliveries/:delivery_id/retry': {
    tag: 'Webhooks',
    operationId: 'retryWebhookDelivery',
    summary: 'Attempt a finished delivery once more, now',
    description:
      'No automatic retries follow and it never deactivates the subscription. A pending delivery is already scheduled and is returned as it is. An inactive subscription is a VALIDATION_ERROR.',
    errors: [400],
  },
  'POST /v1/webhooks/:webhook_id/test': {
    tag: 'Webhooks',
    operationId: 'testWebhook',
    summary: 'Send a signed `webhook.test` event (one attempt)',
    description: 'An inactive subscription is a VALIDATION_ERROR.',
    errors: [400],
  },
  'POST /v1/webhooks/:webhook_id/rotate-secret': {
    tag: 'Webhooks',
    operationId: 'rotateWebhookSecret',
    summary: 'Replace the signing secret',
    description: 'The new secret is effective for every attempt from now on and is returned in clear this once.',
  },
  'POST /v1/webhooks/:webhook_id/recover': {
    tag: 'Webhooks',
    operationId: 'recoverWebhookEvents',
    summary: 'Re-deliver the events of a window that the subscription did not receive',
    description:
      'Enqueues, as new deliveries with the normal retry rules, every event created in [`since`, `until`) (default until: now) that the subscription matches and did not receive successfully (no delivery of it succeeded and none is pending); `events` is how many. `since` must lie within the event retention (30 days by default, at least 7), else VALIDATION_ERROR. `dry_run: true` counts and sends nothing. An inactive subscription is a VALIDATION_ERROR (reactivate it first).',
  },
  'GET /v1/events': {
    tag: 'Events',
    operationId: 'listEvents',
    summary: 'The event log, oldest first (polling alternative to webhooks)',
    description:
      'The envelopes webhooks carry, byte for byte, in the order the log recorded them. Every tier; counted like any request. To poll, keep calling with the last `pagination.next_cursor`: it is set whenever the page has events, also on the last page, so each event is seen exactly once; an empty page returns the cursor it was given. Events are kept for the retention period (30 days by default).',
    query: {
      type: 'Only events of this type.',
      facility_id: 'Only events concerning this facility (UUID): a violation of it, a case involving it, a change of its status.',
      since: 'Only events created at or after this time (RFC 3339 date-time).',
      cursor: 'Opaque cursor: `pagination.next_cursor` of the previous page.',
    },
  },
  'GET /v1/events/:event_id': {
    tag: 'Events',
    operationId: 'getEvent',
    summary: 'Get one event envelope',
    description: 'Every tier. An event past the retention period is 404 NOT_FOUND.',
  },
};

/**
 * The "Receiving webhooks" tag's Markdown, which /docs (Scalar) renders as the section's
 * introduction: what a delivery is, then the verification examples (the same files as the
 * webhooks' `x-codeSamples`) as fenced code blocks, one per language.
 */
function receivingWebhooksDescription(): string {
  const fence: Record<string, string> = { JavaScript: 'js', Python: 'python' };
  const samples = verificationSamples().map((s) => `### ${s.label}\n\n\`\`\`${fence[s.lang] ?? ''}\n${s.source.trimEnd()}\n\`\`\``);
  return [RECEIVING_WEBHOOKS, '## Verifying a delivery', ...samples].join('\n\n');
}

const TAGS = [
  { name: 'Health', description: 'Unauthenticated, unversioned, never counted.' },
  { name: 'Account', description: 'The calling account.' },
  { name: 'Facilities', description: 'EPA ECHO facilities.' },
  { name: 'Violations', description: 'Violations across facilities.' },
  { name: 'Cases', description: 'Enforcement cases (a case may involve several facilities).' },
  { name: 'Webhooks', description: 'Signed event subscriptions (Pro tier and above).' },
  { name: 'Events', description: 'The event log: the envelopes webhooks carry, for polling (every tier).' },
  { name: 'Receiving webhooks', description: receivingWebhooksDescription() },
  { name: 'Exports', description: 'Bulk export as NDJSON or CSV (Pro tier and above), counted per 1,000 rows.' },
];

/** Path parameters' schemas beyond `type: string` (a malformed id is still 404 NOT_FOUND, as documented). */
const PATH_PARAMETER_SCHEMAS: Record<string, JsonObject> = {
  webhook_id: { type: 'string', pattern: WEBHOOK_ID_PATTERN },
  delivery_id: { type: 'string', pattern: DELIVERY_ID_PATTERN },
};

const PATH_PARAMETERS: Record<string, string> = {
  facility_id: 'Facility UUID. A malformed or unknown id is 404 NOT_FOUND.',
  case_id: 'Case UUID. A malformed or unknown id is 404 NOT_FOUND.',
  delivery_id: 'Delivery id (`dlv_<uuid>`). Unknown and malformed ids are 404 NOT_FOUND.',
  webhook_id: "Subscription id (`wh_<uuid>`). Unknown, malformed and other accounts' ids are all 404 NOT_FOUND.",
  event_id: 'Event id (`evt_<uuid>`). Unknown and malformed ids are 404 NOT_FOUND.',
};

const QUERY_PARAMETERS: Record<string, string> = {
  state: 'USPS state code (case-insensitive).',
  program: 'ECHO program (case-insensitive).',
  compliance_status: 'Compliance status.',
  q: 'Name contains (case-insensitive).',
  facility_id: 'Only records of this facility (UUID).',
  severity: 'Violation severity.',
  since: 'Only records dated on or after this day (YYYY-MM-DD, 0001-01-01 to 9999-12-31: what a Postgres date holds).',
  status: 'Case status.',
  case_type: 'Case type.',
  limit: 'Page size, 1–100 (default 25), in decimal digits only: `Infinity`, `1e2`, `0x10` or `1.5` is a VALIDATION_ERROR.',
  cursor: 'Opaque cursor: `pagination.next_cursor` of the previous page.',
  after: 'Export resume point: the `id` of the last row received (exports are in `id` order).',
  near: 'Search by place: `<latitude>,<longitude>` in decimal degrees (−90…90, −180…180), with `radius_km`. Results are ordered by distance (then registry id) and carry `distance_km`; the other filters still apply.',
  radius_km: 'Radius around `near` in km, 0.1–100 (decimal). Required with `near`.',
};

const ref = (kind: string, name: string): JsonObject => ({ $ref: `#/components/${kind}/${name}` });

const RATE_LIMIT_HEADERS: JsonObject = {
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
        'LIMIT_REACHED: a per-account quota is reached (more than 25 webhook subscriptions). IDEMPOTENCY_KEY_IN_USE: a request with this `Idempotency-Key` is still being processed after waiting for it (`Retry-After`).',
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
      codes: ['RATE_LIMIT_EXCEEDED'],
      description:
        'A Free account over its daily limit (not counted). `details: { limit, remaining: 0, resets_at }`; `Retry-After` is the number of seconds to the reset.',
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

const ERROR_SCHEMA: JsonObject = {
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

const HEADERS: JsonObject = {
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

function errorResponses(): JsonObject {
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

const STATUS_RESPONSE: Record<number, string> = Object.fromEntries(Object.entries(ERROR_RESPONSES).map(([n, r]) => [r.status, n]));

function paramNames(path: string): string[] {
  return [...path.matchAll(/:([^/]+)/g)].map((m) => m[1] as string);
}

function operation(route: CollectedRoute): JsonObject {
  const key = `${route.method} ${route.path}`;
  const info = OPERATIONS[key];
  if (!info) throw new Error(`openapi: no summary for ${key} in scripts/openapi/document.ts`);
  const parameters: Json[] = paramNames(route.path).map((name) => ({
    name,
    in: 'path',
    required: true,
    description: PATH_PARAMETERS[name] ?? name,
    schema: PATH_PARAMETER_SCHEMAS[name] ?? { type: 'string' },
  }));
  const query = route.schema.querystring ? (toJsonSchema(route.schema.querystring) as JsonObject) : undefined;
  const queryProps = (query?.properties ?? {}) as JsonObject;
  const required = new Set((query?.required ?? []) as string[]);
  for (const [name, schema] of Object.entries(queryProps)) {
    const description = info.query?.[name] ?? QUERY_PARAMETERS[name] ?? name;
    parameters.push({ name, in: 'query', required: required.has(name), description, schema });
  }
  const isV1 = route.path.startsWith('/v1/');
  const webhook = route.path.startsWith('/v1/webhooks');
  const hasBody = route.schema.body !== undefined;

  const isExport = route.path.startsWith('/v1/exports/');
  const conditional = isV1 && route.method === 'GET' && !isExport;
  const responses: JsonObject = {};
  for (const [status, schema] of Object.entries(route.schema.response ?? {})) {
    responses[status] = {
      description: status === '201' ? 'Created.' : 'OK.',
      headers: isV1 ? RATE_LIMIT_HEADERS : { 'X-Request-Id': ref('headers', 'X-Request-Id') },
      content: { 'application/json': { schema: toJsonSchema(schema) } },
    };
    if (conditional && status === '200') {
      (responses[status] as { headers: JsonObject }).headers = {
        ...RATE_LIMIT_HEADERS,
        ETag: ref('headers', 'ETag'),
        'Cache-Control': ref('headers', 'Cache-Control'),
      };
    }
  }
  if (isExport && responses['200']) {
    const row = (responses['200'] as { content: { 'application/json': { schema: Json } } }).content['application/json'].schema;
    responses['200'] = {
      description: 'The rows, streamed. NDJSON: one row per line, then the `export` line. CSV: a header row, then the rows.',
      headers: RATE_LIMIT_HEADERS,
      content: {
        'application/x-ndjson': { schema: row },
        'text/csv': { schema: { type: 'string' } },
      },
    };
  }
  if (route.method === 'POST' && isV1) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes a retry safe: the same key with the same request within 24 h replays the first answer (status and body, byte for byte, with `Idempotent-Replayed: true`) without doing the work again; with another request → 422 IDEMPOTENCY_KEY_REUSED. Scoped to the account; 1–255 visible ASCII characters. A duplicate sent while the first is in progress waits for its answer. Replays are counted like any request.',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]{1,255}$' },
    });
  }
  if (conditional) {
    parameters.push({
      name: 'If-None-Match',
      in: 'header',
      required: false,
      description: 'ETags of copies the client holds (or `*`). When one matches the current representation: 304, not counted.',
      schema: { type: 'string' },
    });
    responses['304'] = {
      description:
        'Not Modified: `If-None-Match` names the current representation. No body. Authenticated like any request and carries the rate-limit headers, but **not counted** against the daily limit (a Free account over its limit still gets 429).',
      headers: { ...RATE_LIMIT_HEADERS, ETag: ref('headers', 'ETag'), 'Cache-Control': ref('headers', 'Cache-Control') },
    };
  }
  if (route.method === 'GET' && route.path === '/v1/account/usage' && responses['200']) {
    (responses['200'] as { headers: JsonObject }).headers = {
      ...((responses['200'] as { headers: JsonObject }).headers as JsonObject),
      'X-Usage-Stale': ref('headers', 'X-Usage-Stale'),
    };
  }
  if (route.method === 'DELETE') responses['204'] = { description: 'Deleted. No body.', headers: RATE_LIMIT_HEADERS };
  const errors = new Set<number>([408, 431, 500, ...(info.errors ?? [])]);
  if (isV1) for (const s of [401, 429, 503]) errors.add(s);
  if (hasBody || route.schema.querystring) errors.add(400);
  if (paramNames(route.path).length > 0) errors.add(404);
  if (webhook || isExport) errors.add(403);
  if (hasBody) for (const s of [413, 415]) errors.add(s);
  if (route.method === 'POST' && isV1) for (const s of [409, 422]) errors.add(s);
  if (key === 'POST /v1/webhooks') errors.add(409);
  if (route.path === '/readyz') errors.add(503);
  for (const s of [...errors].sort()) responses[String(s)] = ref('responses', STATUS_RESPONSE[s] as string);

  const op: JsonObject = {
    operationId: info.operationId,
    summary: info.summary,
    tags: [info.tag],
    responses,
  };
  if (info.description) op.description = info.description;
  if (parameters.length > 0) op.parameters = parameters;
  if (hasBody) op.requestBody = { required: true, content: { 'application/json': { schema: toJsonSchema(route.schema.body) } } };
  if (!isV1) op.security = [];
  return op;
}

const DESCRIPTION = `HTTP JSON API over US facility compliance data (EPA ECHO facilities, violations and enforcement cases), metered per account, with signed webhooks.

- Authentication: \`X-API-Key: fcd_<32 alphanumerics>\` on every \`/v1\` request. Health checks need no key and are never counted.
- Success bodies are \`{ "data": … }\`; lists add \`"pagination": { "limit", "next_cursor", "has_more" }\` with opaque keyset cursors.
- Errors are \`{ "error": { "code", "message", "details"? } }\`.
- Every response to an authenticated request, whatever its status (401 excepted), carries \`X-RateLimit-Limit\`, \`X-RateLimit-Remaining\` and \`X-RateLimit-Reset\`. Every response carries \`X-Request-Id\`.
- Conditional GETs: every 200 to a GET carries a strong \`ETag\` (a hash of the body's bytes) and \`Cache-Control: private, max-age=N\` (60 for facility data, 0 for webhooks and the usage report). A GET whose \`If-None-Match\` names the current tag is answered 304 with no body; a 304 is authenticated and carries the rate-limit headers but is **not counted** against the daily limit. Every other answer counts as one request.
- Idempotent POSTs: every POST takes an optional \`Idempotency-Key\` (1–255 visible ASCII characters, scoped to the account). The same key with the same request within 24 h replays the first answer byte for byte (\`Idempotent-Replayed: true\`) without doing the work again; with another request it is 422 IDEMPOTENCY_KEY_REUSED. Concurrent duplicates wait for the first answer. Replays are counted.
- An unknown \`/v1\` path is 404 NOT_FOUND; a known path with another method is 405 METHOD_NOT_ALLOWED with \`Allow\` (both counted).
- Bodies: JSON objects only, at most 64 KiB, nested at most 32 levels deep (arrays and objects), \`Content-Type: application/json\`.
- Integer query parameters (\`limit\`) are decimal digits only; dates (\`since\`) lie between 0001-01-01 and 9999-12-31.
- Slow clients: the request head must arrive within 10 s and the whole request within 30 s, else 408 REQUEST_TIMEOUT; an idle keep-alive connection is closed after 72 s. A head over 16 KiB is 431 HEADERS_TOO_LARGE.
- Timestamps are ISO 8601 UTC with milliseconds and \`Z\`; dates \`YYYY-MM-DD\`.`;

const recordRef = (name: string): JsonObject => ref('schemas', name);

/**
 * The OpenAPI 3.1 `webhooks` section: one POST per event type, as the dispatcher sends it to a
 * subscription's URL (its envelope schema, the delivery headers, what the answers mean), with the
 * verification examples as `x-codeSamples`.
 */
function webhooks(): JsonObject {
  const samples = verificationSamples() as unknown as Json[];
  return Object.fromEntries(
    EVENTS.map((e) => [
      e.type,
      {
        post: {
          operationId: e.operationId,
          summary: e.summary,
          description: e.description,
          tags: ['Receiving webhooks'],
          security: [],
          parameters: DELIVERY_HEADERS.map((h) => ref('parameters', h.name)),
          requestBody: { required: true, content: { 'application/json': { schema: ref('schemas', e.name) } } },
          responses: {
            '2XX': { description: 'Delivered. The body is not read beyond its first 4 KiB, which the delivery log keeps.' },
            '401': {
              description: 'The signature does not verify: the attempt fails (and is retried, in case the secret was rotated meanwhile).',
            },
            '429': {
              description:
                'Slow down: the retry waits `Retry-After` (seconds or an HTTP date), at least the scheduled delay and at most twice it. 503 does the same.',
              headers: { 'Retry-After': { description: 'Seconds, or an HTTP date.', schema: { type: 'string' } } },
            },
            default: {
              description:
                'Any other status (3xx included: redirects are not followed), or no answer within 10 s: the attempt fails and is retried.',
            },
          },
          'x-codeSamples': samples,
        },
      },
    ]),
  );
}

/** The whole document, keys sorted. */
export async function buildDocument(): Promise<{ document: JsonObject; undocumented: string[] }> {
  const { routes, undocumented } = await collectRoutes();
  const all: CollectedRoute[] = [
    { method: 'GET', path: '/healthz', schema: { response: { 200: HealthResponse } } },
    {
      method: 'GET',
      path: '/readyz',
      schema: {
        response: {
          200: {
            type: 'object',
            required: ['data'],
            properties: {
              data: {
                type: 'object',
                required: ['status', 'checks'],
                properties: {
                  status: { type: 'string', const: 'ready' },
                  checks: {
                    type: 'object',
                    additionalProperties: {
                      type: 'object',
                      required: ['status'],
                      properties: { status: { type: 'string', enum: ['up', 'down'] }, error: { type: 'string' } },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
    ...routes,
  ];
  const paths: JsonObject = {};
  for (const route of all) {
    const openApiPath = route.path.replace(/:([^/]+)/g, '{$1}');
    const item = (paths[openApiPath] ?? {}) as JsonObject;
    item[route.method.toLowerCase()] = operation(route);
    paths[openApiPath] = item;
  }
  const document: JsonObject = {
    openapi: '3.1.0',
    info: {
      title: 'Facility Compliance Data API',
      version: '1.0.0',
      description: DESCRIPTION,
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: '/', description: 'The gateway that serves this document.' }],
    tags: TAGS,
    security: [{ ApiKeyAuth: [] }],
    paths,
    webhooks: webhooks(),
    components: {
      securitySchemes: {
        ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: '`fcd_` followed by 32 alphanumerics.' },
      },
      schemas: { Error: ERROR_SCHEMA, ...RECORD_SCHEMAS, ...Object.fromEntries(EVENTS.map((e) => [e.name, envelopeSchema(e, recordRef)])) },
      headers: HEADERS,
      parameters: Object.fromEntries(
        DELIVERY_HEADERS.map((h) => [h.name, { name: h.name, in: 'header', required: true, description: h.description, schema: h.schema }]),
      ),
      responses: errorResponses(),
    },
  };
  return { document: sortKeys(document) as JsonObject, undocumented };
}
