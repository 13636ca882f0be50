import { type ApiStack, startApiStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, FcdApiError, RateLimitError } from '../src/index.js';

/**
 * The README's quick start with `@fcd/client`, against the real stack (usage + gateway + the
 * facility and webhook services on this test's own database): the usage report, a paginated walk of
 * `state=TX` that sees every facility once, a webhook created, and a Free account's 429 surfaced as a
 * typed error with `retryAfter`.
 */

const SECRET_KEY = Buffer.alloc(32, 11).toString('base64');
const HOOK_URL = 'https://93.184.215.14/fcd-hooks';
const TX = Array.from({ length: 7 }, (_, i) => `11000000${String(7001 + i)}`);
const OTHER = ['110000008001', '110000008002'];

let stack: ApiStack;
let proKey: string;

beforeAll(async () => {
  stack = await startApiStack({ label: 'client_quickstart', webhookSecretKey: SECRET_KEY });
  const ingest = await stack.ingest({
    facilities: [
      ...TX.map((registry_id, i) => ({ registry_id, name: `Quickstart Plant ${i + 1}`, state: 'TX', compliance_status: 'no_violation' })),
      { registry_id: OTHER[0], name: 'Quickstart Mill', state: 'OK', compliance_status: 'violation' },
      { registry_id: OTHER[1], name: 'Quickstart Works', state: 'LA', compliance_status: 'no_violation' },
    ],
  });
  expect(ingest.status, ingest.text).toBe(200);
  expect(JSON.parse(ingest.text).data.errors, ingest.text).toEqual([]);
  proKey = (await stack.createAccount('pro')).apiKey;
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('the quick start with @fcd/client', () => {
  it('reads the usage report', async () => {
    const fcd = createClient({ baseUrl: stack.gateway, apiKey: proKey });
    const { data: usage, rateLimit } = await fcd.GET('/v1/account/usage');
    expect(usage.data).toMatchObject({ tier: 'pro', daily_limit: 25_000, today: { request_count: 1, remaining: 24_999 } });
    expect(rateLimit).toEqual({ limit: 25_000, remaining: 24_999, reset: new Date(usage.data.today.resets_at) });
    expect(fcd.rateLimit).toEqual(rateLimit);
  });

  it('walks state=TX page by page and sees every TX facility exactly once', async () => {
    const fcd = createClient({ baseUrl: stack.gateway, apiKey: proKey });
    const pages: string[][] = [];
    for await (const page of fcd.pages('/v1/facilities', { params: { query: { state: 'TX', limit: 3 } } })) {
      pages.push(page.data.data.map((f) => f.registry_id));
    }
    expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
    expect(pages.flat().sort()).toEqual([...TX].sort());

    const seen: Array<[string, string]> = [];
    for await (const facility of fcd.items('/v1/facilities', { params: { query: { state: 'TX', limit: 2 } } })) {
      seen.push([facility.registry_id, facility.state]);
    }
    expect(seen.map(([id]) => id).sort()).toEqual([...TX].sort());
    expect(new Set(seen.map(([id]) => id)).size).toBe(TX.length);
    expect(seen.every(([, state]) => state === 'TX')).toBe(true);
  });

  it('creates a webhook and reads it back', async () => {
    const fcd = createClient({ baseUrl: stack.gateway, apiKey: proKey });
    const created = await fcd.POST('/v1/webhooks', { body: { url: HOOK_URL, events: ['violation.new', 'case.updated'] } });
    expect(created.response.status).toBe(201);
    expect(created.data.data).toMatchObject({
      url: HOOK_URL,
      events: ['violation.new', 'case.updated'],
      facility_ids: null,
      is_active: true,
    });
    expect(created.data.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const read = await fcd.GET('/v1/webhooks/{webhook_id}', { params: { path: { webhook_id: created.data.data.id } } });
    expect(read.data.data).toMatchObject({ id: created.data.data.id, url: HOOK_URL, is_active: true });
    // Read back, the secret is masked: only the 201 of the create shows it.
    expect(read.data.data.secret).toBe(`whsec_********${created.data.data.secret.slice(-4)}`);
  });

  it('surfaces a Free account over its daily limit as RateLimitError with retryAfter, without waiting for it', async () => {
    const { apiKey } = await stack.createAccount('free');
    const waits: number[] = [];
    const fcd = createClient({ baseUrl: stack.gateway, apiKey, sleep: async (ms) => void waits.push(ms) });
    for (let i = 0; i < 100; i++) await fcd.GET('/v1/account/usage');
    expect(fcd.rateLimit?.remaining).toBe(0);

    const before = Date.now();
    const error = await fcd.GET('/v1/facilities', { params: { query: { state: 'TX' } } }).catch((e: unknown) => e);
    const after = Date.now();
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toBeInstanceOf(FcdApiError);
    const e = error as RateLimitError;
    expect([e.status, e.code, e.details?.limit, e.details?.remaining]).toEqual([429, 'RATE_LIMIT_EXCEEDED', 100, 0]);
    expect(e.message).toBe(`Daily request limit of 100 requests exceeded. The limit resets at ${e.details?.resets_at}.`);
    // Retry-After is the seconds to the reset (the next UTC midnight), as the response says.
    const reset = Date.parse(String(e.details?.resets_at));
    expect(e.resetsAt).toEqual(new Date(reset));
    expect(e.retryAfter).toBe(Number(e.response.headers.get('retry-after')));
    expect(e.retryAfter).toBeGreaterThanOrEqual(Math.floor((reset - after) / 1000));
    expect(e.retryAfter).toBeLessThanOrEqual(Math.ceil((reset - before) / 1000));
    expect(e.rateLimit).toEqual({ limit: 100, remaining: 0, reset: new Date(reset) });
    expect(e.requestId).toMatch(/^req_/);
    // Hours away: beyond the 30 s cap, so the client did not wait.
    expect(waits).toEqual([]);
  });
});
