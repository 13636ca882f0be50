import { randomUUID } from 'node:crypto';
import {
  createTestDatabase,
  type ServiceProcess,
  type Stack,
  startService,
  startStack,
  TEST_INTERNAL_AUTH_SECRET,
  type TestDatabase,
  testUrls,
} from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_KEY } from './helpers';

/**
 * The facility-existence check against the real facility service, through the
 * gateway: gateway → webhook → facility (POST /internal/v1/facilities/existing).
 */

const INGEST_TOKEN = 'webhook-e2e-ingest-token-0123456789abcdef';
let db: TestDatabase;
let facility: ServiceProcess;
let webhook: ServiceProcess;
let stack: Stack;
let gateway: string;
let facilityBase: string;
const portOf = (p: ServiceProcess) => p.logs().find((l) => l.msg === 'ready')?.port as number;

async function call(path: string, key: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? (JSON.parse(text) as any) : undefined };
}

beforeAll(async () => {
  db = await createTestDatabase('webhook_facility_e2e');
  facility = await startService('facility', {
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: db.url,
    NATS_URL: testUrls.nats,
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    INGEST_TOKEN,
    RELAY_ENABLED: 'false',
  });
  facilityBase = `http://127.0.0.1:${portOf(facility)}`;
  webhook = await startService('webhook', {
    PORT: '0',
    METRICS_PORT: '0',
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    WEBHOOK_SECRET_KEY: SECRET_KEY.toString('base64'),
    FACILITY_URL: facilityBase,
  });
  stack = await startStack({
    label: 'webhook_facility_e2e',
    database: db,
    facilityUrl: facilityBase,
    webhookUrl: `http://127.0.0.1:${portOf(webhook)}`,
  });
  gateway = stack.gatewayUrls[0] as string;
  const ingest = await fetch(`${facilityBase}/internal/v1/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      facilities: [
        { registry_id: '110000000001', name: 'Webhook E2E Plant', state: 'VT', compliance_status: 'no_violation', programs: ['CAA'] },
      ],
    }),
  });
  expect(ingest.status, await ingest.text()).toBe(200);
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await webhook?.stop();
  await facility?.stop();
  await db?.drop();
});

describe('webhooks with the real facility service', () => {
  it('accepts an existing facility id and names an unknown one', async () => {
    const { apiKey } = await stack.createAccount('pro');
    const listed = await call('/v1/facilities?state=VT', apiKey);
    expect(listed.status, listed.text).toBe(200);
    const facilityId = listed.body.data[0].id as string;
    const unknown = randomUUID();

    const ok = await call('/v1/webhooks', apiKey, {
      method: 'POST',
      body: { url: 'https://93.184.215.14/hook', events: ['facility.status_changed'], facility_ids: [facilityId] },
    });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.data.facility_ids).toEqual([facilityId]);

    const bad = await call('/v1/webhooks', apiKey, {
      method: 'POST',
      body: { url: 'https://93.184.215.14/hook', events: ['violation.new'], facility_ids: [facilityId, unknown] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.fields).toEqual([{ field: 'facility_ids[1]', message: `no facility with id ${unknown} exists` }]);
  });

  it('answers 503 with Retry-After and writes nothing when the facility service is down', async () => {
    const { apiKey } = await stack.createAccount('pro');
    await facility.stop();
    const res = await call('/v1/webhooks', apiKey, {
      method: 'POST',
      body: { url: 'https://93.184.215.14/hook', events: ['violation.new'], facility_ids: [randomUUID()] },
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect((await call('/v1/webhooks', apiKey)).body.data).toEqual([]);
  });
});
