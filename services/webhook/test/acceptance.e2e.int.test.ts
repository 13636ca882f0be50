import { randomUUID } from 'node:crypto';
import { ERROR_STATUS } from '@fcd/service-kit';
import { type ApiStack, hostsPreloadEnv, type ServiceProcess, startApiStack, type TestAccount } from '@fcd/testing';
import { EVENT_TYPES } from '@fcd/webhooks';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_KEY, SUBSCRIPTION_KEYS } from './helpers';

/**
 * The subscription API of docs/webhooks.md ("API"), end to end through the gateway against real services:
 * usage (keys, tiers, metering), gateway (authentication, routing), the real
 * facility service (facility existence) and the webhook service, each its own
 * process, on one database. The webhook service runs with the production
 * default (no WEBHOOK_ALLOW_PRIVATE_URLS); host names resolve through node:dns
 * `lookup` in its process, answered by the test hosts preload.
 */

const HOSTS = {
  /** Public; never contacted when a subscription is created (only resolved). */
  'hooks.example.test': '93.184.216.34',
  'internal.example.test': '10.1.2.3',
  'rebind.example.test': '127.0.0.1',
};
const HOOK_URL = 'https://hooks.example.test/fcd';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const WH_ID = new RegExp(`^wh_${UUID}$`);
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let webhook: ServiceProcess;
let stack: ApiStack;
let gateway: string;
/** Facilities that exist in the real facility service (ids as it lists them). */
let F1: string;
let F2: string;
const UNKNOWN_F = randomUUID();

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/**
 * One request through the gateway. Every answer to an authenticated request
 * carries the X-RateLimit-* headers (docs/api.md "Authentication and limits"), so each one is checked here.
 */
async function call(path: string, key: string, init: { method?: string; body?: unknown; raw?: string } = {}): Promise<Answer> {
  const payload = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
    body: payload,
  });
  const text = await res.text();
  expect(res.headers.get('x-ratelimit-limit'), `${init.method ?? 'GET'} ${path}`).toMatch(/^\d+$/);
  expect(res.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
  expect(res.headers.get('x-ratelimit-reset')).toMatch(ISO_MS);
  return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
}

const create = (key: string, body: unknown) => call('/v1/webhooks', key, { method: 'POST', body });
const patch = (key: string, id: string, body: unknown) => call(`/v1/webhooks/${id}`, key, { method: 'PATCH', body });

async function count(key: string): Promise<number> {
  const res = await call('/v1/webhooks?limit=100', key);
  expect(res.status, res.text).toBe(200);
  return res.body.data.length;
}

async function createOk(key: string, body: Record<string, unknown> = { url: HOOK_URL, events: ['case.new'] }) {
  const res = await create(key, body);
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; secret: string; [k: string]: unknown };
}

function expectValidationError(res: Answer, fields: Array<[string, string | RegExp]>): void {
  expect(res.status, res.text).toBe(400);
  expect(Object.keys(res.body)).toEqual(['error']);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(typeof res.body.error.message).toBe('string');
  const got = res.body.error.details.fields as Array<{ field: string; message: string }>;
  expect(got.map((f) => f.field)).toEqual(fields.map(([field]) => field));
  fields.forEach(([, message], i) => {
    if (typeof message === 'string') expect(got[i]?.message).toBe(message);
    else expect(got[i]?.message).toMatch(message);
  });
}

const nextUtcMidnight = (ms: number) => {
  const d = new Date(ms);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)).toISOString();
};

let pro: TestAccount;
let pro2: TestAccount;
let free: TestAccount;

beforeAll(async () => {
  // Production default for the webhook service: WEBHOOK_ALLOW_PRIVATE_URLS unset.
  stack = await startApiStack({
    label: 'webhook_acceptance_e2e',
    webhookSecretKey: SECRET_KEY.toString('base64'),
    webhookEnv: hostsPreloadEnv(HOSTS),
  });
  webhook = stack.webhook;
  gateway = stack.gateway;

  const ingest = await stack.ingest({
    facilities: [
      { registry_id: '110000000101', name: 'Acceptance Plant One', state: 'VT', compliance_status: 'no_violation', programs: ['CAA'] },
      { registry_id: '110000000102', name: 'Acceptance Plant Two', state: 'VT', compliance_status: 'violation', programs: ['CWA'] },
    ],
  });
  expect(ingest.status, ingest.text).toBe(200);

  [pro, pro2, free] = await Promise.all([stack.createAccount('pro'), stack.createAccount('pro'), stack.createAccount('free')]);
  const listed = await call('/v1/facilities?state=VT', pro.apiKey);
  expect(listed.status, listed.text).toBe(200);
  const ids = (listed.body.data as Array<{ id: string; name: string }>).sort((a, b) => a.name.localeCompare(b.name)).map((f) => f.id);
  expect(ids).toHaveLength(2);
  [F1, F2] = ids as [string, string];
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('the stack under test', () => {
  it('runs the webhook service with private destinations refused (no WEBHOOK_ALLOW_PRIVATE_URLS warning)', () => {
    expect(webhook.logs().some((l) => String(l.msg).includes('WEBHOOK_ALLOW_PRIVATE_URLS'))).toBe(false);
  });
});

describe('create, read, list, update; the secret once; facility_ids null', () => {
  it('creates → 201 with every published field in the right format; GET, list and PATCH show only the redacted secret', async () => {
    const before = Date.now();
    const created = await create(pro.apiKey, { url: HOOK_URL, events: ['violation.new', 'case.updated'], facility_ids: [F1, F2] });
    const after = Date.now();
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(created.body)).toEqual(['data']);
    const sub = created.body.data;
    expect(Object.keys(sub).sort()).toEqual(SUBSCRIPTION_KEYS);
    expect(sub.id).toMatch(WH_ID);
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(sub).toEqual({
      id: sub.id,
      url: HOOK_URL,
      events: ['violation.new', 'case.updated'],
      facility_ids: [F1, F2],
      filter: null,
      secret: sub.secret,
      secret_rotation_ends_at: null,
      is_active: true,
      created_at: sub.created_at,
      updated_at: sub.created_at,
      deactivated_at: null,
      deactivation_reason: null,
      rate_limit_per_second: null,
      max_in_flight: 16,
    });
    expect(sub.created_at).toMatch(ISO_MS);
    expect(Date.parse(sub.created_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(sub.created_at)).toBeLessThanOrEqual(after + 1000);

    const redacted = `whsec_********${sub.secret.slice(-4)}`;
    const read = await call(`/v1/webhooks/${sub.id}`, pro.apiKey);
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ data: { ...sub, secret: redacted } });

    const list = await call('/v1/webhooks', pro.apiKey);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      data: [{ ...sub, secret: redacted }],
      pagination: { limit: 25, next_cursor: null, has_more: false },
    });

    const patched = await patch(pro.apiKey, sub.id, { events: ['case.new'] });
    expect(patched.status, patched.text).toBe(200);
    expect(Object.keys(patched.body.data).sort()).toEqual(SUBSCRIPTION_KEYS);
    expect(patched.body.data).toMatchObject({ id: sub.id, events: ['case.new'], secret: redacted, created_at: sub.created_at });
    expect(patched.body.data.updated_at).toMatch(ISO_MS);
    for (const res of [read, list, patched]) expect(res.text).not.toContain(sub.secret.slice(6));

    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
  });

  it('puts X-RateLimit-* on every answer: the Pro limit, one less remaining per request, the next UTC midnight', async () => {
    const account = await stack.createAccount('pro');
    const answers = [
      await create(account.apiKey, { url: HOOK_URL, events: ['case.new'] }),
      await call('/v1/webhooks', account.apiKey),
      await create(account.apiKey, { url: 'http://hooks.example.test/', events: ['case.new'] }),
      await call(`/v1/webhooks/wh_${randomUUID()}`, account.apiKey),
    ];
    expect(answers.map((a) => a.status)).toEqual([201, 200, 400, 404]);
    expect(answers.map((a) => a.headers.get('x-ratelimit-limit'))).toEqual(['25000', '25000', '25000', '25000']);
    expect(answers.map((a) => a.headers.get('x-ratelimit-remaining'))).toEqual(['24999', '24998', '24997', '24996']);
    for (const a of answers) expect(a.headers.get('x-ratelimit-reset')).toBe(nextUtcMidnight(Date.now()));
  });

  it('with facility_ids omitted (or null) shows facility_ids: null in the create answer and in GET', async () => {
    for (const body of [
      { url: HOOK_URL, events: ['violation.new'] },
      { url: HOOK_URL, events: ['violation.new'], facility_ids: null },
    ]) {
      const created = await create(pro.apiKey, body);
      expect(created.status, created.text).toBe(201);
      expect(Object.keys(created.body.data).sort()).toEqual(SUBSCRIPTION_KEYS);
      expect(created.body.data.facility_ids).toBeNull();
      const read = await call(`/v1/webhooks/${created.body.data.id}`, pro.apiKey);
      expect(read.body.data.facility_ids).toBeNull();
      expect((await call(`/v1/webhooks/${created.body.data.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
    }
  });
});

describe('validation, nothing written', () => {
  let validator: TestAccount;
  let existing: Record<string, unknown>;

  beforeAll(async () => {
    validator = await stack.createAccount('pro');
    const created = await createOk(validator.apiKey, { url: HOOK_URL, events: ['case.new'], facility_ids: [F1] });
    existing = (await call(`/v1/webhooks/${created.id}`, validator.apiKey)).body.data;
  });

  const base = { url: HOOK_URL, events: ['violation.new'] };
  const long = `${HOOK_URL}/${'a'.repeat(2049 - `${HOOK_URL}/`.length)}`;
  // Facility ids come from the facility service at run time: cases are built lazily.
  const cases: Array<[string, () => Record<string, unknown>, () => Array<[string, string | RegExp]>]> = [
    ['an http URL', () => ({ ...base, url: 'http://hooks.example.test/fcd' }), () => [['url', 'must use https']]],
    ['https://127.0.0.1', () => ({ ...base, url: 'https://127.0.0.1' }), () => [['url', 'must not point to a loopback address']]],
    ['https://10.0.0.5', () => ({ ...base, url: 'https://10.0.0.5' }), () => [['url', 'must not point to a private address']]],
    ['https://[::1]', () => ({ ...base, url: 'https://[::1]' }), () => [['url', 'must not point to a loopback address']]],
    [
      'https://169.254.169.254',
      () => ({ ...base, url: 'https://169.254.169.254/latest/meta-data' }),
      () => [['url', 'must not point to a cloud metadata address']],
    ],
    [
      'a host name resolving to a private address (internal.example.test → 10.1.2.3)',
      () => ({ ...base, url: 'https://internal.example.test/hook' }),
      () => [['url', 'must not point to a private address (the host resolves to one)']],
    ],
    [
      'a host name resolving to loopback (rebind.example.test → 127.0.0.1)',
      () => ({ ...base, url: 'https://rebind.example.test/hook' }),
      () => [['url', 'must not point to a loopback address (the host resolves to one)']],
    ],
    [
      'https://user:pw@host',
      () => ({ ...base, url: 'https://user:pw@hooks.example.test/fcd' }),
      () => [['url', 'must not contain a user name or password']],
    ],
    ['a 2,049-character URL', () => ({ ...base, url: long }), () => [['url', 'must be at most 2048 characters']]],
    ['empty events', () => ({ ...base, events: [] }), () => [['events', 'must list at least one event type']]],
    ['an unknown event', () => ({ ...base, events: ['violation.new', 'violation.old'] }), () => [['events[1]', /^must be one of /]]],
    ['duplicate events', () => ({ ...base, events: ['case.new', 'case.new'] }), () => [['events[1]', 'is a duplicate of events[0]']]],
    [
      'facility_ids: []',
      () => ({ ...base, facility_ids: [] }),
      () => [['facility_ids', 'must not be empty; omit it or send null to watch every facility']],
    ],
    ['a non-UUID facility id', () => ({ ...base, facility_ids: [F1, 'not-a-uuid'] }), () => [['facility_ids[1]', 'must be a UUID']]],
    [
      'an unknown facility (a valid UUID the facility service does not have)',
      () => ({ ...base, facility_ids: [F1, UNKNOWN_F, F2] }),
      () => [['facility_ids[1]', `no facility with id ${UNKNOWN_F} exists`]],
    ],
    [
      '1,001 facility ids',
      () => ({ ...base, facility_ids: Array.from({ length: 1001 }, () => randomUUID()) }),
      () => [['facility_ids', 'must list at most 1000 facility ids (got 1001)']],
    ],
    ['an unknown body field', () => ({ ...base, secret: 'whsec_mine' }), () => [['secret', 'is not a known field']]],
    ['url missing', () => ({ events: ['case.new'] }), () => [['url', 'is required']]],
    ['events missing', () => ({ url: HOOK_URL }), () => [['events', 'is required']]],
    ['url of the wrong type', () => ({ ...base, url: 42 }), () => [['url', 'must be string']]],
    ['events of the wrong type', () => ({ ...base, events: 'violation.new' }), () => [['events', 'must be array']]],
    ['an event of the wrong type', () => ({ ...base, events: [true] }), () => [['events[0]', 'must be string']]],
    ['facility_ids of the wrong type', () => ({ ...base, facility_ids: F1 }), () => [['facility_ids', 'must be array']]],
    ['a facility id of the wrong type', () => ({ ...base, facility_ids: [1] }), () => [['facility_ids[0]', 'must be string']]],
  ];

  it.each(cases)('POST refuses %s: 400 VALIDATION_ERROR naming the field; nothing written', async (_name, body, fields) => {
    const res = await create(validator.apiKey, body());
    expectValidationError(res, fields());
    expect(await count(validator.apiKey)).toBe(1);
  });

  it('POST reports several problems together, in field order', async () => {
    const res = await create(validator.apiKey, {
      url: 'https://internal.example.test/x',
      events: ['case.new', 'nope', 'case.new', 7],
      facility_ids: ['bad', UNKNOWN_F, F1],
      colour: 'blue',
    });
    expectValidationError(res, [
      ['url', 'must not point to a private address (the host resolves to one)'],
      ['events[1]', /^must be one of /],
      ['events[2]', 'is a duplicate of events[0]'],
      ['events[3]', 'must be string'],
      ['facility_ids[0]', 'must be a UUID'],
      ['facility_ids[1]', `no facility with id ${UNKNOWN_F} exists`],
      ['colour', 'is not a known field'],
    ]);
    expect(res.body.error.message).toBe('Invalid request: 7 problems');
    expect(await count(validator.apiKey)).toBe(1);
  });

  const patchCases: Array<[string, () => Record<string, unknown>, () => Array<[string, string | RegExp]>]> = [
    [
      'an empty body',
      () => ({}),
      () => [['body', 'must contain at least one of url, events, facility_ids, filter, is_active, rate_limit_per_second, max_in_flight']],
    ],
    [
      'a URL whose host resolves to loopback',
      () => ({ url: 'https://rebind.example.test/hook' }),
      () => [['url', 'must not point to a loopback address (the host resolves to one)']],
    ],
    [
      'facility_ids: []',
      () => ({ facility_ids: [] }),
      () => [['facility_ids', 'must not be empty; omit it or send null to watch every facility']],
    ],
    ['an unknown facility', () => ({ facility_ids: [UNKNOWN_F] }), () => [['facility_ids[0]', `no facility with id ${UNKNOWN_F} exists`]]],
    ['is_active of the wrong type', () => ({ is_active: 'yes' }), () => [['is_active', 'must be boolean']]],
    ['an unknown field', () => ({ secret: 'whsec_mine' }), () => [['secret', 'is not a known field']]],
  ];

  it.each(patchCases)(
    'PATCH refuses %s: 400 VALIDATION_ERROR naming the field; the subscription is unchanged',
    async (_n, body, fields) => {
      const res = await patch(validator.apiKey, existing.id as string, body());
      expectValidationError(res, fields());
      expect((await call(`/v1/webhooks/${existing.id}`, validator.apiKey)).body.data).toEqual(existing);
    },
  );
});

describe('activation, and other accounts’ subscriptions', () => {
  it('PATCH is_active:false deactivates (manual); is_active:true reactivates with deactivated_at and reason null', async () => {
    const sub = await createOk(pro.apiKey);
    const off = await patch(pro.apiKey, sub.id, { is_active: false });
    expect(off.status, off.text).toBe(200);
    expect(off.body.data).toMatchObject({ id: sub.id, is_active: false, deactivation_reason: 'manual' });
    expect(off.body.data.deactivated_at).toMatch(ISO_MS);
    const on = await patch(pro.apiKey, sub.id, { is_active: true });
    expect(on.status, on.text).toBe(200);
    expect(on.body.data).toMatchObject({ id: sub.id, is_active: true, deactivated_at: null, deactivation_reason: null });
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey)).body.data).toEqual(on.body.data);
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
  });

  it('PATCH with an empty body is a 400 VALIDATION_ERROR', async () => {
    const sub = await createOk(pro.apiKey);
    expectValidationError(await patch(pro.apiKey, sub.id, {}), [['body', /^must contain at least one of /]]);
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
  });

  it("answers 404 NOT_FOUND — the same as for an id that never existed — to every verb on another account's subscription", async () => {
    const sub = await createOk(pro.apiKey);
    const owned = (await call(`/v1/webhooks/${sub.id}`, pro.apiKey)).body.data;
    const never = `wh_${randomUUID()}`;
    const verbs: Array<[string, string, unknown?]> = [
      ['GET', ''],
      ['PATCH', '', { is_active: false }],
      ['DELETE', ''],
      ['POST', '/test'],
      ['POST', '/rotate-secret'],
      ['GET', '/deliveries'],
    ];
    for (const [method, suffix, body] of verbs) {
      const foreign = await call(`/v1/webhooks/${sub.id}${suffix}`, pro2.apiKey, { method, body });
      expect(foreign.status, `${method} ${suffix}`).toBe(404);
      expect(foreign.body).toEqual({ error: { code: 'NOT_FOUND', message: 'No such webhook subscription.' } });
      const unknown = await call(`/v1/webhooks/${never}${suffix}`, pro2.apiKey, { method, body });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toEqual(foreign.body);
    }
    // Nothing happened to it: same secret (no rotation), still active, not deleted, no test delivery.
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey)).body.data).toEqual(owned);
    const deliveries = await call(`/v1/webhooks/${sub.id}/deliveries`, pro.apiKey);
    expect(deliveries.status).toBe(200);
    expect(deliveries.body.data).toEqual([]);
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
  });
});

describe('ids the router cannot take', () => {
  it('a 500-character id is authenticated, counted and answered 404 like any unknown id', async () => {
    const before = Number((await call('/v1/webhooks', pro.apiKey)).headers.get('x-ratelimit-remaining'));
    const res = await call(`/v1/webhooks/${'x'.repeat(500)}`, pro.apiKey);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: { code: 'NOT_FOUND', message: 'No such webhook subscription.' } });
    expect(Number(res.headers.get('x-ratelimit-remaining'))).toBe(before - 1);
  });

  it('a percent-encoding that does not decode is a 400 BAD_REQUEST envelope with a request id, before authentication', async () => {
    const res = await fetch(`${gateway}/v1/webhooks/%zz`, { headers: { 'x-api-key': pro.apiKey } });
    expect(res.status).toBe(400);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    expect(res.headers.get('x-ratelimit-limit')).toBeNull();
    expect(await res.json()).toEqual({
      error: { code: 'BAD_REQUEST', message: 'The request URL is not valid: a percent-encoded sequence does not decode.' },
    });
  });
});

describe('tiers', () => {
  it('refuses a Free account with 403 FORBIDDEN (required_tier pro, tier free) on all five verbs', async () => {
    const sub = await createOk(pro.apiKey);
    const verbs: Array<[string, string, unknown?]> = [
      ['POST', '/v1/webhooks', { url: HOOK_URL, events: ['case.new'] }],
      ['GET', '/v1/webhooks'],
      ['GET', `/v1/webhooks/${sub.id}`],
      ['PATCH', `/v1/webhooks/${sub.id}`, { is_active: false }],
      ['DELETE', `/v1/webhooks/${sub.id}`],
    ];
    for (const [method, path, body] of verbs) {
      const res = await call(path, free.apiKey, { method, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body).toEqual({
        error: { code: 'FORBIDDEN', message: expect.any(String), details: { required_tier: 'pro', tier: 'free' } },
      });
      expect(res.headers.get('x-ratelimit-limit')).toBe('100');
    }
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey)).body.data).toMatchObject({ id: sub.id, is_active: true });
    expect((await call(`/v1/webhooks/${sub.id}`, pro.apiKey, { method: 'DELETE' })).status).toBe(204);
  });
});

describe('at most 25 subscriptions per account', () => {
  it('refuses the 26th with 409 LIMIT_REACHED; after a delete a new one is accepted', async () => {
    const account = await stack.createAccount('pro');
    const ids: string[] = [];
    for (let i = 0; i < 25; i += 1) ids.push((await createOk(account.apiKey, { url: `${HOOK_URL}/${i}`, events: ['case.new'] })).id);
    const refused = await create(account.apiKey, { url: `${HOOK_URL}/26`, events: ['case.new'] });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      error: {
        code: 'LIMIT_REACHED',
        message: 'An account can have at most 25 webhook subscriptions. Delete one to add another.',
        details: { limit: 25 },
      },
    });
    expect(await count(account.apiKey)).toBe(25);
    expect((await call(`/v1/webhooks/${ids[0]}`, account.apiKey, { method: 'DELETE' })).status).toBe(204);
    expect(await count(account.apiKey)).toBe(24);
    const again = await createOk(account.apiKey, { url: `${HOOK_URL}/26`, events: ['case.new'] });
    expect(again.id).toMatch(WH_ID);
    expect(await count(account.apiKey)).toBe(25);
    expect((await create(account.apiKey, { url: `${HOOK_URL}/27`, events: ['case.new'] })).status).toBe(409);
  });
});

describe('any JSON body gets a 2xx or a 4xx error envelope, never a 5xx (fast-check)', () => {
  let account: TestAccount;
  const patchTargets: string[] = [];

  beforeAll(async () => {
    account = await stack.createAccount('enterprise');
    for (let i = 0; i < 3; i += 1)
      patchTargets.push((await createOk(account.apiKey, { url: `${HOOK_URL}/p${i}`, events: ['case.new'] })).id);
  });

  const known = () => [F1, F2];
  const urlArb = fc.oneof(
    fc.constantFrom(
      HOOK_URL,
      'https://93.184.216.34/x',
      'https://internal.example.test/',
      'https://rebind.example.test/',
      'https://127.0.0.1/',
      'https://[::1]/',
      'https://169.254.169.254/',
      'https://u:p@hooks.example.test/',
      'http://hooks.example.test/',
      `${HOOK_URL}/${'x'.repeat(2100)}`,
      '',
    ),
    fc.string(),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const eventsArb = fc.oneof(
    fc.subarray([...EVENT_TYPES], { minLength: 1 }),
    fc.array(fc.oneof(fc.constantFrom(...EVENT_TYPES), fc.string()), { maxLength: 6 }),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const facilityIdsArb = fc.oneof(
    fc.constant(null),
    fc.constant('known'),
    fc.array(fc.oneof(fc.constant('known'), fc.uuid(), fc.string()), { maxLength: 6 }),
    fc.jsonValue({ maxDepth: 2 }),
  );
  /** 'known' stands for a facility that exists (ids are only known once the stack runs). */
  const withKnown = (value: unknown): unknown => {
    if (value === 'known') return known();
    if (Array.isArray(value)) return value.map((v, i) => (v === 'known' ? known()[i % 2] : v));
    return value;
  };
  const extraArb = fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 });
  const validCreateArb = fc.record({
    url: fc.constantFrom(HOOK_URL, 'https://93.184.216.34/x'),
    events: fc.subarray([...EVENT_TYPES], { minLength: 1 }),
    facility_ids: fc.constantFrom(null, 'known', ['known']),
  });
  const mixedCreateArb = fc
    .tuple(fc.record({ url: urlArb, events: eventsArb, facility_ids: facilityIdsArb }, { requiredKeys: [] }), extraArb)
    .map(([fields, extra]) => ({ ...extra, ...fields }));
  const bodyArb = (valid: fc.Arbitrary<Record<string, unknown>>, mixed: fc.Arbitrary<Record<string, unknown>>) =>
    fc.oneof(
      { arbitrary: valid, weight: 3 },
      { arbitrary: mixed, weight: 4 },
      { arbitrary: fc.object({ maxDepth: 2 }), weight: 1 },
      { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 2 },
    );
  const materialise = (body: unknown): unknown => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
    const out = { ...(body as Record<string, unknown>) };
    if ('facility_ids' in out) out.facility_ids = withKnown(out.facility_ids);
    return out;
  };

  function expectAcceptable(res: Answer, success: number, what: string): void {
    if (res.status === success) return;
    expect(res.status, `${what}: ${res.text}`).toBeGreaterThanOrEqual(400);
    expect(res.status, `${what}: ${res.text}`).toBeLessThan(500);
    expect(Object.keys(res.body)).toEqual(['error']);
    const { code, message, details, ...rest } = res.body.error;
    expect(rest).toEqual({});
    expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], `${what}: ${res.text}`).toBe(res.status);
    expect(typeof message).toBe('string');
    expect(message.length).toBeGreaterThan(0);
    if (details !== undefined) expect(typeof details).toBe('object');
  }

  it('POST /v1/webhooks', async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(bodyArb(validCreateArb, mixedCreateArb), async (generated) => {
        const body = materialise(generated);
        const res = await call('/v1/webhooks', account.apiKey, { method: 'POST', raw: JSON.stringify(body) });
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        expectAcceptable(res, 201, `POST ${JSON.stringify(body).slice(0, 300)}`);
        if (res.status === 201) {
          expect(Object.keys(res.body.data).sort()).toEqual(SUBSCRIPTION_KEYS);
          // Keep the account below its 25 subscriptions, so every run can reach the success path.
          expect((await call(`/v1/webhooks/${res.body.data.id}`, account.apiKey, { method: 'DELETE' })).status).toBe(204);
        }
      }),
      { numRuns: 100 },
    );
    expect(seen.get(201) ?? 0).toBeGreaterThan(0);
    expect(seen.get(400) ?? 0).toBeGreaterThan(0);
    expect(seen.has(409)).toBe(false);
    expect(await count(account.apiKey)).toBe(3);
  });

  it('PATCH /v1/webhooks/{id}', async () => {
    const validPatchArb = fc.record(
      {
        url: fc.constantFrom(HOOK_URL, 'https://93.184.216.34/y'),
        events: fc.subarray([...EVENT_TYPES], { minLength: 1 }),
        facility_ids: fc.constantFrom(null, 'known', ['known']),
        is_active: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    const mixedPatchArb = fc
      .tuple(
        fc.record(
          { url: urlArb, events: eventsArb, facility_ids: facilityIdsArb, is_active: fc.jsonValue({ maxDepth: 1 }) },
          { requiredKeys: [] },
        ),
        extraArb,
      )
      .map(([fields, extra]) => ({ ...extra, ...fields }));
    const unknownId = `wh_${randomUUID()}`;
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...patchTargets, unknownId), bodyArb(validPatchArb, mixedPatchArb), async (id, generated) => {
        const body = materialise(generated);
        const res = await call(`/v1/webhooks/${id}`, account.apiKey, { method: 'PATCH', raw: JSON.stringify(body) });
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        expectAcceptable(res, 200, `PATCH ${id} ${JSON.stringify(body).slice(0, 300)}`);
        if (res.status === 200) {
          expect(Object.keys(res.body.data).sort()).toEqual(SUBSCRIPTION_KEYS);
          expect(res.body.data.id).toBe(id);
          expect(res.body.data.secret).toMatch(/^whsec_\*{8}[A-Za-z0-9+/=]{4}$/);
        }
        if (id === unknownId) expect(res.status === 404 || res.status === 400).toBe(true);
      }),
      { numRuns: 100 },
    );
    expect(seen.get(200) ?? 0).toBeGreaterThan(0);
    expect(seen.get(400) ?? 0).toBeGreaterThan(0);
    expect(seen.get(404) ?? 0).toBeGreaterThan(0);
  });
});
