import { randomBytes } from 'node:crypto';
import { ERROR_STATUS } from '@fcd/service-kit';
import { type ApiStack, startApiStack, type TestAccount } from '@fcd/testing';
import fc from 'fast-check';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_METHODS, PUBLIC_ROUTES } from '../src/routes/table';

/**
 * Property-based test of the whole public API through the real gateway, usage,
 * facility and webhook services: arbitrary query strings, path segments,
 * headers and JSON bodies (the shapes that once gave 500 among them) on every
 * route of the gateway's route table and every method. Every answer is a 2xx
 * or a documented 4xx envelope with an X-Request-Id; never a 5xx; no process
 * dies.
 */

const RUNS = 1000;
/** Answers by status: the runs must reach the routes, not stop at authentication. */
const seen = new Map<number, number>();
const CLIENT_STATUSES = new Set<number>(Object.values(ERROR_STATUS).filter((s) => s < 500));

let stack: ApiStack;
let pool: Pool;
let pro: TestAccount;
let free: TestAccount;
/** Subscriptions of the Pro account (those the fuzzer creates join them), so paths hit real ids too. */
const webhookIds: string[] = [];
let listCursor: string;

beforeAll(async () => {
  stack = await startApiStack({
    label: 'fuzz',
    webhookSecretKey: randomBytes(32).toString('base64'),
    // No DNS: subscriptions to IP literals only, so bodies the fuzzer makes valid are created.
    // A low quota, so LIMIT_REACHED is among the answers too.
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_MAX_SUBSCRIPTIONS: '5' },
    gatewayEnv: { AUTH_DEADLINE_MS: '10000' },
  });
  [pro, free] = await Promise.all([stack.createAccount('pro'), stack.createAccount('free')]);
  pool = new Pool(stack.gateway, { connections: 16, pipelining: 1 });
  const created = [];
  for (let i = 0; i < 2; i++) {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/webhooks',
      headers: { 'x-api-key': pro.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `https://127.0.0.1/hook/${i}`, events: ['case.new'] }),
    });
    created.push(((await res.body.json()) as { data: { id: string } }).data.id);
  }
  webhookIds.push(...created);
  const list = await pool.request({ method: 'GET', path: '/v1/webhooks?limit=1', headers: { 'x-api-key': pro.apiKey } });
  listCursor = ((await list.body.json()) as { pagination: { next_cursor: string } }).pagination.next_cursor;
}, 90_000);

afterAll(async () => {
  await pool?.close();
  await stack?.stop();
});

// ---- generators ----

const NUMBER_SHAPES = ['Infinity', '-Infinity', '1e400', '0x10', '1.5', '1e1', '-1', '0', '101', ' 5', '+5', 'NaN', '99999999999999999999'];
const DATE_SHAPES = ['0000-01-01', '0001-01-01', '9999-12-31', '2026-02-30', '-0001-01-01', '+10000-01-01', '2026-1-1'];
const QUERY_NAMES = [
  'limit',
  'cursor',
  'since',
  'state',
  'program',
  'severity',
  'compliance_status',
  'status',
  'case_type',
  'facility_id',
  'q',
];

const text = fc.string({ maxLength: 40 });
const anyText = fc.oneof(text, fc.string({ unit: 'grapheme', maxLength: 20 }), fc.string({ unit: 'binary', maxLength: 20 }));
const cursorText = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null').toString('base64url')),
  fc.constant('cursor'),
  fc.base64String({ maxLength: 60 }),
  // A real cursor of the Pro account's subscription list (foreign to every other list and account).
  fc.constant(null).map(() => listCursor),
);
const queryValue = fc.oneof(
  fc.constantFrom(...NUMBER_SHAPES, ...DATE_SHAPES, 'TX', 'tx', 'CAA', 'significant', 'violation', 'settled'),
  fc.uuid(),
  cursorText,
  anyText,
);
/** Unencoded, as a careless client would send it (only what a request line can carry). */
const printable = (t: string) => t.replace(/[^\x21-\x7e]|#/g, '');
const queryString = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom(...QUERY_NAMES), text), queryValue, fc.boolean()), { maxLength: 5 })
  .map((pairs) =>
    pairs.map(([k, v, raw]) => (raw ? `${printable(k)}=${printable(v)}` : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&'),
  );

const segment = fc.oneof(
  fc.uuid(),
  fc.uuid().map((u) => `wh_${u}`),
  fc.uuid().map((u) => `dlv_${u}`),
  anyText.map(encodeURIComponent),
  fc.constantFrom('', '.', '..', '%zz', '%E0%A4%A', '%00', 'x'.repeat(2049), '%2F', 'null'),
);

const headerValue = fc.string({ unit: fc.constantFrom(...' !"#$%&\'()*+,-./0123456789:;<=>?@ABCXYZ[\\]^_`abcxyz{|}~'), maxLength: 40 });
const headerName = fc.stringMatching(/^x-[a-z0-9-]{1,20}$/);

const validCreate = fc
  .record({
    url: fc.nat({ max: 999 }).map((n) => `https://127.0.0.1/hook/${n}`),
    events: fc.subarray(['case.new', 'case.updated', 'violation.new', 'facility.status_changed'], { minLength: 1 }),
  })
  .map((o) => JSON.stringify(o));

const jsonBody = fc.oneof(
  { weight: 3, arbitrary: validCreate },
  fc.json({ maxDepth: 4 }),
  fc.object({ maxDepth: 3 }).map((o) => JSON.stringify(o)),
  fc
    .record(
      {
        url: fc.oneof(fc.constantFrom('https://127.0.0.1/x', 'http://127.0.0.1/x', 'https://user:pw@127.0.0.1/', 'ftp://x'), anyText),
        events: fc.oneof(
          fc.array(fc.constantFrom('case.new', 'case.updated', 'violation.new', 'facility.status_changed', 'x')),
          fc.jsonValue(),
        ),
        facility_ids: fc.oneof(fc.constant(null), fc.array(fc.oneof(fc.uuid(), text), { maxLength: 3 }), fc.jsonValue()),
        is_active: fc.oneof(fc.boolean(), fc.jsonValue()),
        overlap_seconds: fc.oneof(fc.integer(), fc.double(), fc.jsonValue()),
      },
      { requiredKeys: [] },
    )
    .map((o) => JSON.stringify(o)),
  fc.integer({ min: 1, max: 6000 }).map((depth) => `{"url":${'['.repeat(depth)}${']'.repeat(depth)}}`),
  fc.integer({ min: 1, max: 6000 }).map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`),
  fc.constant(`{"a":"${'x'.repeat(70_000)}"}`),
  fc.constantFrom('{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}', '{', '', 'null', '[]', '"x"', '1e400', '{"limit":1e400}'),
  anyText,
);

const apiKey = fc.oneof(
  { weight: 6, arbitrary: fc.constant('pro') },
  { weight: 1, arbitrary: fc.constant('free') },
  { weight: 1, arbitrary: fc.constantFrom('', 'fcd_0123456789abcdefghijklmnopqrstuv', 'nope') },
);

interface Request {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

function requests(pathTemplate: fc.Arbitrary<string>, method: fc.Arbitrary<string>): fc.Arbitrary<Request> {
  return fc
    .record({
      method,
      path: pathTemplate,
      query: fc.option(queryString, { nil: undefined }),
      key: apiKey,
      requestId: fc.option(headerValue, { nil: undefined }),
      contentType: fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        'application/x-www-form-urlencoded',
        undefined,
      ),
      extra: fc.array(fc.tuple(headerName, headerValue), { maxLength: 3 }),
      body: fc.option(jsonBody, { nil: undefined }),
    })
    .map((r) => {
      const headers: Record<string, string> = Object.fromEntries(r.extra);
      const key = r.key === 'pro' ? pro.apiKey : r.key === 'free' ? free.apiKey : r.key;
      if (key !== '') headers['x-api-key'] = key;
      if (r.requestId !== undefined) headers['x-request-id'] = r.requestId;
      const withBody = r.body !== undefined && !['GET', 'HEAD'].includes(r.method);
      if (withBody && r.contentType) headers['content-type'] = r.contentType;
      return {
        method: r.method,
        path: r.query === undefined ? r.path : `${r.path}?${r.query}`,
        headers,
        body: withBody ? r.body : undefined,
      };
    });
}

/** A route's path with each parameter drawn from real ids, random ids and arbitrary segments. */
function paths(template: string): fc.Arbitrary<string> {
  const params = template.split('/').filter((s) => s.startsWith(':'));
  const real = (name: string) => (name === ':webhook_id' ? fc.nat().map((i) => webhookIds[i % webhookIds.length] as string) : fc.uuid());
  return fc
    .tuple(...params.map((p) => fc.oneof({ weight: 2, arbitrary: real(p) }, { weight: 3, arbitrary: segment })))
    .map((values) => params.reduce((path, p, i) => path.replace(p, values[i] as string), template));
}

async function send(request: Request) {
  const res = await pool.request({
    method: request.method as 'GET',
    path: request.path,
    headers: request.headers,
    body: request.body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

/** The property: a 2xx or a documented 4xx envelope, always with an X-Request-Id. */
async function answersWell(request: Request): Promise<void> {
  const res = await send(request);
  seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
  if (res.status === 201) webhookIds.push(JSON.parse(res.text).data.id);
  const context = `${request.method} ${request.path.slice(0, 200)} → ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, context).toBeLessThan(500);
  expect(res.headers['x-request-id'], context).toEqual(expect.any(String));
  if (request.method === 'HEAD' || res.status === 204) return;
  const type = String(res.headers['content-type'] ?? '');
  if (res.status === 200 && /^(application\/x-ndjson|text\/csv)/.test(type)) {
    // A bulk export (docs/api.md, "Bulk export"): NDJSON rows then a last line saying whether it is complete; or CSV.
    if (type.startsWith('text/csv')) return;
    const last = JSON.parse(res.text.trimEnd().split('\n').at(-1) as string);
    expect(last, context).toHaveProperty('export');
    return;
  }
  const body = JSON.parse(res.text);
  if (res.status >= 400) {
    expect(CLIENT_STATUSES.has(res.status), context).toBe(true);
    expect(Object.keys(body), context).toEqual(['error']);
    expect(ERROR_STATUS[body.error.code as keyof typeof ERROR_STATUS], context).toBe(res.status);
    expect(body.error.message, context).toEqual(expect.any(String));
  } else {
    expect(res.status, context).toBeGreaterThanOrEqual(200);
    expect(body, context).toHaveProperty('data');
  }
}

const cases = PUBLIC_ROUTES.flatMap((route) => route.methods.map((method) => ({ route: route.path, method })));

describe('fuzzing the public API through the gateway', () => {
  it(`answers ${RUNS} arbitrary requests per route and method, and others, with 2xx or a 4xx envelope`, async () => {
    const properties = [
      ...cases.map(({ route, method }) => ({ name: `${method} ${route}`, arb: requests(paths(route), fc.constant(method)) })),
      // Every other method on every route (405, and 403 for Free callers on webhook paths).
      {
        name: 'other methods',
        arb: fc
          .constantFrom(...PUBLIC_ROUTES)
          .chain((route) =>
            requests(paths(route.path), fc.constantFrom(...ALL_METHODS.filter((m) => !route.methods.includes(m as never)))),
          ),
      },
      // Unknown paths, under /v1 and /v1/webhooks and outside.
      {
        name: 'unknown paths',
        arb: requests(
          fc
            .tuple(fc.constantFrom('/v1', '/v1/webhooks', `/v1/webhooks/${'x'}`, '', '/v2'), fc.array(segment, { maxLength: 4 }))
            .map(([prefix, segs]) => `${prefix}/${segs.join('/')}`),
          fc.constantFrom(...ALL_METHODS),
        ),
      },
    ];
    const failures: string[] = [];
    await Promise.all(
      properties.map(async ({ name, arb }) => {
        const result = await fc.check(fc.asyncProperty(arb, answersWell), { numRuns: RUNS });
        if (result.failed) failures.push(`${name}: ${fc.defaultReportMessage(result)}\n${String(result.errorInstance).slice(0, 600)}`);
      }),
    );
    expect(failures).toEqual([]);
    expect([...seen.keys()], JSON.stringify([...seen])).toEqual(expect.arrayContaining([200, 201, 400, 401, 403, 404, 405, 413, 415, 429]));

    for (const service of [stack.usage, stack.facility, stack.webhook, ...stack.gateways]) {
      expect({ service: service.name, exitCode: service.proc.exitCode }).toEqual({ service: service.name, exitCode: null });
    }
    const health = await send({ method: 'GET', path: '/healthz', headers: {} });
    expect(health.status).toBe(200);
  }, 300_000);
});
