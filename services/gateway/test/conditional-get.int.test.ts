import { randomBytes } from 'node:crypto';
import { type ApiStack, eventually, startApiStack, type TestAccount } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Conditional GETs through the whole stack (gateway, usage, facility, webhook; real Postgres and
 * Redis): strong ETags, 304 without a body and without a count, the rate-limit headers on it.
 */
let stack: ApiStack;
let free: TestAccount;
let facilityId: string;

const REGISTRY_ID = '110000020001';

async function get(path: string, key: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await fetch(`${stack.gateway}${path}`, { method, headers: { 'x-api-key': key, ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

/** The account's stored count once it reaches n (the usage service flushes every 200 ms in tests). */
async function stored(accountId: string, n: number): Promise<number> {
  return eventually(
    () => stack.storedCount(accountId),
    (c) => c === n,
    10_000,
  );
}

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_conditional', webhookSecretKey: randomBytes(32).toString('base64') });
  const ingested = await stack.ingest({
    facilities: [{ registry_id: REGISTRY_ID, name: 'Etag Works', state: 'RI', compliance_status: 'no_violation' }],
  });
  expect(ingested.status, ingested.text).toBe(200);
  free = await stack.createAccount('free');
  const setup = await stack.createAccount('pro');
  const listed = await get('/v1/facilities?state=RI', setup.apiKey);
  facilityId = JSON.parse(listed.text).data[0].id as string;
}, 90_000);

afterAll(async () => {
  await stack?.stop();
});

describe('conditional GETs', () => {
  it('answers If-None-Match with the current ETag by 304, no body, rate-limit headers, not counted; a change gives 200 and a new ETag', async () => {
    const path = `/v1/facilities/${facilityId}`;
    const first = await get(path, free.apiKey);
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag') as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/); // strong: no W/ prefix
    expect(first.headers.get('cache-control')).toBe('private, max-age=60');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('99');
    expect(await stored(free.accountId, 1)).toBe(1);

    for (let i = 0; i < 5; i++) {
      const again = await get(path, free.apiKey, { 'if-none-match': etag });
      expect(again.status).toBe(304);
      expect(again.text).toBe('');
      expect(again.headers.get('etag')).toBe(etag);
      expect(again.headers.get('cache-control')).toBe('private, max-age=60');
      expect(again.headers.get('x-ratelimit-limit')).toBe('100');
      expect(again.headers.get('x-ratelimit-remaining')).toBe('99');
      expect(again.headers.get('x-ratelimit-reset')).toMatch(/T00:00:00\.000Z$/);
    }
    // A list of tags, and a weak form of the tag, match too (If-None-Match uses the weak comparison).
    expect((await get(path, free.apiKey, { 'if-none-match': `"nope", W/${etag}` })).status).toBe(304);
    // HEAD is conditional as well.
    const head = await get(path, free.apiKey, { 'if-none-match': etag }, 'HEAD');
    expect(head.status).toBe(304);

    // None of the 304s was counted: the next counted request makes the stored count exactly 2.
    const usage = await get('/v1/account/usage', free.apiKey);
    expect(JSON.parse(usage.text).data.today.request_count).toBe(2);
    expect(await stored(free.accountId, 2)).toBe(2);

    // An import changes the facility: the same conditional request is a 200 with a new tag, counted.
    const changed = await stack.ingest({
      facilities: [{ registry_id: REGISTRY_ID, name: 'Etag Works Renamed', state: 'RI', compliance_status: 'violation' }],
    });
    expect(changed.status, changed.text).toBe(200);
    const after = await get(path, free.apiKey, { 'if-none-match': etag });
    expect(after.status).toBe(200);
    expect(JSON.parse(after.text).data.name).toBe('Etag Works Renamed');
    const newTag = after.headers.get('etag') as string;
    expect(newTag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(newTag).not.toBe(etag);
    expect(after.headers.get('x-ratelimit-remaining')).toBe('97');
    expect(await stored(free.accountId, 3)).toBe(3);
    expect((await get(path, free.apiKey, { 'if-none-match': newTag })).status).toBe(304);
  });

  it('gives lists and the usage report ETags; an unchanged usage report is a 304', async () => {
    const pro = await stack.createAccount('pro');
    const list = await get('/v1/facilities?state=RI', pro.apiKey);
    expect(list.status).toBe(200);
    const tag = list.headers.get('etag') as string;
    expect((await get('/v1/facilities?state=RI', pro.apiKey, { 'if-none-match': tag })).status).toBe(304);
    // Another query is another representation.
    const other = await get('/v1/facilities?state=RI&limit=1', pro.apiKey, { 'if-none-match': tag });
    expect(other.status).toBe(200);

    const usage = await get('/v1/account/usage', pro.apiKey);
    expect(usage.headers.get('cache-control')).toBe('private, max-age=0');
    expect(JSON.parse(usage.text).data.today.request_count).toBe(3);
    const usageTag = usage.headers.get('etag') as string;
    // Nothing counted since: the report is unchanged, so 304 (not counted).
    const unchanged = await get('/v1/account/usage', pro.apiKey, { 'if-none-match': usageTag });
    expect(unchanged.status).toBe(304);
    expect(unchanged.headers.get('x-ratelimit-remaining')).toBe(String(25_000 - 3));
    // After a counted request the report differs: 200, counted, and the report includes this request.
    await get('/v1/facilities?state=RI', pro.apiKey);
    const changed = await get('/v1/account/usage', pro.apiKey, { 'if-none-match': usageTag });
    expect(changed.status).toBe(200);
    expect(JSON.parse(changed.text).data.today.request_count).toBe(5);
    expect(changed.headers.get('x-ratelimit-remaining')).toBe(String(25_000 - 5));
    expect(await stored(pro.accountId, 5)).toBe(5);
  });

  it('authenticates a conditional GET like any request, counts its errors, and keeps the daily limit', async () => {
    const anon = await get(`/v1/facilities/${facilityId}`, 'fcd_00000000000000000000000000000000', { 'if-none-match': '*' });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('x-ratelimit-limit')).toBeNull();

    const account = await stack.createAccount('free');
    // A 404 answer to a conditional GET is counted like any other outcome.
    const missing = await get('/v1/facilities/00000000-0000-4000-8000-000000000000', account.apiKey, { 'if-none-match': '"x"' });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-ratelimit-remaining')).toBe('99');
    expect(missing.headers.get('etag')).toBeNull();
    expect(await stored(account.accountId, 1)).toBe(1);

    // A Free account past its limit is refused even when its copy is current (the limit gates every request).
    const first = await get(`/v1/facilities/${facilityId}`, account.apiKey);
    const tag = first.headers.get('etag') as string;
    // Today's live counter (Redis) at the limit.
    const { Redis } = await import('ioredis');
    const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      await redis.set(`${stack.redisPrefix}usage:{${account.accountId}}:${new Date().toISOString().slice(0, 10)}`, '100');
    } finally {
      redis.disconnect();
    }
    const refused = await get(`/v1/facilities/${facilityId}`, account.apiKey, { 'if-none-match': tag });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(JSON.parse(refused.text).error.code).toBe('RATE_LIMIT_EXCEEDED');
  });
});
