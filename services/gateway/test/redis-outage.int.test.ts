import { eventually, PrivateRedis, type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let redis: PrivateRedis;
let stack: Stack;

async function get(url: string, key?: string) {
  const res = await fetch(url, { headers: key ? { 'x-api-key': key } : {} });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

beforeAll(async () => {
  redis = await PrivateRedis.start();
  stack = await startStack({ label: 'redis_outage', redisUrl: redis.url });
});

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
});

describe('Redis outage and restart', () => {
  it('fails closed with 503 while Redis is down, recovers by itself, and re-seeds so a Free key stays limited', async () => {
    const { apiKey, accountId } = await stack.createAccount('free');
    const base = stack.gatewayUrls[0] as string;
    const usageUrl = `${base}/v1/account/usage`;
    let successes = 0;
    const tally = async () => {
      const r = await get(usageUrl, apiKey);
      if (r.status === 200) successes++;
      return r;
    };

    for (let i = 0; i < 60; i++) expect((await tally()).status).toBe(200);
    // Counts reach Postgres (flush every 200 ms in this stack) before Redis goes away.
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === 60,
    );

    await redis.stop();
    const down = await eventually(tally, (r) => r.status === 503);
    expect(down.body).toMatchObject({ error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(down.headers.get('retry-after')).toBe('1');
    const ready = await eventually(
      () => get(`${base}/readyz`),
      (r) => r.body.error?.details?.checks?.redis?.status === 'down',
    );
    expect(ready.status).toBe(503);
    expect(ready.body.error.code).toBe('SERVICE_UNAVAILABLE');

    // Redis comes back empty (no persistence): a restart mid-day.
    await redis.start();
    await eventually(tally, (r) => r.status === 200);
    await eventually(
      () => get(`${base}/readyz`),
      (r) => r.body.error?.details?.checks?.redis?.status !== 'down',
    );

    for (let i = 0; i < 100; i++) await tally();
    const last = await get(usageUrl, apiKey);
    expect(last.status).toBe(429);
    expect(last.body.error.details).toMatchObject({ limit: 100, remaining: 0 });
    // Exactly 100 successes in the day despite the Redis restart: today's count came back from Postgres.
    expect(successes).toBe(100);
  });
});
