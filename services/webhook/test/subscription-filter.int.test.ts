import { randomUUID } from 'node:crypto';
import { ManualClock, withTransaction } from '@fcd/service-kit';
import { EventLog, eventFacilityIds } from '@fcd/webhooks';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  asAccount,
  createContext,
  type FacilityStub,
  newAccount,
  PUBLIC_HOST,
  startFacilityStub,
  type TestContext,
  target,
  testApp,
} from './helpers';

/**
 * `filter` on POST and PATCH /v1/webhooks (docs/webhooks.md "Filters"): stored, shown, cleared,
 * validated; and GET /v1/events?subscription_id=, the events a subscription matches.
 */
let ctx: TestContext;
let stub: FacilityStub;
let app: FastifyInstance;
const clock = new ManualClock(Date.parse('2026-11-22T08:15:30.123Z'));

beforeAll(async () => {
  ctx = await createContext('webhook_filter');
  stub = await startFacilityStub([]);
  ({ app } = await testApp(ctx, { facilityUrl: stub.url, clock }));
});

afterAll(async () => {
  await app?.close();
  await stub?.close();
  await ctx?.close();
});

const call = (accountId: string, options: InjectOptions): Promise<LightMyRequestResponse> =>
  app.inject({ ...options, headers: asAccount(accountId, target(options), 'pro') });
const create = (accountId: string, payload: object) => call(accountId, { method: 'POST', url: '/v1/webhooks', payload });
const patch = (accountId: string, id: string, payload: object) => call(accountId, { method: 'PATCH', url: `/v1/webhooks/${id}`, payload });
const base = { url: `https://${PUBLIC_HOST}/hook`, events: ['violation.new', 'case.new'] };

function fieldsOf(res: LightMyRequestResponse): Array<{ field: string; message: string }> {
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json().error.code).toBe('VALIDATION_ERROR');
  return res.json().error.details.fields;
}

describe('subscription filter', () => {
  it('is null when omitted, stored in canonical case, replaced and cleared by PATCH', async () => {
    const account = newAccount();
    const plain = await create(account, base);
    expect(plain.statusCode, plain.body).toBe(201);
    expect(plain.json().data.filter).toBeNull();

    const res = await create(account, { ...base, filter: { epa_regions: ['05'], states: ['oh', 'PA'], severities: ['Significant'] } });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().data.id as string;
    expect(res.json().data.filter).toEqual({ states: ['OH', 'PA'], severities: ['significant'], epa_regions: ['05'] });
    const read = await call(account, { method: 'GET', url: `/v1/webhooks/${id}` });
    expect(read.json().data.filter).toEqual({ states: ['OH', 'PA'], severities: ['significant'], epa_regions: ['05'] });

    const replaced = await patch(account, id, { filter: { programs: ['caa'] } });
    expect(replaced.statusCode, replaced.body).toBe(200);
    expect(replaced.json().data.filter).toEqual({ programs: ['CAA'] });
    const cleared = await patch(account, id, { filter: null });
    expect(cleared.json().data.filter).toBeNull();
    const kept = await patch(account, id, { is_active: true });
    expect(kept.json().data.filter).toBeNull();
  });

  it('names every bad value, and writes nothing', async () => {
    const account = newAccount();
    const res = await create(account, {
      ...base,
      filter: { states: ['TX', 'Texas'], programs: [], severities: ['high'], epa_regions: ['6', '06', '06'], counties: ['Harris'] },
    });
    // Ordered as every VALIDATION_ERROR is (domain/validation.ts mergeProblems): by field, then index.
    expect(fieldsOf(res)).toEqual([
      { field: 'filter.counties', message: 'is not a known field' },
      { field: 'filter.programs', message: 'must not be empty; leave it out to not filter on it' },
      { field: 'filter.severities[0]', message: 'must be one of minor, moderate, significant' },
      { field: 'filter.epa_regions[0]', message: 'must be an EPA region, two digits from "01" to "10"' },
      { field: 'filter.states[1]', message: 'must be a USPS state code (two letters, e.g. "TX")' },
      { field: 'filter.epa_regions[2]', message: 'is a duplicate of filter.epa_regions[1]' },
    ]);
    expect(fieldsOf(await create(account, { ...base, filter: {} }))).toEqual([
      { field: 'filter', message: 'must list at least one of states, programs, severities, epa_regions; send null for no filter' },
    ]);
    expect(fieldsOf(await create(account, { ...base, filter: { states: Array.from({ length: 61 }, () => 'TX') } }))[0]).toEqual({
      field: 'filter.states',
      message: 'must list at most 60 values (got 61)',
    });
    expect(fieldsOf(await create(account, { ...base, filter: { states: 'TX' } }))).toEqual([
      { field: 'filter.states', message: 'must be array' },
    ]);
    const list = await call(account, { method: 'GET', url: '/v1/webhooks' });
    expect(list.json().data).toEqual([]);
  });
});

describe('GET /v1/events?subscription_id=', () => {
  const state = (code: string) => ({ id: randomUUID(), state: code, epa_region: '05', programs: ['CAA'] });
  function statusChanged(facility: ReturnType<typeof state>) {
    const e = {
      id: `evt_${randomUUID()}`,
      type: 'facility.status_changed',
      created_at: new Date(clock.now()).toISOString(),
      data: { facility, previous_status: 'no_violation' },
    };
    return { id: e.id, type: e.type, body: JSON.stringify(e), facilityIds: eventFacilityIds(e), createdAt: clock.now() };
  }
  const list = (account: string, query: string) => call(account, { method: 'GET', url: `/v1/events?${query}` });

  it("lists only the events the caller's subscription matches, by its filter; 404 for another's or an unknown one; 400 for a malformed id", async () => {
    const account = newAccount();
    const ohio = await create(account, { ...base, events: ['facility.status_changed'], filter: { states: ['OH'] } });
    const all = await create(account, { ...base, events: ['facility.status_changed'] });
    const events = [statusChanged(state('OH')), statusChanged(state('TX')), statusChanged(state('OH'))];
    await withTransaction(ctx.pool, (client) => EventLog.append(client, events, clock.now()));
    const ids = (res: LightMyRequestResponse) => {
      expect(res.statusCode, res.body).toBe(200);
      return (res.json().data as Array<{ id: string }>).map((e) => e.id).filter((id) => events.some((e) => e.id === id));
    };
    expect(ids(await list(account, `subscription_id=${ohio.json().data.id}&limit=100`))).toEqual([events[0]?.id, events[2]?.id]);
    expect(ids(await list(account, `subscription_id=${all.json().data.id}&limit=100`))).toEqual(events.map((e) => e.id));

    const notFound = { error: { code: 'NOT_FOUND', message: 'No such webhook subscription.' } };
    const foreign = await list(newAccount(), `subscription_id=${ohio.json().data.id}`);
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toEqual(notFound);
    const unknown = await list(account, `subscription_id=wh_${randomUUID()}`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual(notFound);
    for (const bad of ['wh_nope', `dlv_${randomUUID()}`, `wh_${randomUUID().toUpperCase()}`]) {
      const res = await list(account, `subscription_id=${bad}`);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_ERROR');
      expect(res.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual(['subscription_id']);
    }
  });
});
