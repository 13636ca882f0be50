import type { paths } from '@fcd/client';
import { type ApiStack, startApiStack } from '@fcd/testing';
import { Ajv2020 } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import createClient from 'openapi-fetch';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import document from '../src/openapi/openapi.json';
import { PUBLIC_ROUTES } from '../src/routes/table';

/**
 * The API reference against the implementation, through a running stack
 * (usage + gateway + the real facility and webhook services):
 * - the documented operations are exactly the gateway's route table plus the health checks;
 * - every documented operation answers as documented: status among the documented ones, body valid
 *   against the documented schema, documented headers present;
 * - a client generated from the document (openapi-typescript + openapi-fetch) performs the quick start.
 * /docs in Chromium: docs-ui.int.test.ts.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
const doc = document as unknown as JsonObject;
const docPaths = doc.paths as Record<string, Record<string, JsonObject>>;

const SECRET_KEY = Buffer.alloc(32, 7);
const HOOK_URL = 'https://93.184.215.14/hook';
const UNKNOWN_UUID = '00000000-0000-4000-8000-000000000000';

const documented: string[] = Object.entries(docPaths).flatMap(([path, item]) =>
  Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
);
const tablePath = (p: string) => p.replace(/:([^/]+)/g, '{$1}');

// ---- JSON Schema validation against the document (JSON pointers into it, so $refs resolve) ----
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addSchema(doc, 'openapi.json');
const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function resolveRef(node: Json | undefined): { value: JsonObject; pointer?: string } {
  const ref = node && typeof node === 'object' && !Array.isArray(node) ? node.$ref : undefined;
  if (typeof ref !== 'string') return { value: (node ?? {}) as JsonObject };
  let target: Json = doc;
  for (const part of ref.replace(/^#\//, '').split('/')) target = (target as JsonObject)[part] as Json;
  return { value: target as JsonObject, pointer: ref.replace(/^#/, '') };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: unknown;
}

/** Asserts that the answer is one the document promises for this operation. */
function expectDocumented(operation: string, answer: Answer): void {
  const [method, path] = operation.split(' ') as [string, string];
  const responses = docPaths[path]?.[method.toLowerCase()]?.responses as JsonObject | undefined;
  expect(responses, `${operation} is documented`).toBeDefined();
  const entry = responses?.[String(answer.status)];
  expect(entry, `${operation} answered ${answer.status}, documented: ${Object.keys(responses ?? {})}; body ${answer.text}`).toBeDefined();
  const { value: response, pointer } = resolveRef(entry);
  const base = pointer ?? `/paths/${escapePointer(path)}/${method.toLowerCase()}/responses/${answer.status}`;
  const content = response.content as JsonObject | undefined;
  if (content && !content['application/json']) {
    // A streamed export: NDJSON or CSV, as documented.
    const type = (answer.headers.get('content-type') ?? '').split(';')[0] as string;
    expect(Object.keys(content), `${operation} ${answer.status} content type ${type}`).toContain(type);
  } else if (content) {
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    const validate = ajv.getSchema(`openapi.json#${base}/content/application~1json/schema`);
    expect(validate, `schema of ${operation} ${answer.status}`).toBeDefined();
    const valid = validate?.(answer.body);
    expect(valid, `${operation} ${answer.status}: ${JSON.stringify(validate?.errors)}; body ${answer.text.slice(0, 500)}`).toBe(true);
  } else {
    expect(answer.text, `${operation} ${answer.status} has no documented body`).toBe('');
  }
  for (const header of Object.keys((response.headers ?? {}) as JsonObject)) {
    // A header documented as conditional (required: false, e.g. X-Usage-Stale) may be absent.
    const componentHeaders = (doc.components as { headers?: Record<string, { required?: boolean }> }).headers ?? {};
    if (componentHeaders[header]?.required === false) continue;
    expect(answer.headers.get(header), `${operation} ${answer.status}: header ${header}`).not.toBeNull();
  }
}

// ---- the stack ----
let stack: ApiStack;
let gateway: string;
let proKey: string;
let freeKey: string;
const ids = { facility: '', case: '' };

/** Authorization decisions the usage service has made (every series of fcd_rate_limit_decisions_total). */
async function usageDecisions(): Promise<number> {
  const metricsPort = stack.usage.logs().find((l) => l.msg === 'ready')?.metricsPort as number;
  expect(metricsPort).toBeGreaterThan(0);
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('fcd_rate_limit_decisions_total{') || line.startsWith('fcd_rate_limit_decisions_total '))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

async function call(path: string, init: { method?: string; key?: string; body?: unknown; contentType?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (init.key) headers['x-api-key'] = init.key;
  if (init.body !== undefined) headers['content-type'] = init.contentType ?? 'application/json';
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: text && /^application\/json/.test(res.headers.get('content-type') ?? '') ? (JSON.parse(text) as unknown) : undefined,
  };
}

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_openapi', webhookSecretKey: SECRET_KEY.toString('base64') });
  gateway = stack.gateway;
  const ingest = await stack.ingest({
    facilities: [
      {
        registry_id: '110000000101',
        name: 'OpenAPI Refinery',
        street: '1 Main St',
        city: 'Houston',
        state: 'TX',
        zip: '77001',
        county: 'Harris',
        latitude: 29.76,
        longitude: -95.37,
        naics_codes: ['324110'],
        programs: ['CAA', 'RCRA'],
        compliance_status: 'violation',
        last_inspection_date: '2026-01-15',
      },
      { registry_id: '110000000102', name: 'OpenAPI Mill', state: 'VT', compliance_status: 'no_violation', programs: ['CWA'] },
    ],
    violations: [
      {
        source_id: 'openapi-v1',
        registry_id: '110000000101',
        program: 'CAA',
        violation_type: 'Emissions',
        violation_date: '2026-02-01',
        severity: 'significant',
      },
    ],
    cases: [
      {
        case_number: 'OPENAPI-CASE-1',
        case_type: 'judicial',
        status: 'filed',
        lead_agency: 'EPA',
        filed_date: '2026-03-01',
        registry_ids: ['110000000101'],
      },
    ],
  });
  expect(ingest.status, ingest.text).toBe(200);
  expect(JSON.parse(ingest.text).data.errors, ingest.text).toEqual([]);
  proKey = (await stack.createAccount('pro')).apiKey;
  freeKey = (await stack.createAccount('free')).apiKey;
  const listed = (await call('/v1/facilities?state=TX', { key: proKey })).body as { data: Array<{ id: string }> };
  ids.facility = listed.data[0]?.id ?? '';
  const cases = (await call('/v1/cases', { key: proKey })).body as { data: Array<{ id: string }> };
  ids.case = cases.data[0]?.id ?? '';
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('the OpenAPI document and the route table', () => {
  it('documents exactly the gateway table routes plus the health checks', () => {
    const table = PUBLIC_ROUTES.flatMap((r) => r.methods.map((m) => `${m} ${tablePath(r.path)}`));
    expect([...documented].sort()).toEqual(['GET /healthz', 'GET /readyz', ...table].sort());
    expect(doc.openapi).toBe('3.1.0');
  });

  it('serves the committed document at /openapi.json, unauthenticated and not counted', async () => {
    const { apiKey } = await stack.createAccount('free');
    const served = await call('/openapi.json', { key: apiKey });
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(served.headers.get('x-ratelimit-limit')).toBeNull();
    expect(served.body).toEqual(document);
    const page = await call('/docs', { key: apiKey });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('x-ratelimit-limit')).toBeNull();
    expect(page.text).toContain('<title>Facility Compliance Data API — API reference</title>');
    const usage = (await call('/v1/account/usage', { key: apiKey })).body as { data: { today: { request_count: number } } };
    expect(usage.data.today.request_count).toBe(1);
  });

  it('serves /openapi.json and /docs without an API key: 200, no rate-limit headers, no authorization asked of the usage service', async () => {
    const decisions = await usageDecisions();
    for (const path of ['/openapi.json', '/docs']) {
      const served = await call(path);
      expect(served.status, path).toBe(200);
      for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        expect(served.headers.get(header), `${path} ${header}`).toBeNull();
      }
      if (path === '/openapi.json') expect(served.body).toEqual(document);
    }
    // Not counted: the usage service made no rate-limit decision for them.
    expect(await usageDecisions()).toBe(decisions);
    // The measure works: one metered call is one decision.
    expect((await call('/v1/account/usage', { key: proKey })).status).toBe(200);
    expect(await usageDecisions()).toBe(decisions + 1);
  });
});

describe('every documented operation answers as documented', () => {
  const exercised = new Map<string, Set<number>>();
  const check = (operation: string, answer: Answer, expected: number) => {
    expect(answer.status, `${operation}: ${answer.text.slice(0, 300)}`).toBe(expected);
    expectDocumented(operation, answer);
    const set = exercised.get(operation) ?? new Set<number>();
    set.add(expected);
    exercised.set(operation, set);
  };

  it('health checks: 200 without a key', async () => {
    check('GET /healthz', await call('/healthz'), 200);
    check('GET /readyz', await call('/readyz'), 200);
  });

  it('account and facility data: 200 with a Pro key, 400 for an unknown parameter, 401 without a key, 404 for unknown ids', async () => {
    type Rows = Array<Record<string, unknown>>;
    const list = (body: unknown) => (body as { data: Rows }).data;
    const one = (body: unknown) => (body as { data: Record<string, unknown> }).data;
    // What each read returns from the data ingested in beforeAll (one TX facility with one
    // violation and one case, one VT facility without either).
    const reads: Array<[string, string, (body: unknown) => void]> = [
      ['GET /v1/account/usage', '/v1/account/usage', (b) => expect(one(b)).toMatchObject({ tier: 'pro', daily_limit: 25_000 })],
      [
        'GET /v1/facilities',
        '/v1/facilities?state=tx&program=CAA&compliance_status=violation&q=refinery&limit=5',
        (b) => expect(list(b).map((f) => [f.id, f.name, f.state])).toEqual([[ids.facility, 'OpenAPI Refinery', 'TX']]),
      ],
      [
        'GET /v1/facilities/{facility_id}',
        `/v1/facilities/${ids.facility}`,
        (b) => expect(one(b)).toMatchObject({ id: ids.facility, registry_id: '110000000101', state: 'TX' }),
      ],
      [
        'GET /v1/facilities/{facility_id}/violations',
        `/v1/facilities/${ids.facility}/violations?severity=significant&since=2026-01-01`,
        (b) =>
          expect(list(b).map((v) => [v.facility_id, v.violation_type, v.severity])).toEqual([[ids.facility, 'Emissions', 'significant']]),
      ],
      [
        'GET /v1/facilities/{facility_id}/cases',
        `/v1/facilities/${ids.facility}/cases?status=filed`,
        (b) => expect(list(b).map((c) => [c.case_number, c.status])).toEqual([['OPENAPI-CASE-1', 'filed']]),
      ],
      [
        'GET /v1/violations',
        `/v1/violations?facility_id=${ids.facility}&limit=1`,
        (b) => expect(list(b).map((v) => [v.facility_id, v.violation_type])).toEqual([[ids.facility, 'Emissions']]),
      ],
      [
        'GET /v1/cases',
        `/v1/cases?facility_id=${ids.facility}`,
        (b) => expect(list(b).map((c) => [c.id, c.case_number])).toEqual([[ids.case, 'OPENAPI-CASE-1']]),
      ],
      [
        'GET /v1/cases/{case_id}',
        `/v1/cases/${ids.case}`,
        (b) => expect(one(b)).toMatchObject({ id: ids.case, case_number: 'OPENAPI-CASE-1', facility_ids: [ids.facility] }),
      ],
      // Ingested data, no ECHO sync: no source file (services/gateway/test/sources.int.test.ts syncs one).
      ['GET /v1/sources', '/v1/sources', (b) => expect(list(b)).toEqual([])],
    ];
    for (const [op, url, expectBody] of reads) {
      const ok = await call(url, { key: proKey });
      check(op, ok, 200);
      expectBody(ok.body);
      const [method, path] = op.split(' ') as [string, string];
      if (((docPaths[path]?.[method.toLowerCase()]?.responses ?? {}) as JsonObject)['400']) {
        const sep = url.includes('?') ? '&' : '?';
        check(op, await call(`${url}${sep}unknown_param=1`, { key: proKey }), 400);
      }
      check(op, await call(url), 401);
    }
    // `state` is case-insensitive: tx and TX return the same (non-empty) page, every facility in TX.
    const upper = await call('/v1/facilities?state=TX', { key: proKey });
    const lower = await call('/v1/facilities?state=tx', { key: proKey });
    check('GET /v1/facilities', upper, 200);
    check('GET /v1/facilities', lower, 200);
    expect(list(upper.body).map((f) => [f.id, f.state])).toEqual([[ids.facility, 'TX']]);
    expect(lower.body).toEqual(upper.body);
    check('GET /v1/facilities/{facility_id}', await call(`/v1/facilities/${UNKNOWN_UUID}`, { key: proKey }), 404);
    check('GET /v1/facilities/{facility_id}/violations', await call(`/v1/facilities/${UNKNOWN_UUID}/violations`, { key: proKey }), 404);
    check('GET /v1/facilities/{facility_id}/cases', await call(`/v1/facilities/${UNKNOWN_UUID}/cases`, { key: proKey }), 404);
    check('GET /v1/cases/{case_id}', await call(`/v1/cases/${UNKNOWN_UUID}`, { key: proKey }), 404);
  });

  it('webhooks: the full lifecycle with a Pro key, and 400/401/403/404/409/413/415', async () => {
    const created = await call('/v1/webhooks', {
      method: 'POST',
      key: proKey,
      body: { url: HOOK_URL, events: ['violation.new'], facility_ids: [ids.facility] },
    });
    check('POST /v1/webhooks', created, 201);
    const id = (created.body as { data: { id: string } }).data.id;
    const hook = `/v1/webhooks/${id}`;
    check('GET /v1/webhooks', await call('/v1/webhooks?limit=10', { key: proKey }), 200);
    check('GET /v1/webhooks/{webhook_id}', await call(hook, { key: proKey }), 200);
    const test = await call(`${hook}/test`, { method: 'POST', key: proKey });
    check('POST /v1/webhooks/{webhook_id}/test', test, 202);
    const deliveryId = (test.body as { data: { id: string } }).data.id;
    const retry = 'POST /v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry';
    check(retry, await call(`${hook}/deliveries/${deliveryId}/retry`, { method: 'POST', key: proKey }), 202);
    check(retry, await call(`${hook}/deliveries/dlv_${UNKNOWN_UUID}/retry`, { method: 'POST', key: proKey }), 404);
    check('GET /v1/webhooks/{webhook_id}/deliveries', await call(`${hook}/deliveries?limit=5`, { key: proKey }), 200);
    check('GET /v1/webhooks/{webhook_id}/deliveries', await call(`${hook}/deliveries?limit=500`, { key: proKey }), 400);
    check('POST /v1/webhooks/{webhook_id}/rotate-secret', await call(`${hook}/rotate-secret`, { method: 'POST', key: proKey }), 200);
    const recover = 'POST /v1/webhooks/{webhook_id}/recover';
    const since = new Date(Date.now() - 3_600_000).toISOString();
    check(recover, await call(`${hook}/recover`, { method: 'POST', key: proKey, body: { since, dry_run: true } }), 202);
    check(recover, await call(`${hook}/recover`, { method: 'POST', key: proKey, body: { since: '2000-01-01T00:00:00Z' } }), 400);
    check(recover, await call(`${hook}/recover`, { method: 'POST', key: proKey, body: { since }, contentType: 'text/plain' }), 415);
    check('PATCH /v1/webhooks/{webhook_id}', await call(hook, { method: 'PATCH', key: proKey, body: {} }), 400);
    check(
      'PATCH /v1/webhooks/{webhook_id}',
      await call(hook, { method: 'PATCH', key: proKey, body: { is_active: false, facility_ids: null } }),
      200,
    );
    check('POST /v1/webhooks/{webhook_id}/test', await call(`${hook}/test`, { method: 'POST', key: proKey }), 400);
    check(retry, await call(`${hook}/deliveries/${deliveryId}/retry`, { method: 'POST', key: proKey }), 400);
    check('DELETE /v1/webhooks/{webhook_id}', await call(hook, { method: 'DELETE', key: proKey }), 204);

    const byId: Array<[string, string, string, unknown]> = [
      ['GET', 'GET /v1/webhooks/{webhook_id}', hook, undefined],
      ['PATCH', 'PATCH /v1/webhooks/{webhook_id}', hook, { is_active: true }],
      ['DELETE', 'DELETE /v1/webhooks/{webhook_id}', hook, undefined],
      ['GET', 'GET /v1/webhooks/{webhook_id}/deliveries', `${hook}/deliveries`, undefined],
      ['POST', retry, `${hook}/deliveries/${deliveryId}/retry`, undefined],
      ['POST', 'POST /v1/webhooks/{webhook_id}/test', `${hook}/test`, undefined],
      ['POST', 'POST /v1/webhooks/{webhook_id}/rotate-secret', `${hook}/rotate-secret`, undefined],
      ['POST', 'POST /v1/webhooks/{webhook_id}/recover', `${hook}/recover`, { since: new Date().toISOString() }],
    ];
    for (const [method, op, url, body] of byId) {
      check(op, await call(url, { method, key: proKey, body }), 404);
      check(op, await call(url, { method, key: freeKey, body }), 403);
      check(op, await call(url, { method, body }), 401);
    }
    check('POST /v1/webhooks', await call('/v1/webhooks', { method: 'POST', key: proKey, body: { url: 'http://x', events: [] } }), 400);
    check(
      'POST /v1/webhooks',
      await call('/v1/webhooks', { method: 'POST', key: freeKey, body: { url: HOOK_URL, events: ['case.new'] } }),
      403,
    );
    check('POST /v1/webhooks', await call('/v1/webhooks', { method: 'POST', body: { url: HOOK_URL, events: ['case.new'] } }), 401);
    check(
      'POST /v1/webhooks',
      await call('/v1/webhooks', { method: 'POST', key: proKey, body: { url: HOOK_URL, events: ['case.new'] }, contentType: 'text/plain' }),
      415,
    );
    check(
      'PATCH /v1/webhooks/{webhook_id}',
      await call(hook, { method: 'PATCH', key: proKey, body: { is_active: true }, contentType: 'text/plain' }),
      415,
    );
    const big = { url: HOOK_URL, events: ['case.new'], pad: 'x'.repeat(70_000) };
    check('POST /v1/webhooks', await call('/v1/webhooks', { method: 'POST', key: proKey, body: big }), 413);
    check('PATCH /v1/webhooks/{webhook_id}', await call(hook, { method: 'PATCH', key: proKey, body: big }), 413);
    check('GET /v1/webhooks', await call('/v1/webhooks?limit=0', { key: proKey }), 400);
    check('GET /v1/webhooks', await call('/v1/webhooks', { key: freeKey }), 403);
    check('GET /v1/webhooks', await call('/v1/webhooks'), 401);
    // 409 LIMIT_REACHED: a fresh Pro account with 25 subscriptions.
    const { apiKey } = await stack.createAccount('pro');
    for (let i = 0; i < 25; i++) {
      const r = await call('/v1/webhooks', { method: 'POST', key: apiKey, body: { url: `${HOOK_URL}/${i}`, events: ['case.new'] } });
      expect(r.status).toBe(201);
    }
    check(
      'POST /v1/webhooks',
      await call('/v1/webhooks', { method: 'POST', key: apiKey, body: { url: HOOK_URL, events: ['case.new'] } }),
      409,
    );
  });

  it('events: the list and one event, for every tier, and 400/401/404', async () => {
    // One event in the log, as the dispatcher writes it (no dispatcher runs in this stack).
    const id = `evt_${UNKNOWN_UUID.replace(/^0/, '1')}`;
    const envelope = {
      id,
      type: 'violation.new',
      created_at: '2026-11-22T08:15:30.123Z',
      data: { violation: { id: UNKNOWN_UUID, facility_id: ids.facility } },
    };
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      await client.query(
        `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at) VALUES ($1, $2, $3, ARRAY[$4::uuid], $5, now())`,
        [id, envelope.type, envelope.created_at, ids.facility, JSON.stringify(envelope)],
      );
    } finally {
      await client.end();
    }
    const list = await call(`/v1/events?type=violation.new&facility_id=${ids.facility}&since=2026-01-01T00:00:00Z&limit=5`, {
      key: freeKey,
    });
    check('GET /v1/events', list, 200);
    expect((list.body as { data: unknown[] }).data).toEqual([envelope]);
    check('GET /v1/events', await call('/v1/events', { key: proKey }), 200);
    check('GET /v1/events', await call('/v1/events?type=nope', { key: proKey }), 400);
    check('GET /v1/events', await call('/v1/events'), 401);
    const one = await call(`/v1/events/${id}`, { key: freeKey });
    check('GET /v1/events/{event_id}', one, 200);
    expect(one.body).toEqual({ data: envelope });
    check('GET /v1/events/{event_id}', await call(`/v1/events/evt_${UNKNOWN_UUID}`, { key: proKey }), 404);
    check('GET /v1/events/{event_id}', await call(`/v1/events/${id}?x=1`, { key: proKey }), 400);
    check('GET /v1/events/{event_id}', await call(`/v1/events/${id}`), 401);
  });

  it('429 RATE_LIMIT_EXCEEDED for a Free account over its limit answers as documented', async () => {
    const { apiKey } = await stack.createAccount('free');
    const answers = await Promise.all(Array.from({ length: 101 }, () => call('/v1/account/usage', { key: apiKey })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(100);
    const refused = answers.find((a) => a.status === 429) as Answer;
    check('GET /v1/account/usage', refused, 429);
    check('GET /v1/facilities', await call('/v1/facilities', { key: apiKey }), 429);
  });

  it('exports: NDJSON and CSV with a Pro key, 403 for Free, 400 for a bad filter', async () => {
    // From the data ingested in beforeAll: two facilities, one violation, one case.
    for (const [kind, rows] of [
      ['facilities', 2],
      ['violations', 1],
      ['cases', 1],
    ] as const) {
      const op = `GET /v1/exports/${kind}`;
      const ndjson = await call(`/v1/exports/${kind}`, { key: proKey });
      check(op, ndjson, 200);
      expect(JSON.parse(ndjson.text.trimEnd().split('\n').pop() as string)).toEqual({ export: { complete: true, rows, after: null } });
      check(op, await call(`/v1/exports/${kind}?nope=1`, { key: proKey }), 400);
      check(op, await call(`/v1/exports/${kind}`, { key: freeKey }), 403);
      check(op, await call(`/v1/exports/${kind}`), 401);
    }
  });

  it("the account's own API keys: 200/201/204 with a Pro key, 400, 401 without a key, 404 for unknown ids", async () => {
    const keys = '/v1/account/keys';
    const created = await call(keys, { method: 'POST', key: proKey, body: { name: 'openapi' } });
    check('POST /v1/account/keys', created, 201);
    const id = (created.body as { data: { id: string } }).data.id;
    check('GET /v1/account/keys', await call(keys, { key: proKey }), 200);
    check('PATCH /v1/account/keys/{key_id}', await call(`${keys}/${id}`, { method: 'PATCH', key: proKey, body: { name: 'renamed' } }), 200);
    const rolled = await call(`${keys}/${id}/roll`, { method: 'POST', key: proKey, body: { expires_in_seconds: 0 } });
    check('POST /v1/account/keys/{key_id}/roll', rolled, 201);
    const successor = (rolled.body as { data: { id: string } }).data.id;
    check('DELETE /v1/account/keys/{key_id}', await call(`${keys}/${successor}`, { method: 'DELETE', key: proKey }), 204);
    check('POST /v1/account/keys', await call(keys, { method: 'POST', key: proKey, body: { name: '' } }), 400);
    check('POST /v1/account/keys/{key_id}/roll', await call(`${keys}/${id}/roll`, { method: 'POST', key: proKey, body: {} }), 400);
    const unknown = `${keys}/key_${UNKNOWN_UUID}`;
    check('PATCH /v1/account/keys/{key_id}', await call(unknown, { method: 'PATCH', key: proKey, body: { name: 'x' } }), 404);
    check('DELETE /v1/account/keys/{key_id}', await call(unknown, { method: 'DELETE', key: proKey }), 404);
    check(
      'POST /v1/account/keys/{key_id}/roll',
      await call(`${unknown}/roll`, { method: 'POST', key: proKey, body: { expires_in_seconds: 0 } }),
      404,
    );
    check('GET /v1/account/keys', await call(keys), 401);
  });

  it("the account's history and statements: 200 with a Pro key, 400 for a bad range or cursor, 401 without a key", async () => {
    // The keys test above ran first (vitest runs a file's tests in order): its changes are in the audit log.
    const audit = await call('/v1/account/audit-log?limit=2', { key: proKey });
    check('GET /v1/account/audit-log', audit, 200);
    expect((audit.body as { data: Array<{ action: string }> }).data.map((e) => e.action)).toEqual(['key.revoked', 'key.rolled']);
    check('GET /v1/account/audit-log', await call('/v1/account/audit-log?cursor=not-a-cursor', { key: proKey }), 400);
    check('GET /v1/account/audit-log', await call('/v1/account/audit-log'), 401);
    const daily = await call('/v1/account/usage/daily', { key: proKey });
    check('GET /v1/account/usage/daily', daily, 200);
    expect((daily.body as { data: { days: unknown[] } }).data.days).toHaveLength(30);
    check('GET /v1/account/usage/daily', await call('/v1/account/usage/daily?from=2026-02-30', { key: proKey }), 400);
    check('GET /v1/account/usage/daily', await call('/v1/account/usage/daily'), 401);
    // No month of this account is closed: the list is empty.
    const statements = await call('/v1/account/statements', { key: proKey });
    check('GET /v1/account/statements', statements, 200);
    expect((statements.body as { data: unknown[] }).data).toEqual([]);
    check('GET /v1/account/statements', await call('/v1/account/statements'), 401);
  });

  it('exercised every documented operation at least with its success status', () => {
    for (const op of documented) {
      const [method, path] = op.split(' ') as [string, string];
      const success = Object.keys(docPaths[path]?.[method.toLowerCase()]?.responses ?? {}).filter((s) => s.startsWith('2'));
      expect(success.length, op).toBeGreaterThan(0);
      for (const s of success) expect(exercised.get(op)?.has(Number(s)), `${op} ${s}`).toBe(true);
    }
  });
});

describe('a client generated from the document (openapi-typescript + openapi-fetch)', () => {
  it("performs the quick start's calls", async () => {
    const client = createClient<paths>({ baseUrl: gateway, headers: { 'X-API-Key': proKey } });

    const usage = await client.GET('/v1/account/usage');
    expect(usage.response.status).toBe(200);
    const tier: string | undefined = usage.data?.data.tier;
    expect(tier).toBe('pro');
    expect(usage.data?.data.daily_limit).toBe(25_000);

    const facilities = await client.GET('/v1/facilities', { params: { query: { state: 'TX', limit: 5 } } });
    expect(facilities.response.status).toBe(200);
    expect(facilities.data?.data.map((f) => f.state)).toEqual(['TX']);
    expect(facilities.data?.pagination).toEqual({ limit: 5, next_cursor: null, has_more: false });

    const created = await client.POST('/v1/webhooks', { body: { url: HOOK_URL, events: ['violation.new', 'case.new'] } });
    expect(created.response.status).toBe(201);
    expect(created.data?.data).toMatchObject({ url: HOOK_URL, events: ['violation.new', 'case.new'], facility_ids: null, is_active: true });
    expect(created.data?.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const refused = await createClient<paths>({ baseUrl: gateway }).GET('/v1/account/usage');
    expect(refused.response.status).toBe(401);
    expect(refused.error?.error.code).toBe('UNAUTHORIZED');
  });
});
