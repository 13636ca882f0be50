/**
 * Builds the OpenAPI 3.1 document of the public API from the route schemas.
 *
 * The routes and their schemas come from the services' route plugins (routes.ts); /healthz and
 * /readyz are described here. Each becomes an operation (operation.ts, with the prose of
 * operations.ts) under the gateway's parameter names. Everything edge-level (security, error
 * envelope, statuses of docs/api.md "Errors", rate-limit headers: responses.ts) is added here.
 */
import { HealthResponse } from '../../services/facility/src/routes/schemas';
import { DELIVERY_HEADERS, EVENTS, envelopeSchema, RECEIVING_WEBHOOKS, RECORD_SCHEMAS, verificationSamples } from './events';
import { type Json, type JsonObject, ref, sortKeys } from './json';
import { operation } from './operation';
import { ERROR_SCHEMA, errorResponses, HEADERS } from './responses';
import { type CollectedRoute, collectRoutes } from './routes';

export { sortKeys } from './json';
export { type CollectedRoute, collectRoutes } from './routes';

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
  { name: 'Sources', description: 'Freshness: the EPA ECHO files the data comes from, their dates and when each was synced (every tier).' },
  { name: 'Webhooks', description: 'Signed event subscriptions (Pro tier and above).' },
  { name: 'Events', description: 'The event log: the envelopes webhooks carry, for polling (every tier).' },
  { name: 'Receiving webhooks', description: receivingWebhooksDescription() },
  { name: 'Exports', description: 'Bulk export as NDJSON or CSV (Pro tier and above), counted per 1,000 rows.' },
];

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
