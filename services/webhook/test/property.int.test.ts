import { randomUUID } from 'node:crypto';
import { ERROR_STATUS } from '@fcd/service-kit';
import { EVENT_TYPES, type Resolver } from '@fcd/webhooks';
import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asAccount, createContext, type FacilityStub, newAccount, startFacilityStub, type TestContext, testApp } from './helpers';

/**
 * Any JSON body, valid or not, gets a 2xx or a 4xx with the error envelope (docs/api.md "Errors"):
 * never a 5xx. The generators lean towards almost-valid bodies so that both
 * the success path and each validation rule are exercised.
 */

const KNOWN = [randomUUID(), randomUUID(), randomUUID()];
/** Every name resolves: public, except names mentioning "internal" (private). */
const resolver: Resolver = async (hostname) => [{ address: hostname.includes('internal') ? '10.0.0.7' : '93.184.215.14', family: 4 }];

let ctx: TestContext;
let stub: FacilityStub;
let app: FastifyInstance;
const patchAccount = newAccount();
const patchIds: string[] = [];

beforeAll(async () => {
  ctx = await createContext('webhook_property');
  stub = await startFacilityStub(KNOWN);
  ({ app } = await testApp(ctx, { facilityUrl: stub.url, resolver }));
  for (let i = 0; i < 3; i += 1) {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: asAccount(patchAccount, { method: 'POST', url: '/v1/webhooks' }),
      payload: { url: 'https://hooks.example.com/p', events: ['case.new'] },
    });
    patchIds.push(res.json().data.id);
  }
});

afterAll(async () => {
  await app?.close();
  await stub?.close();
  await ctx?.close();
});

const urlArb = fc.oneof(
  fc.constant('https://hooks.example.com/fcd'),
  fc.webUrl({ validSchemes: ['https', 'http'], withQueryParameters: true, withFragments: true }),
  fc.constantFrom(
    'https://127.0.0.1/',
    'https://[::1]/',
    'https://169.254.169.254/',
    'https://internal.example.com/',
    'https://u:p@hooks.example.com/',
    'https://10.0.0.5/',
    `https://hooks.example.com/${'x'.repeat(2100)}`,
    '',
  ),
  fc.string(),
  fc.jsonValue(),
);
const eventsArb = fc.oneof(
  fc.subarray([...EVENT_TYPES], { minLength: 1 }),
  fc.array(fc.oneof(fc.constantFrom(...EVENT_TYPES), fc.string()), { maxLength: 6 }),
  fc.jsonValue(),
);
const facilityIdsArb = fc.oneof(
  fc.constant(null),
  fc.subarray(KNOWN, { minLength: 1 }),
  fc.array(fc.oneof(fc.constantFrom(...KNOWN), fc.uuid(), fc.string(), fc.constant(KNOWN[0]?.toUpperCase())), { maxLength: 8 }),
  fc.jsonValue(),
);
const extraArb = fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 });

const validCreateArb = fc.record(
  {
    url: fc.constantFrom('https://hooks.example.com/fcd', 'https://93.184.215.14/x'),
    events: fc.subarray([...EVENT_TYPES], { minLength: 1 }),
    facility_ids: fc.oneof(fc.constant(null), fc.subarray(KNOWN, { minLength: 1 })),
  },
  { requiredKeys: ['url', 'events'] },
);
const createBodyArb = fc.oneof(
  { weight: 2, arbitrary: validCreateArb },
  {
    weight: 4,
    arbitrary: fc.record({ url: urlArb, events: eventsArb, facility_ids: facilityIdsArb }, { requiredKeys: ['url', 'events'] }),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.record({ url: urlArb, events: eventsArb, facility_ids: facilityIdsArb }, { requiredKeys: [] }), extraArb)
      .map(([a, b]) => ({ ...b, ...a })),
  },
  { weight: 1, arbitrary: fc.jsonValue() },
);
const patchBodyArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record(
      { url: urlArb, events: eventsArb, facility_ids: facilityIdsArb, is_active: fc.oneof(fc.boolean(), fc.jsonValue()) },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.tuple(fc.record({ is_active: fc.boolean() }), extraArb).map(([a, b]) => ({ ...b, ...a })) },
  { weight: 1, arbitrary: fc.jsonValue() },
);

const CODES = Object.keys(ERROR_STATUS);

function expectEnvelope(res: LightMyRequestResponse, success: number): void {
  if (res.statusCode === success) {
    const body = res.json();
    expect(body.data.id).toMatch(/^wh_/);
    return;
  }
  expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, res.body).toBeLessThan(500);
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(CODES).toContain(body.error.code);
  expect(ERROR_STATUS[body.error.code as keyof typeof ERROR_STATUS]).toBe(res.statusCode);
  expect(typeof body.error.message).toBe('string');
  if (body.error.code === 'VALIDATION_ERROR') {
    expect(body.error.details.fields.length).toBeGreaterThan(0);
    for (const f of body.error.details.fields) {
      expect(typeof f.field).toBe('string');
      expect(typeof f.message).toBe('string');
    }
  }
}

describe('property: webhook bodies never cause a 5xx', () => {
  it('POST /v1/webhooks answers 201 or a 4xx envelope for any JSON body', async () => {
    let created = 0;
    await fc.assert(
      fc.asyncProperty(createBodyArb, async (body) => {
        const res = await app.inject({
          method: 'POST',
          url: '/v1/webhooks',
          headers: { ...asAccount(newAccount(), { method: 'POST', url: '/v1/webhooks' }), 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
        expectEnvelope(res, 201);
        if (res.statusCode === 201) created += 1;
      }),
      { numRuns: 200 },
    );
    // The generators do reach the success path.
    expect(created).toBeGreaterThan(0);
  });

  it('PATCH /v1/webhooks/{id} answers 200 or a 4xx envelope for any JSON body', async () => {
    let updated = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...patchIds, `wh_${randomUUID()}`), patchBodyArb, async (id, body) => {
        const res = await app.inject({
          method: 'PATCH',
          url: `/v1/webhooks/${id}`,
          headers: { ...asAccount(patchAccount, { method: 'PATCH', url: `/v1/webhooks/${id}` }), 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
        expectEnvelope(res, 200);
        if (res.statusCode === 200) updated += 1;
      }),
      { numRuns: 200 },
    );
    expect(updated).toBeGreaterThan(0);
  });
});
