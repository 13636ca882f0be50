import { randomUUID } from 'node:crypto';
import { type ApiStack, startApiStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_KEY } from './helpers';

/**
 * The facility-existence check against the real facility service, through the
 * gateway: gateway → webhook → facility (POST /internal/v1/facilities/existing).
 */

let api: ApiStack;
let gateway: string;

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
  api = await startApiStack({ label: 'webhook_facility_e2e', webhookSecretKey: SECRET_KEY.toString('base64') });
  gateway = api.gateway;
  const ingest = await api.ingest({
    facilities: [
      { registry_id: '110000000001', name: 'Webhook E2E Plant', state: 'VT', compliance_status: 'no_violation', programs: ['CAA'] },
    ],
  });
  expect(ingest.status, ingest.text).toBe(200);
}, 90_000);

afterAll(async () => {
  await api?.stop();
});

describe('webhooks with the real facility service', () => {
  it('accepts an existing facility id and names an unknown one', async () => {
    const { apiKey } = await api.createAccount('pro');
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
    const { apiKey } = await api.createAccount('pro');
    await api.facility.stop();
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
