/** One OpenAPI operation from a collected route: its parameters, responses and error statuses. */
import { DeliveryId, KeyId, SubscriptionId } from '@fcd/service-kit';
import { type Json, type JsonObject, ref, toJsonSchema } from './json';
import { OPERATIONS, type OperationInfo } from './operations';
import { RATE_LIMIT_HEADERS, STATUS_RESPONSE } from './responses';
import type { CollectedRoute } from './routes';

/** Path parameters' schemas beyond `type: string` (a malformed id is still 404 NOT_FOUND, as documented). */
const PATH_PARAMETER_SCHEMAS: Record<string, JsonObject> = {
  webhook_id: { type: 'string', pattern: SubscriptionId.pattern },
  delivery_id: { type: 'string', pattern: DeliveryId.pattern },
  key_id: { type: 'string', pattern: KeyId.pattern },
};

const PATH_PARAMETERS: Record<string, string> = {
  facility_id: 'Facility UUID. A malformed or unknown id is 404 NOT_FOUND.',
  case_id: 'Case UUID. A malformed or unknown id is 404 NOT_FOUND.',
  delivery_id: 'Delivery id (`dlv_<uuid>`). Unknown and malformed ids are 404 NOT_FOUND.',
  webhook_id: "Subscription id (`wh_<uuid>`). Unknown, malformed and other accounts' ids are all 404 NOT_FOUND.",
  event_id: 'Event id (`evt_<uuid>`). Unknown and malformed ids are 404 NOT_FOUND.',
  key_id: "API key id (`key_<uuid>`, not the key). Unknown, malformed and other accounts' ids are all 404 NOT_FOUND.",
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

function paramNames(path: string): string[] {
  return [...path.matchAll(/:([^/]+)/g)].map((m) => m[1] as string);
}

/** What an operation's documentation depends on, from its method and path. */
interface RouteKind {
  isV1: boolean;
  webhook: boolean;
  hasBody: boolean;
  isExport: boolean;
  /** A GET answered 304 to a matching `If-None-Match`. */
  conditional: boolean;
}

function kindOf(route: CollectedRoute): RouteKind {
  const isV1 = route.path.startsWith('/v1/');
  const isExport = route.path.startsWith('/v1/exports/');
  return {
    isV1,
    webhook: route.path.startsWith('/v1/webhooks'),
    hasBody: route.schema.body !== undefined,
    isExport,
    conditional: isV1 && route.method === 'GET' && !isExport,
  };
}

/** Path parameters, then query parameters (from the route's querystring schema). */
function pathAndQueryParameters(route: CollectedRoute, info: OperationInfo): Json[] {
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
    const own = typeof (schema as JsonObject).description === 'string' ? `${(schema as JsonObject).description as string}.` : undefined;
    const description = info.query?.[name] ?? QUERY_PARAMETERS[name] ?? own ?? name;
    parameters.push({ name, in: 'query', required: required.has(name), description, schema });
  }
  return parameters;
}

/** The success responses of the route's schema (an export's 200 as NDJSON or CSV). */
function successResponses(route: CollectedRoute, kind: RouteKind): JsonObject {
  const { isV1, conditional, isExport } = kind;
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
  return responses;
}

/** The `Idempotency-Key` and `If-None-Match` header parameters and the 304, where they apply; the usage report's stale flag. */
function headerParametersAndResponses(route: CollectedRoute, kind: RouteKind, parameters: Json[], responses: JsonObject): void {
  const { isV1, conditional } = kind;
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
}

/** The route's error statuses, sorted as the document lists them. */
function errorStatuses(route: CollectedRoute, kind: RouteKind, info: OperationInfo): number[] {
  const { isV1, webhook, hasBody, isExport } = kind;
  const errors = new Set<number>([408, 431, 500, ...(info.errors ?? [])]);
  if (isV1) for (const s of [401, 429, 503]) errors.add(s);
  if (hasBody || route.schema.querystring) errors.add(400);
  if (paramNames(route.path).length > 0) errors.add(404);
  if (webhook || isExport) errors.add(403);
  if (hasBody) for (const s of [413, 415]) errors.add(s);
  if (route.method === 'POST' && isV1) for (const s of [409, 422]) errors.add(s);
  if (`${route.method} ${route.path}` === 'POST /v1/webhooks') errors.add(409);
  if (route.path === '/readyz') errors.add(503);
  return [...errors].sort();
}

export function operation(route: CollectedRoute): JsonObject {
  const key = `${route.method} ${route.path}`;
  const info = OPERATIONS[key];
  if (!info) throw new Error(`openapi: no summary for ${key} in scripts/openapi/operations.ts`);
  const kind = kindOf(route);
  const parameters = pathAndQueryParameters(route, info);
  const responses = successResponses(route, kind);
  headerParametersAndResponses(route, kind, parameters, responses);
  if (route.method === 'DELETE') responses['204'] = { description: 'Deleted. No body.', headers: RATE_LIMIT_HEADERS };
  for (const s of errorStatuses(route, kind, info)) responses[String(s)] = ref('responses', STATUS_RESPONSE[s] as string);

  const op: JsonObject = {
    operationId: info.operationId,
    summary: info.summary,
    tags: [info.tag],
    responses,
  };
  if (info.description) op.description = info.description;
  if (parameters.length > 0) op.parameters = parameters;
  if (kind.hasBody) op.requestBody = { required: true, content: { 'application/json': { schema: toJsonSchema(route.schema.body) } } };
  if (!kind.isV1) op.security = [];
  return op;
}
