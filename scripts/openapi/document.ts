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
 * statuses of SPEC §2, rate-limit headers) is added here.
 */
import { ERROR_STATUS } from '@fcd/service-kit';
import Fastify from 'fastify';
import { publicRoutes as facilityRoutes } from '../../services/facility/src/routes/public';
import { HealthResponse } from '../../services/facility/src/routes/schemas';
import { PUBLIC_ROUTES } from '../../services/gateway/src/routes/table';
import { NoQuery, UsageResponseSchema } from '../../services/gateway/src/routes/usage-schema';
import { webhookRoutes } from '../../services/webhook/src/routes/webhooks';

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
  await app.ready();
  await app.close();
  found.set('GET /v1/account/usage', { querystring: NoQuery, response: { 200: UsageResponseSchema } });

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

/** TypeBox → plain JSON Schema 2020-12 (OpenAPI 3.1): drops symbols, turns `nullable: true` into a null branch. */
function toJsonSchema(schema: unknown): Json {
  const plain = JSON.parse(JSON.stringify(schema)) as Json;
  const walk = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(node)) if (k !== 'nullable') out[k] = walk(v);
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
}

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
    description: 'Filters combine with AND. `state` and `program` are case-insensitive; `q` matches names containing it.',
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
};

const TAGS = [
  { name: 'Health', description: 'Unauthenticated, unversioned, never counted.' },
  { name: 'Account', description: 'The calling account.' },
  { name: 'Facilities', description: 'EPA ECHO facilities.' },
  { name: 'Violations', description: 'Violations across facilities.' },
  { name: 'Cases', description: 'Enforcement cases (a case may involve several facilities).' },
  { name: 'Webhooks', description: 'Signed event subscriptions (Pro tier and above).' },
];

const PATH_PARAMETERS: Record<string, string> = {
  facility_id: 'Facility UUID. A malformed or unknown id is 404 NOT_FOUND.',
  case_id: 'Case UUID. A malformed or unknown id is 404 NOT_FOUND.',
  delivery_id: 'Delivery id (`dlv_<uuid>`). Unknown and malformed ids are 404 NOT_FOUND.',
  webhook_id: "Subscription id (`wh_<uuid>`). Unknown, malformed and other accounts' ids are all 404 NOT_FOUND.",
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
};

const ref = (kind: string, name: string): JsonObject => ({ $ref: `#/components/${kind}/${name}` });

const RATE_LIMIT_HEADERS: JsonObject = {
  'X-Request-Id': ref('headers', 'X-Request-Id'),
  'X-RateLimit-Limit': ref('headers', 'X-RateLimit-Limit'),
  'X-RateLimit-Remaining': ref('headers', 'X-RateLimit-Remaining'),
  'X-RateLimit-Reset': ref('headers', 'X-RateLimit-Reset'),
};

const ERROR_RESPONSES: Record<string, { status: number; description: string; codes: string[]; headers?: string[] }> = {
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
      'Authenticated but not allowed: a Free account on any path and method under `/v1/webhooks` (before its body is read); `details: { required_tier, tier }`.',
  },
  NotFound: {
    status: 404,
    codes: ['NOT_FOUND'],
    description: 'Unknown route or id, or an id that belongs to another account.',
  },
  MethodNotAllowed: {
    status: 405,
    codes: ['METHOD_NOT_ALLOWED'],
    description: 'A known path with another method; the `Allow` header lists the methods (GET routes also allow HEAD).',
    headers: ['Allow'],
  },
  RequestTimeout: {
    status: 408,
    codes: ['REQUEST_TIMEOUT'],
    description:
      'The request head did not arrive within 10 s, or the whole request within 30 s (the operator may change both). Answered before authentication; the connection is closed.',
  },
  Conflict: {
    status: 409,
    codes: ['LIMIT_REACHED'],
    description: 'A per-account quota is reached (more than 25 webhook subscriptions).',
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
  Allow: { description: 'The methods the path supports.', schema: { type: 'string' } },
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
              { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: r.codes } } } } },
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
    schema: { type: 'string' },
  }));
  const query = route.schema.querystring ? (toJsonSchema(route.schema.querystring) as JsonObject) : undefined;
  const queryProps = (query?.properties ?? {}) as JsonObject;
  const required = new Set((query?.required ?? []) as string[]);
  for (const [name, schema] of Object.entries(queryProps)) {
    parameters.push({ name, in: 'query', required: required.has(name), description: QUERY_PARAMETERS[name] ?? name, schema });
  }
  const isV1 = route.path.startsWith('/v1/');
  const webhook = route.path.startsWith('/v1/webhooks');
  const hasBody = route.schema.body !== undefined;

  const responses: JsonObject = {};
  for (const [status, schema] of Object.entries(route.schema.response ?? {})) {
    responses[status] = {
      description: status === '201' ? 'Created.' : 'OK.',
      headers: isV1 ? RATE_LIMIT_HEADERS : { 'X-Request-Id': ref('headers', 'X-Request-Id') },
      content: { 'application/json': { schema: toJsonSchema(schema) } },
    };
  }
  if (route.method === 'GET' && route.path === '/v1/account/usage' && responses['200']) {
    (responses['200'] as { headers: JsonObject }).headers = { ...RATE_LIMIT_HEADERS, 'X-Usage-Stale': ref('headers', 'X-Usage-Stale') };
  }
  if (route.method === 'DELETE') responses['204'] = { description: 'Deleted. No body.', headers: RATE_LIMIT_HEADERS };
  const errors = new Set<number>([408, 431, 500, ...(info.errors ?? [])]);
  if (isV1) for (const s of [401, 429, 503]) errors.add(s);
  if (hasBody || route.schema.querystring) errors.add(400);
  if (paramNames(route.path).length > 0) errors.add(404);
  if (webhook) errors.add(403);
  if (hasBody) for (const s of [413, 415]) errors.add(s);
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
- An unknown \`/v1\` path is 404 NOT_FOUND; a known path with another method is 405 METHOD_NOT_ALLOWED with \`Allow\` (both counted).
- Bodies: JSON objects only, at most 64 KiB, nested at most 32 levels deep (arrays and objects), \`Content-Type: application/json\`.
- Integer query parameters (\`limit\`) are decimal digits only; dates (\`since\`) lie between 0001-01-01 and 9999-12-31.
- Slow clients: the request head must arrive within 10 s and the whole request within 30 s, else 408 REQUEST_TIMEOUT; an idle keep-alive connection is closed after 72 s. A head over 16 KiB is 431 HEADERS_TOO_LARGE.
- Timestamps are ISO 8601 UTC with milliseconds and \`Z\`; dates \`YYYY-MM-DD\`.`;

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
    info: { title: 'Facility Compliance Data API', version: '1.0.0', description: DESCRIPTION },
    servers: [{ url: '/', description: 'The gateway that serves this document.' }],
    tags: TAGS,
    security: [{ ApiKeyAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: '`fcd_` followed by 32 alphanumerics.' },
      },
      schemas: { Error: ERROR_SCHEMA },
      headers: HEADERS,
      responses: errorResponses(),
    },
  };
  return { document: sortKeys(document) as JsonObject, undocumented };
}
