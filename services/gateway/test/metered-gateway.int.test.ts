import { eventually, type Stack, startStack, type TestAccount } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
const usedKeys: string[] = [];

async function call(url: string, init: RequestInit & { key?: string } = {}) {
  const headers = new Headers(init.headers);
  if (init.key !== undefined) headers.set('x-api-key', init.key);
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, any>) : undefined };
}

async function account(tier: 'free' | 'pro'): Promise<TestAccount> {
  const a = await stack.createAccount(tier);
  usedKeys.push(a.apiKey);
  return a;
}

function nextMidnight(): string {
  const d = new Date();
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)).toISOString();
}

beforeAll(async () => {
  stack = await startStack({
    label: 'gateway_metering',
    gateways: 2,
    usageEnv: { LOG_LEVEL: 'debug' },
    gatewayEnv: { LOG_LEVEL: 'debug' },
  });
});

afterAll(async () => {
  await stack?.stop();
});

describe('metered gateway (two gateway processes, one usage service, real Postgres and Redis)', () => {
  it('gives a Free key exactly 100 successes under 300 concurrent requests across two gateways', async () => {
    const { apiKey, accountId } = await account('free');
    const [a, b] = stack.gatewayUrls as [string, string];
    const responses = await Promise.all(
      Array.from({ length: 300 }, (_, i) => call(`${i % 2 === 0 ? a : b}/v1/account/usage`, { key: apiKey })),
    );
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok).toHaveLength(100);
    expect(limited).toHaveLength(200);
    const resetsAt = nextMidnight();
    // Headers are consistent with the count: each success saw a distinct remaining value 99..0.
    expect(ok.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 100 }, (_, i) => i),
    );
    for (const r of ok) {
      expect(r.headers.get('x-ratelimit-limit')).toBe('100');
      expect(r.headers.get('x-ratelimit-reset')).toBe(resetsAt);
      // The report is computed from this request's own count (one round trip), so it matches the headers.
      expect(r.body?.data.today.request_count).toBe(100 - Number(r.headers.get('x-ratelimit-remaining')));
    }
    const secondsToReset = Math.ceil((Date.parse(resetsAt) - Date.now()) / 1000);
    for (const r of limited) {
      expect(r.body).toEqual({
        error: {
          code: 'RATE_LIMIT_EXCEEDED',
          message: `Daily request limit of 100 requests exceeded. The limit resets at ${resetsAt}.`,
          details: { limit: 100, remaining: 0, resets_at: resetsAt },
        },
      });
      expect(r.headers.get('x-ratelimit-limit')).toBe('100');
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(r.headers.get('x-ratelimit-reset')).toBe(resetsAt);
      const retryAfter = Number(r.headers.get('retry-after'));
      expect(Math.abs(retryAfter - secondsToReset)).toBeLessThanOrEqual(5);
    }
    // Refused requests are not counted; the 100 counted ones reach Postgres.
    expect(
      await eventually(
        () => stack.storedCount(accountId),
        (n) => n === 100,
      ),
    ).toBe(100);
  });

  it('never refuses a Pro key and reports usage that includes the call itself', async () => {
    const { apiKey } = await account('pro');
    const url = `${stack.gatewayUrls[0]}/v1/account/usage`;
    await call(url, { key: apiKey });
    await call(url, { key: apiKey });
    const third = await call(url, { key: apiKey });
    expect(third.status).toBe(200);
    const now = new Date();
    const daysInMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 0)).getUTCDate();
    const month = now.toISOString().slice(0, 7);
    expect(third.body).toEqual({
      data: {
        tier: 'pro',
        daily_limit: 25_000,
        today: { request_count: 3, remaining: 24_997, resets_at: nextMidnight() },
        billing_period: {
          start: `${month}-01`,
          end: `${month}-${String(daysInMonth).padStart(2, '0')}`,
          total_requests: 3,
          included_requests: 25_000 * daysInMonth,
          overage_requests: 0,
          overage_rate_usd: '0.003',
          estimated_overage_usd: '0.000',
        },
      },
    });
    expect(third.headers.get('x-ratelimit-remaining')).toBe('24997');
  });

  it('answers missing, malformed, unknown and revoked keys with the same 401 and no rate-limit headers', async () => {
    const revoked = await account('free');
    const url = `${stack.gatewayUrls[1]}/v1/account/usage`;
    expect((await call(url, { key: revoked.apiKey })).status).toBe(200);
    await stack.cli(['keys', 'revoke', '--key', revoked.keyId]);
    // Revocation takes effect within the key cache TTL (200 ms in this stack).
    await eventually(
      () => call(url, { key: revoked.apiKey }),
      (r) => r.status === 401,
    );
    const cases = [
      await call(url),
      await call(url, { key: 'not-a-key' }),
      await call(url, { key: `fcd_${'x'.repeat(32)}` }),
      await call(url, { key: revoked.apiKey }),
    ];
    for (const r of cases) {
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ error: { code: 'UNAUTHORIZED', message: 'A valid API key is required. Send it in the X-API-Key header.' } });
      expect(r.headers.get('x-ratelimit-limit')).toBeNull();
      expect(r.headers.get('x-ratelimit-remaining')).toBeNull();
      expect(r.headers.get('x-ratelimit-reset')).toBeNull();
    }
  });

  it('refuses bad input with the envelope and a 4xx, counted and with rate-limit headers, never a 500', async () => {
    const { apiKey } = await account('pro');
    const base = stack.gatewayUrls[0];
    const json = { 'content-type': 'application/json' };
    const big = await call(`${base}/v1/webhooks`, {
      key: apiKey,
      method: 'POST',
      headers: json,
      body: JSON.stringify({ url: 'x'.repeat(70_000) }),
    });
    const text = await call(`${base}/v1/webhooks`, {
      key: apiKey,
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hello',
    });
    const broken = await call(`${base}/v1/webhooks`, { key: apiKey, method: 'POST', headers: json, body: '{"url": ' });
    const array = await call(`${base}/v1/webhooks`, { key: apiKey, method: 'POST', headers: json, body: '[1,2]' });
    const query = await call(`${base}/v1/account/usage?verbose=1&page=2`, { key: apiKey });
    const unknown = await call(`${base}/v1/no-such-thing`, { key: apiKey });
    const method = await call(`${base}/v1/account/usage`, { key: apiKey, method: 'DELETE' });

    expect([big, text, broken, array, query, unknown, method].map((r) => [r.status, r.body?.error.code])).toEqual([
      [413, 'PAYLOAD_TOO_LARGE'],
      [415, 'UNSUPPORTED_MEDIA_TYPE'],
      [400, 'BAD_REQUEST'],
      [400, 'BAD_REQUEST'],
      [400, 'VALIDATION_ERROR'],
      [404, 'NOT_FOUND'],
      [405, 'METHOD_NOT_ALLOWED'],
    ]);
    expect(query.body?.error.details.fields).toEqual([
      { field: 'verbose', message: 'is not a known query parameter' },
      { field: 'page', message: 'is not a known query parameter' },
    ]);
    expect(method.headers.get('allow')).toBe('GET, HEAD');
    const remaining = [big, text, broken, array, query, unknown, method].map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    expect(remaining).toEqual([24_999, 24_998, 24_997, 24_996, 24_995, 24_994, 24_993]);
  });

  it('answers a domain service that is down with 503 SERVICE_UNAVAILABLE and Retry-After', async () => {
    const { apiKey } = await account('pro');
    const r = await call(`${stack.gatewayUrls[0]}/v1/facilities?state=TX`, { key: apiKey });
    expect(r.status).toBe(503);
    expect(r.body?.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.headers.get('x-ratelimit-limit')).toBe('25000');
  });

  it('serves health checks without a key and without counting them; echoes a well-formed X-Request-Id', async () => {
    const { apiKey } = await account('free');
    const base = stack.gatewayUrls[0];
    const health = await call(`${base}/healthz`);
    expect(health).toMatchObject({ status: 200, body: { data: { status: 'ok' } } });
    const ready = await call(`${base}/readyz`);
    expect(ready.body?.error.details.checks).toMatchObject({
      usage: { status: 'up' },
      postgres: { status: 'up' },
      redis: { status: 'up' },
    });
    const echoed = await call(`${base}/v1/account/usage`, { key: apiKey, headers: { 'x-request-id': 'client-req-42' } });
    expect(echoed.headers.get('x-request-id')).toBe('client-req-42');
    expect(echoed.body?.data.today.request_count).toBe(1);
    const replaced = await call(`${base}/healthz`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^req_[0-9a-f-]{36}$/);
  });

  it('exposes RED metrics and rate-limit decisions by tier and outcome on the metrics ports', async () => {
    const metricsOf = async (p: { waitForLog: (f: (l: { msg?: string }) => boolean) => Promise<Record<string, unknown>> }) => {
      const ready = await p.waitForLog((l) => l.msg === 'ready');
      return (await fetch(`http://127.0.0.1:${ready.metricsPort as number}/metrics`)).text();
    };
    const value = (text: string, series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    const usage = await metricsOf(stack.usage);
    // The first test refused exactly 200 Free requests; others may have added more allowed ones.
    expect(value(usage, 'fcd_rate_limit_decisions_total{tier="free",outcome="rate_limited",service="usage"}')).toBe(200);
    expect(value(usage, 'fcd_rate_limit_decisions_total{tier="free",outcome="allowed",service="usage"}')).toBeGreaterThanOrEqual(100);
    expect(value(usage, 'fcd_rate_limit_decisions_total{tier="none",outcome="unauthenticated",service="usage"}')).toBeGreaterThanOrEqual(3);
    const gateways = await Promise.all(stack.gateways.map(metricsOf));
    const served = gateways.map(
      (g) => value(g, 'fcd_requests_total{route="/v1/account/usage",method="GET",status="200",service="gateway"}') ?? 0,
    );
    expect(served.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(100);
    expect(gateways[0]).toContain(
      'fcd_request_duration_seconds_count{service="gateway",route="/v1/account/usage",method="GET",status="200"}',
    );
    expect(gateways[0]).toContain('process_cpu_user_seconds_total{service="gateway"}');
  });

  it('never writes an API key into any log line (debug logs of every process captured)', async () => {
    expect(usedKeys.length).toBeGreaterThanOrEqual(6);
    const lines = [...stack.usage.output, ...stack.gateways.flatMap((g) => g.output)];
    expect(lines.length).toBeGreaterThan(5);
    for (const key of usedKeys) {
      expect(lines.filter((l) => l.includes(key) || l.includes(key.slice(4)))).toEqual([]);
    }
  });
});
