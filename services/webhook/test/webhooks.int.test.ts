import { randomUUID } from 'node:crypto';
import { InternalAuth, ManualClock } from '@fcd/service-kit';
import { logCapture } from '@fcd/testing';
import { DeliveryStore, matches, SubscriptionStore, sign, verify } from '@fcd/webhooks';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  asAccount,
  createContext,
  type FacilityStub,
  INTERNAL_SECRET,
  internalAuth,
  newAccount,
  PRIVATE_HOST,
  PUBLIC_HOST,
  SUBSCRIPTION_KEYS,
  startFacilityStub,
  type TestContext,
  target,
  testApp,
} from './helpers';

const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';
const F3 = '33333333-3333-4333-8333-333333333333';
const UNKNOWN_F = '99999999-9999-4999-8999-999999999999';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const WH_ID = /^wh_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const REDACTED = /^whsec_\*{8}[A-Za-z0-9+/=]{4}$/;

let ctx: TestContext;
let stub: FacilityStub;
let app: FastifyInstance;
const clock = new ManualClock(Date.parse('2026-11-22T08:15:30.123Z'));
const logs = logCapture('webhook-test');

beforeAll(async () => {
  ctx = await createContext('webhook_api');
  stub = await startFacilityStub([F1, F2, F3]);
  ({ app } = await testApp(ctx, { facilityUrl: stub.url, clock, logger: logs.logger }));
});

afterAll(async () => {
  await app?.close();
  await stub?.close();
  await ctx?.close();
});

const url = (path = '/fcd') => `https://${PUBLIC_HOST}${path}`;

async function call(
  accountId: string,
  options: InjectOptions,
  tier: 'free' | 'pro' | 'enterprise' = 'pro',
): Promise<LightMyRequestResponse> {
  return app.inject({ ...options, headers: { ...asAccount(accountId, target(options), tier), ...(options.headers ?? {}) } });
}
const create = (accountId: string, payload: unknown, tier: 'pro' | 'enterprise' | 'free' = 'pro') =>
  call(accountId, { method: 'POST', url: '/v1/webhooks', payload: payload as object }, tier);
const patch = (accountId: string, id: string, payload: unknown) =>
  call(accountId, { method: 'PATCH', url: `/v1/webhooks/${id}`, payload: payload as object });
const get = (accountId: string, id: string) => call(accountId, { method: 'GET', url: `/v1/webhooks/${id}` });

async function countRows(accountId?: string): Promise<number> {
  const { rows } = await ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook.subscriptions ${accountId ? 'WHERE account_id = $1' : ''}`,
    accountId ? [accountId] : [],
  );
  return rows[0]?.n ?? 0;
}

function expectValidationError(res: LightMyRequestResponse, fields: Array<string | [string, RegExp]>): void {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json();
  expect(body.error.code).toBe('VALIDATION_ERROR');
  expect(typeof body.error.message).toBe('string');
  const got = body.error.details.fields as Array<{ field: string; message: string }>;
  expect(got.map((f) => f.field)).toEqual(fields.map((f) => (Array.isArray(f) ? f[0] : f)));
  fields.forEach((f, i) => {
    expect(typeof got[i]?.message).toBe('string');
    if (Array.isArray(f)) expect(got[i]?.message).toMatch(f[1]);
  });
}

describe('POST /v1/webhooks', () => {
  it('creates a subscription: 201 with every published field in the right format and the secret in clear', async () => {
    const account = newAccount();
    const res = await create(account, { url: url(), events: ['violation.new', 'case.updated'], facility_ids: [F1, F2.toUpperCase()] });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const { data } = res.json();
    expect(Object.keys(data).sort()).toEqual(SUBSCRIPTION_KEYS);
    expect(data.id).toMatch(WH_ID);
    expect(data).toMatchObject({
      url: url(),
      events: ['violation.new', 'case.updated'],
      facility_ids: [F1, F2],
      is_active: true,
      created_at: '2026-11-22T08:15:30.123Z',
      updated_at: '2026-11-22T08:15:30.123Z',
      deactivated_at: null,
      deactivation_reason: null,
    });
    expect(data.created_at).toMatch(ISO_MS);
    expect(data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  });

  it('shows the secret once: GET, list and PATCH show only the redacted form', async () => {
    const account = newAccount();
    const { data: created } = (await create(account, { url: url(), events: ['case.new'] })).json();
    const redacted = `whsec_********${created.secret.slice(-4)}`;
    const read = (await get(account, created.id)).json().data;
    expect(read.secret).toBe(redacted);
    expect(read.secret).toMatch(REDACTED);
    const list = (await call(account, { method: 'GET', url: '/v1/webhooks' })).json();
    expect(list.data.map((s: { secret: string }) => s.secret)).toEqual([redacted]);
    const patched = await patch(account, created.id, { events: ['case.new', 'case.updated'] });
    expect(patched.json().data.secret).toBe(redacted);
    for (const body of [read, list, patched.json()]) expect(JSON.stringify(body)).not.toContain(created.secret.slice(6));
  });

  it('stores the secret encrypted with the environment key, so the dispatcher can sign with it, and never logs it', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['violation.new'] })).json();
    const { rows } = await ctx.pool.query<{ secret_ciphertext: string }>(
      'SELECT secret_ciphertext FROM webhook.subscriptions WHERE id = $1',
      [data.id],
    );
    expect(rows[0]?.secret_ciphertext).toMatch(/^v1:[0-9a-f]{8}:/);
    expect(rows[0]?.secret_ciphertext).not.toContain(data.secret.slice(6));
    const secret = await new SubscriptionStore(ctx.pool, ctx.secretBox).signingSecret(data.id);
    expect(secret).toBe(data.secret);
    expect(verify(data.secret, '{"id":"evt_1"}', sign(secret as string, '{"id":"evt_1"}'))).toBe(true);
    expect(logs.lines.join('\n')).not.toContain(data.secret.slice(6));
  });

  it('with facility_ids omitted stores and shows null, and the subscription matches every facility', async () => {
    const account = newAccount();
    const res = await create(account, { url: url(), events: ['violation.new', 'case.new'] });
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    expect(data.facility_ids).toBeNull();
    expect((await get(account, data.id)).json().data.facility_ids).toBeNull();
    const violation = (facility: string) => ({
      id: 'evt_1',
      type: 'violation.new',
      created_at: data.created_at,
      data: { violation: { facility_id: facility } },
    });
    for (const facility of [F1, F3, randomUUID()]) expect(matches(data, violation(facility))).toBe(true);
    const event = { id: `evt_${randomUUID()}`, type: 'case.new', facilityIds: [randomUUID()] };
    const body = JSON.stringify({
      id: event.id,
      type: event.type,
      created_at: data.created_at,
      data: { case: { facility_ids: event.facilityIds } },
    });
    const created = await new DeliveryStore(ctx.pool, ctx.secretBox).fanOut({ ...event, body }, Date.now());
    const fanned = await ctx.pool.query<{ subscription_id: string }>('SELECT subscription_id FROM webhook.deliveries WHERE id = ANY($1)', [
      created,
    ]);
    expect(fanned.rows.map((r) => r.subscription_id)).toContain(data.id);
    // Explicit null is the same as omitted.
    expect((await create(account, { url: url(), events: ['case.new'], facility_ids: null })).json().data.facility_ids).toBeNull();
  });

  it('asks the facility service, for the calling account, whether the facility ids exist', async () => {
    const account = newAccount();
    stub.calls.length = 0;
    expect((await create(account, { url: url(), events: ['case.new'], facility_ids: [F3, F1] })).statusCode).toBe(201);
    expect(stub.calls).toHaveLength(1);
    expect(stub.calls[0]?.ids.sort()).toEqual([F1, F3]);
    expect(stub.calls[0]?.claims).toMatchObject({ account_id: account, tier: 'pro', tier_rank: 1 });
  });

  const long = `https://${PUBLIC_HOST}/${'a'.repeat(2049 - `https://${PUBLIC_HOST}/`.length)}`;
  const base = { url: url(), events: ['violation.new'] };
  const cases: Array<[string, Record<string, unknown>, Array<string | [string, RegExp]>]> = [
    ['an http URL', { ...base, url: `http://${PUBLIC_HOST}/fcd` }, [['url', /https/]]],
    ['https://127.0.0.1', { ...base, url: 'https://127.0.0.1' }, [['url', /loopback/]]],
    ['https://10.0.0.5', { ...base, url: 'https://10.0.0.5' }, [['url', /private/]]],
    ['https://[::1]', { ...base, url: 'https://[::1]' }, [['url', /loopback/]]],
    ['https://169.254.169.254', { ...base, url: 'https://169.254.169.254' }, [['url', /metadata/]]],
    ['https://metadata.google.internal', { ...base, url: 'https://metadata.google.internal/computeMetadata/v1' }, [['url', /metadata/]]],
    ['a host name resolving to a private address', { ...base, url: `https://${PRIVATE_HOST}/hook` }, [['url', /private address/]]],
    ['a host name that does not resolve', { ...base, url: 'https://nowhere.example.com/hook' }, [['url', /does not resolve/]]],
    ['https://user:pw@host', { ...base, url: `https://user:pw@${PUBLIC_HOST}/fcd` }, [['url', /user name or password/]]],
    ['a 2,049-character URL', { ...base, url: long }, [['url', /2048/]]],
    ['not a URL', { ...base, url: 'hooks.example.com/fcd' }, [['url', /absolute https URL/]]],
    ['empty events', { ...base, events: [] }, [['events', /at least one/]]],
    ['an unknown event', { ...base, events: ['violation.new', 'violation.old'] }, [['events[1]', /must be one of/]]],
    ['duplicate events', { ...base, events: ['case.new', 'case.new'] }, [['events[1]', /duplicate of events\[0\]/]]],
    ['facility_ids: []', { ...base, facility_ids: [] }, [['facility_ids', /must not be empty/]]],
    ['a non-UUID facility id', { ...base, facility_ids: [F1, 'not-a-uuid'] }, [['facility_ids[1]', /UUID/]]],
    ['an unknown facility', { ...base, facility_ids: [UNKNOWN_F, F1] }, [['facility_ids[0]', new RegExp(UNKNOWN_F)]]],
    ['duplicate facility ids', { ...base, facility_ids: [F1, F1.toUpperCase()] }, [['facility_ids[1]', /duplicate/]]],
    ['1,001 facility ids', { ...base, facility_ids: Array.from({ length: 1001 }, () => randomUUID()) }, [['facility_ids', /at most 1000/]]],
    ['an unknown body field', { ...base, secret: 'whsec_mine' }, [['secret', /not a known field/]]],
    ['url missing', { events: ['case.new'] }, [['url', /required/]]],
    ['events missing', { url: url() }, [['events', /required/]]],
    ['url of the wrong type', { ...base, url: 42 }, [['url', /string/]]],
    ['events of the wrong type', { ...base, events: 'violation.new' }, [['events', /array/]]],
    ['an event of the wrong type', { ...base, events: [true] }, [['events[0]', /string/]]],
    ['facility_ids of the wrong type', { ...base, facility_ids: F1 }, [['facility_ids', /array/]]],
    ['a facility id of the wrong type', { ...base, facility_ids: [1] }, [['facility_ids[0]', /string/]]],
  ];

  it.each(cases)('refuses %s with 400 VALIDATION_ERROR naming the field, writing nothing', async (_name, payload, fields) => {
    const account = newAccount();
    const res = await create(account, payload);
    expectValidationError(res, fields);
    expect(await countRows(account)).toBe(0);
  });

  it('reports several problems together, in field order', async () => {
    const account = newAccount();
    const res = await create(account, {
      url: 'http://127.0.0.1/x',
      events: ['case.new', 'nope', 'case.new', 7],
      facility_ids: ['bad', UNKNOWN_F, F1],
      colour: 'blue',
    });
    expectValidationError(res, [
      ['url', /https/],
      ['events[1]', /must be one of/],
      ['events[2]', /duplicate/],
      ['events[3]', /string/],
      ['facility_ids[0]', /UUID/],
      ['facility_ids[1]', /no facility/],
      ['colour', /not a known field/],
    ]);
    expect(await countRows(account)).toBe(0);
  });

  it('refuses the 26th subscription of an account with 409 LIMIT_REACHED', async () => {
    const account = newAccount();
    for (let i = 0; i < 25; i += 1) {
      expect((await create(account, { url: url(`/hook/${i}`), events: ['violation.new'] })).statusCode).toBe(201);
    }
    const res = await create(account, { url: url('/hook/26'), events: ['violation.new'] });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({
      error: {
        code: 'LIMIT_REACHED',
        message: 'An account can have at most 25 webhook subscriptions. Delete one to add another.',
        details: { limit: 25 },
      },
    });
    expect(await countRows(account)).toBe(25);
    // Another account is not affected; after a delete the account may add one again.
    expect((await create(newAccount(), { url: url(), events: ['violation.new'] })).statusCode).toBe(201);
    const first = (await call(account, { method: 'GET', url: '/v1/webhooks?limit=1' })).json().data[0];
    expect((await call(account, { method: 'DELETE', url: `/v1/webhooks/${first.id}` })).statusCode).toBe(204);
    expect((await create(account, { url: url('/hook/26'), events: ['violation.new'] })).statusCode).toBe(201);
  });

  it('accepts an Enterprise account', async () => {
    expect((await create(newAccount(), { url: url(), events: ['case.new'] }, 'enterprise')).statusCode).toBe(201);
  });
});

describe('GET /v1/webhooks', () => {
  it('lists newest first with an opaque keyset cursor, stable when subscriptions are added', async () => {
    const account = newAccount();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      clock.advance(1000);
      ids.push((await create(account, { url: url(`/l/${i}`), events: ['case.new'] })).json().data.id);
    }
    const page1 = await call(account, { method: 'GET', url: '/v1/webhooks?limit=2' });
    expect(page1.statusCode).toBe(200);
    const body1 = page1.json();
    expect(body1.data.map((s: { id: string }) => s.id)).toEqual([ids[4], ids[3]]);
    expect(body1.pagination).toEqual({ limit: 2, next_cursor: expect.any(String), has_more: true });
    clock.advance(1000);
    await create(account, { url: url('/l/new'), events: ['case.new'] });
    const page2 = (await call(account, { method: 'GET', url: `/v1/webhooks?limit=2&cursor=${body1.pagination.next_cursor}` })).json();
    expect(page2.data.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[1]]);
    const page3 = (await call(account, { method: 'GET', url: `/v1/webhooks?limit=2&cursor=${page2.pagination.next_cursor}` })).json();
    expect(page3.data.map((s: { id: string }) => s.id)).toEqual([ids[0]]);
    expect(page3.pagination).toEqual({ limit: 2, next_cursor: null, has_more: false });
  });

  it("refuses another account's cursor with 400 VALIDATION_ERROR naming cursor", async () => {
    const owner = newAccount();
    for (let i = 0; i < 2; i += 1) {
      clock.advance(1000);
      await create(owner, { url: url(`/c/${i}`), events: ['case.new'] });
    }
    const cursor = (await call(owner, { method: 'GET', url: '/v1/webhooks?limit=1' })).json().pagination.next_cursor;
    expect((await call(owner, { method: 'GET', url: `/v1/webhooks?limit=1&cursor=${cursor}` })).statusCode).toBe(200);
    expectValidationError(await call(newAccount(), { method: 'GET', url: `/v1/webhooks?limit=1&cursor=${cursor}` }), ['cursor']);
  });

  it("defaults to 25 per page and shows only the account's own subscriptions", async () => {
    const account = newAccount();
    const res = await call(account, { method: 'GET', url: '/v1/webhooks' });
    expect(res.json()).toEqual({ data: [], pagination: { limit: 25, next_cursor: null, has_more: false } });
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=ten', 'limit'],
    ['limit=Infinity', 'limit'],
    ['limit=-Infinity', 'limit'],
    ['limit=1e400', 'limit'],
    ['limit=0x10', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=1e1', 'limit'],
    ['cursor=not-a-cursor!', 'cursor'],
    ['cursor=eyJhIjoxfQ', 'cursor'],
    ['colour=blue', 'colour'],
  ])('refuses ?%s with 400 VALIDATION_ERROR naming %s', async (query, field) => {
    const res = await call(newAccount(), { method: 'GET', url: `/v1/webhooks?${query}` });
    expectValidationError(res, [field]);
  });
});

describe('GET, PATCH and DELETE /v1/webhooks/{id}', () => {
  it('reads one subscription', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'], facility_ids: [F2] })).json();
    const res = await get(account, data.id);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ ...data, secret: `whsec_********${data.secret.slice(-4)}` });
  });

  it('PATCH is_active:false deactivates (reason "manual"), then is_active:true reactivates', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'] })).json();
    clock.advance(60_000);
    const off = await patch(account, data.id, { is_active: false });
    expect(off.statusCode).toBe(200);
    expect(off.json().data).toMatchObject({
      is_active: false,
      deactivated_at: new Date(clock.now()).toISOString(),
      deactivation_reason: 'manual',
      updated_at: new Date(clock.now()).toISOString(),
    });
    expect((await get(account, data.id)).json().data.is_active).toBe(false);
    clock.advance(60_000);
    const on = await patch(account, data.id, { is_active: true });
    expect(on.statusCode).toBe(200);
    expect(on.json().data).toMatchObject({ is_active: true, deactivated_at: null, deactivation_reason: null });
  });

  it('PATCH of url, events and facility_ids changes only what is given; facility_ids null watches all again', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'], facility_ids: [F1] })).json();
    const res = await patch(account, data.id, { url: url('/v2'), events: ['facility.status_changed'], facility_ids: [F2, F3] });
    expect(res.json().data).toMatchObject({
      url: url('/v2'),
      events: ['facility.status_changed'],
      facility_ids: [F2, F3],
      is_active: true,
    });
    expect((await patch(account, data.id, { facility_ids: null })).json().data).toMatchObject({ url: url('/v2'), facility_ids: null });
  });

  it('PATCH validates like create, merges every problem, and changes nothing on error', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'] })).json();
    expectValidationError(await patch(account, data.id, {}), [['body', /at least one of url, events, facility_ids, filter, is_active/]]);
    expectValidationError(
      await patch(account, data.id, { url: 'https://10.0.0.5/', events: [], facility_ids: [], is_active: 'yes', x: 1 }),
      [
        ['url', /private/],
        ['events', /at least one/],
        ['facility_ids', /must not be empty/],
        ['is_active', /boolean/],
        ['x', /not a known field/],
      ],
    );
    expectValidationError(await patch(account, data.id, { facility_ids: [UNKNOWN_F] }), [['facility_ids[0]', /no facility/]]);
    expect((await get(account, data.id)).json().data).toMatchObject({
      url: url(),
      events: ['case.new'],
      facility_ids: null,
      is_active: true,
    });
  });

  it('rate_limit_per_second and max_in_flight: set on create, shown, changed and cleared by PATCH', async () => {
    const account = newAccount();
    const plain = (await create(account, { url: url(), events: ['case.new'] })).json().data;
    expect(plain).toMatchObject({ rate_limit_per_second: null, max_in_flight: 16 });
    const res = await create(account, { url: url(), events: ['case.new'], rate_limit_per_second: 5, max_in_flight: 2 });
    expect(res.statusCode, res.body).toBe(201);
    const { data } = res.json();
    expect(data).toMatchObject({ rate_limit_per_second: 5, max_in_flight: 2 });
    expect((await get(account, data.id)).json().data).toMatchObject({ rate_limit_per_second: 5, max_in_flight: 2 });
    expect((await patch(account, data.id, { rate_limit_per_second: 1000, max_in_flight: 64 })).json().data).toMatchObject({
      rate_limit_per_second: 1000,
      max_in_flight: 64,
      events: ['case.new'],
    });
    expect((await patch(account, data.id, { rate_limit_per_second: null })).json().data).toMatchObject({
      rate_limit_per_second: null,
      max_in_flight: 64,
    });
    const { rows } = await ctx.pool.query('SELECT rate_limit_per_second, max_in_flight FROM webhook.subscriptions WHERE id = $1', [
      data.id,
    ]);
    expect(rows).toEqual([{ rate_limit_per_second: null, max_in_flight: 64 }]);
  });

  it.each([
    ['rate_limit_per_second', 0, /must be >= 1/],
    ['rate_limit_per_second', 1001, /must be <= 1000/],
    ['rate_limit_per_second', 2.5, /integer/],
    ['rate_limit_per_second', '5', /integer/],
    ['max_in_flight', 0, /must be >= 1/],
    ['max_in_flight', 65, /must be <= 64/],
    ['max_in_flight', null, /integer/],
  ])('refuses %s = %j on POST and PATCH with 400 VALIDATION_ERROR naming it, writing nothing', async (field, value, message) => {
    const account = newAccount();
    expectValidationError(await create(account, { url: url(), events: ['case.new'], [field]: value }), [[field, message]]);
    expect(await countRows(account)).toBe(0);
    const { data } = (await create(account, { url: url(), events: ['case.new'], rate_limit_per_second: 7, max_in_flight: 3 })).json();
    expectValidationError(await patch(account, data.id, { [field]: value }), [[field, message]]);
    expect((await get(account, data.id)).json().data).toMatchObject({ rate_limit_per_second: 7, max_in_flight: 3 });
  });

  it('DELETE answers 204 with no body, after which the subscription is gone', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'] })).json();
    const res = await call(account, { method: 'DELETE', url: `/v1/webhooks/${data.id}` });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect((await get(account, data.id)).statusCode).toBe(404);
    expect((await call(account, { method: 'DELETE', url: `/v1/webhooks/${data.id}` })).statusCode).toBe(404);
    expect(await countRows(account)).toBe(0);
  });

  it('refuses an unknown query parameter on every route with 400 VALIDATION_ERROR naming it, and changes nothing', async () => {
    const account = newAccount();
    const { data } = (await create(account, { url: url(), events: ['case.new'] })).json();
    const routes: Array<[InjectOptions['method'], string, object | undefined]> = [
      ['POST', '/v1/webhooks', { url: url('/other'), events: ['case.new'] }],
      ['GET', `/v1/webhooks/${data.id}`, undefined],
      ['PATCH', `/v1/webhooks/${data.id}`, { is_active: false }],
      ['DELETE', `/v1/webhooks/${data.id}`, undefined],
      ['POST', `/v1/webhooks/${data.id}/test`, undefined],
      ['POST', `/v1/webhooks/${data.id}/rotate-secret`, undefined],
      ['POST', `/v1/webhooks/${data.id}/deliveries/dlv_${randomUUID()}/retry`, undefined],
    ];
    for (const [method, path, payload] of routes) {
      const res = await call(account, { method, url: `${path}?dry_run=1`, ...(payload ? { payload } : {}) });
      expectValidationError(res, ['dry_run']);
    }
    const after = (await get(account, data.id)).json().data;
    expect(after).toEqual({ ...data, secret: after.secret });
    expect(after.secret).toBe(`whsec_********${data.secret.slice(-4)}`);
    expect(after.is_active).toBe(true);
    expect(await countRows(account)).toBe(1);
    const { rows } = await ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1', [
      data.id,
    ]);
    expect(rows[0]?.n).toBe(0);
  });

  it("answers 404 NOT_FOUND for another account's id, an unknown id and a malformed id, for every verb", async () => {
    const owner = newAccount();
    const intruder = newAccount();
    const { data } = (await create(owner, { url: url(), events: ['case.new'] })).json();
    for (const id of [data.id, `wh_${randomUUID()}`, 'wh_nope', randomUUID(), data.id.toUpperCase()]) {
      for (const [method, payload] of [
        ['GET', undefined],
        ['PATCH', { is_active: false }],
        ['PATCH', {}],
        ['DELETE', undefined],
      ] as const) {
        const res = await call(intruder, { method, url: `/v1/webhooks/${id}`, ...(payload ? { payload } : {}) });
        expect(res.statusCode, `${method} ${id}`).toBe(404);
        expect(res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'No such webhook subscription.' } });
      }
    }
    expect((await get(owner, data.id)).json().data.is_active).toBe(true);
  });
});

describe('authentication, Pro gating and HTTP conventions', () => {
  const verbs = (id: string): Array<[string, InjectOptions]> => [
    ['POST', { method: 'POST', url: '/v1/webhooks', payload: { url: url(), events: ['case.new'] } }],
    ['GET list', { method: 'GET', url: '/v1/webhooks' }],
    ['GET', { method: 'GET', url: `/v1/webhooks/${id}` }],
    ['PATCH', { method: 'PATCH', url: `/v1/webhooks/${id}`, payload: { is_active: false } }],
    ['DELETE', { method: 'DELETE', url: `/v1/webhooks/${id}` }],
  ];

  it('answers 403 FORBIDDEN with required_tier to a Free account on all five verbs', async () => {
    const account = newAccount();
    for (const [name, options] of verbs(`wh_${randomUUID()}`)) {
      const res = await call(account, options, 'free');
      expect(res.statusCode, name).toBe(403);
      expect(res.json()).toEqual({
        error: {
          code: 'FORBIDDEN',
          message: 'Webhooks are available on the Pro tier and above. Upgrade the account to use them.',
          details: { required_tier: 'pro', tier: 'free' },
        },
      });
    }
    expect(await countRows(account)).toBe(0);
  });

  it('answers 401 UNAUTHORIZED without a valid signed account header, on every route', async () => {
    const forged = `${Buffer.from(JSON.stringify({ account_id: 'a', tier: 'pro', tier_rank: 1, exp: Date.now() + 60_000 })).toString('base64url')}.AAAA`;
    for (const headers of [{}, { 'x-fcd-account': 'garbage' }, { 'x-fcd-account': forged }]) {
      for (const [name, options] of verbs(`wh_${randomUUID()}`)) {
        const res = await app.inject({ ...options, headers });
        expect(res.statusCode, name).toBe(401);
        expect(res.json().error.code).toBe('UNAUTHORIZED');
      }
    }
  });

  it('refuses a captured header replayed to another method, path or service, and writes nothing', async () => {
    const account = newAccount();
    const captured = asAccount(account, { method: 'GET', url: '/v1/webhooks?limit=1' });
    expect((await app.inject({ method: 'GET', url: '/v1/webhooks?limit=1', headers: captured })).statusCode).toBe(200);
    const replays: InjectOptions[] = [
      { method: 'POST', url: '/v1/webhooks?limit=1', payload: { url: url(), events: ['case.new'] } },
      { method: 'POST', url: '/v1/webhooks', payload: { url: url(), events: ['case.new'] } },
      { method: 'GET', url: '/v1/webhooks' },
      { method: 'GET', url: '/v1/webhooks?limit=2' },
      { method: 'GET', url: `/v1/webhooks/wh_${randomUUID()}` },
    ];
    for (const options of replays) {
      const res = await app.inject({ ...options, headers: captured });
      expect(res.statusCode, `${options.method} ${options.url}`).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
    // The same request, signed for the facility service.
    const forFacility = internalAuth.sign(
      { account_id: account, tier: 'pro', tier_rank: 1 },
      { audience: 'facility', method: 'POST', path: '/v1/webhooks' },
    );
    const res = await app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: { 'x-fcd-account': forFacility },
      payload: { url: url(), events: ['case.new'] },
    });
    expect(res.statusCode).toBe(401);
    expect(await countRows(account)).toBe(0);
  });

  it('refuses a header older than its few seconds of life', async () => {
    const account = newAccount();
    const old = new InternalAuth(INTERNAL_SECRET, undefined, new ManualClock(Date.now() - 5_100));
    const stale = old.sign(
      { account_id: account, tier: 'pro', tier_rank: 1 },
      { audience: 'webhook', method: 'GET', path: '/v1/webhooks' },
    );
    expect((await app.inject({ method: 'GET', url: '/v1/webhooks', headers: { 'x-fcd-account': stale } })).statusCode).toBe(401);
  });

  it('answers 405 with Allow for a known path and a wrong method, and 404 for unknown paths', async () => {
    const account = newAccount();
    const put = await call(account, { method: 'PUT', url: `/v1/webhooks/wh_${randomUUID()}`, payload: {} });
    expect(put.statusCode).toBe(405);
    expect(put.headers.allow).toBe('GET, PATCH, DELETE, HEAD');
    expect(put.json().error.code).toBe('METHOD_NOT_ALLOWED');
    const del = await call(account, { method: 'DELETE', url: '/v1/webhooks' });
    expect(del.statusCode).toBe(405);
    expect(del.headers.allow).toBe('GET, POST, HEAD');
    const unknown = await call(account, { method: 'GET', url: '/v1/webhooks/x/y' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('NOT_FOUND');
  });

  it('echoes X-Request-Id, and turns bodies that are not JSON objects into 400 BAD_REQUEST / 415', async () => {
    const account = newAccount();
    const res = await call(account, { method: 'GET', url: '/v1/webhooks', headers: { 'x-request-id': 'req-abc-123' } });
    expect(res.headers['x-request-id']).toBe('req-abc-123');
    const notJson = await call(account, {
      method: 'POST',
      url: '/v1/webhooks',
      payload: '{"url":',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().error.code).toBe('BAD_REQUEST');
    const array = await call(account, {
      method: 'POST',
      url: '/v1/webhooks',
      payload: '[]',
      headers: { 'content-type': 'application/json' },
    });
    expect(array.json().error.code).toBe('BAD_REQUEST');
    const text = await call(account, { method: 'POST', url: '/v1/webhooks', payload: 'hi', headers: { 'content-type': 'text/plain' } });
    expect(text.statusCode).toBe(415);
  });
});

describe('dependencies', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After and writes nothing when the facility service is down', async () => {
    const down = await testApp(ctx, { facilityUrl: 'http://127.0.0.1:9' });
    try {
      const account = newAccount();
      const res = await down.app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: asAccount(account, { method: 'POST', url: '/v1/webhooks' }),
        payload: { url: url(), events: ['case.new'], facility_ids: [F1] },
      });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('2');
      expect(res.json().error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { dependency: 'facility' } });
      expect(await countRows(account)).toBe(0);
      // Without facility ids the facility service is not needed.
      const ok = await down.app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: asAccount(account, { method: 'POST', url: '/v1/webhooks' }),
        payload: { url: url(), events: ['case.new'] },
      });
      expect(ok.statusCode).toBe(201);
      const ready = await down.app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().error.details.checks).toMatchObject({ postgres: { status: 'up' }, facility: { status: 'down' } });
    } finally {
      await down.app.close();
    }
  });

  it('answers 503 when the facility service answers with an error', async () => {
    const account = newAccount();
    stub.failWith = 500;
    try {
      const res = await create(account, { url: url(), events: ['case.new'], facility_ids: [F1] });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('2');
    } finally {
      stub.failWith = undefined;
    }
    expect(await countRows(account)).toBe(0);
  });

  it('serves /healthz and /readyz without authentication', async () => {
    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ data: { status: 'ok' } });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ data: { status: 'ready', checks: { postgres: { status: 'up' }, facility: { status: 'up' } } } });
  });
});

describe('WEBHOOK_ALLOW_PRIVATE_URLS', () => {
  it('is off by default; when on, http and loopback destinations are accepted, cloud metadata still is not', async () => {
    const dev = await testApp(ctx, { facilityUrl: stub.url, allowPrivate: true });
    try {
      const account = newAccount();
      const post = (target: string) =>
        dev.app.inject({
          method: 'POST',
          url: '/v1/webhooks',
          headers: asAccount(account, { method: 'POST', url: '/v1/webhooks' }),
          payload: { url: target, events: ['case.new'] },
        });
      expect((await post('http://127.0.0.1:3000/hook')).statusCode).toBe(201);
      expect((await post('https://[::1]:8443/hook')).statusCode).toBe(201);
      expect((await post(`http://${PRIVATE_HOST}/hook`)).statusCode).toBe(201);
      expectValidationError(await post('http://169.254.169.254/latest/meta-data'), [['url', /metadata/]]);
      // The production default refuses the same URL.
      expectValidationError(await create(newAccount(), { url: 'http://127.0.0.1:3000/hook', events: ['case.new'] }), [['url', /https/]]);
    } finally {
      await dev.app.close();
    }
  });
});
