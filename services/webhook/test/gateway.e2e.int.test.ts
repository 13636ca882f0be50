import {
  createTestDatabase,
  type ServiceProcess,
  type Stack,
  startService,
  startStack,
  TEST_INTERNAL_AUTH_SECRET,
  type TestDatabase,
} from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FacilityStub, SECRET_KEY, startFacilityStub } from './helpers';

/**
 * Through the gateway against real services: usage (keys, tiers, metering),
 * gateway (authentication, routing) and the webhook service, on one database.
 * The facility service is the stub implementing its existence endpoint.
 */

const F1 = '11111111-1111-4111-8111-111111111111';
let db: TestDatabase;
let stub: FacilityStub;
let webhook: ServiceProcess;
let stack: Stack;
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
  db = await createTestDatabase('webhook_e2e');
  stub = await startFacilityStub([F1]);
  webhook = await startService('webhook', {
    PORT: '0',
    METRICS_PORT: '0',
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    WEBHOOK_SECRET_KEY: SECRET_KEY.toString('base64'),
    FACILITY_URL: stub.url,
  });
  const port = webhook.logs().find((l) => l.msg === 'ready')?.port as number;
  stack = await startStack({ label: 'webhook_e2e', database: db, webhookUrl: `http://127.0.0.1:${port}` });
  gateway = stack.gatewayUrls[0] as string;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await webhook?.stop();
  await stub?.close();
  await db?.drop();
});

describe('webhooks through the gateway', () => {
  it('lets a Pro account create, read, list, update and delete; the secret is shown once', async () => {
    const { apiKey } = await stack.createAccount('pro');
    const created = await call('/v1/webhooks', apiKey, {
      method: 'POST',
      body: { url: 'https://93.184.215.14/hook', events: ['violation.new', 'case.new'], facility_ids: [F1] },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('x-ratelimit-limit')).toBe('25000');
    const sub = created.body.data;
    expect(sub).toMatchObject({
      url: 'https://93.184.215.14/hook',
      events: ['violation.new', 'case.new'],
      facility_ids: [F1],
      is_active: true,
    });
    expect(sub.id).toMatch(/^wh_[0-9a-f-]{36}$/);
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const redacted = `whsec_********${sub.secret.slice(-4)}`;

    const read = await call(`/v1/webhooks/${sub.id}`, apiKey);
    expect(read.body.data.secret).toBe(redacted);
    const list = await call('/v1/webhooks', apiKey);
    expect(list.body).toEqual({ data: [{ ...sub, secret: redacted }], pagination: { limit: 25, next_cursor: null, has_more: false } });
    const off = await call(`/v1/webhooks/${sub.id}`, apiKey, { method: 'PATCH', body: { is_active: false } });
    expect(off.body.data).toMatchObject({ is_active: false, deactivation_reason: 'manual', secret: redacted });
    const on = await call(`/v1/webhooks/${sub.id}`, apiKey, { method: 'PATCH', body: { is_active: true } });
    expect(on.body.data).toMatchObject({ is_active: true, deactivated_at: null, deactivation_reason: null });
    const deleted = await call(`/v1/webhooks/${sub.id}`, apiKey, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect((await call(`/v1/webhooks/${sub.id}`, apiKey)).status).toBe(404);
  });

  it("passes validation errors through with every field named, and hides other accounts' subscriptions", async () => {
    const owner = await stack.createAccount('pro');
    const other = await stack.createAccount('enterprise');
    const bad = await call('/v1/webhooks', owner.apiKey, {
      method: 'POST',
      body: { url: 'https://10.0.0.5/', events: ['nope'], facility_ids: [] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    expect(bad.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['url', 'events[0]', 'facility_ids']);
    const { data } = (
      await call('/v1/webhooks', owner.apiKey, { method: 'POST', body: { url: 'https://93.184.215.14/x', events: ['case.new'] } })
    ).body;
    for (const [method, body] of [['GET'], ['PATCH', { is_active: false }], ['DELETE']] as const) {
      const res = await call(`/v1/webhooks/${data.id}`, other.apiKey, { method, body });
      expect(res.status, method).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
  });

  it('refuses a Free account with 403 FORBIDDEN and required_tier on all five verbs', async () => {
    const { apiKey } = await stack.createAccount('free');
    const id = 'wh_00000000-0000-4000-8000-000000000000';
    for (const [method, path, body] of [
      ['POST', '/v1/webhooks', { url: 'https://93.184.215.14/x', events: ['case.new'] }],
      ['GET', '/v1/webhooks'],
      ['GET', `/v1/webhooks/${id}`],
      ['PATCH', `/v1/webhooks/${id}`, { is_active: false }],
      ['DELETE', `/v1/webhooks/${id}`],
    ] as const) {
      const res = await call(path, apiKey, { method, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'FORBIDDEN', details: { required_tier: 'pro', tier: 'free' } });
      expect(res.headers.get('x-ratelimit-limit')).toBe('100');
    }
  });
});
