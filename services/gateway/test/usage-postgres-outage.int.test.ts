import { eventually, PrivatePostgres, type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Metering while Postgres is away: the usage service keeps authorizing and counting (in Redis) the
 * keys it knows, answers GET /v1/account/usage from its cached billing figures plus today's live
 * count (flagged X-Usage-Stale), answers unknown keys 503 (never 401), and writes every count to
 * Postgres when it returns. Postgres is a private cluster, stopped with `pg_ctl stop -m fast` for 20 s.
 */
let postgres: PrivatePostgres;
let stack: Stack;
let usageHttp: string;

async function get(url: string, key?: string) {
  const res = await fetch(url, { headers: key ? { 'x-api-key': key } : {} });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

const EARLIER_DAY_COUNT = 1234;
const today = () => new Date().toISOString().slice(0, 10);
const firstOfMonth = () => `${today().slice(0, 8)}01`;

beforeAll(async () => {
  postgres = await PrivatePostgres.start();
  const url = await postgres.createDatabase('fcd_usage');
  stack = await startStack({ label: 'usage_pg_outage', database: { url, name: 'fcd_usage', drop: async () => undefined } });
  const ready = await stack.usage.waitForLog((l) => l.msg === 'ready');
  usageHttp = `http://127.0.0.1:${ready.port as number}`;
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await postgres?.destroy();
});

describe('Postgres stopped for 20 s under metered load', () => {
  it('keeps a known Pro key at 200 on /v1/account/usage, flags the figures stale, and stores exactly the 2xx', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    const base = stack.gatewayUrls[0] as string;
    // An earlier day of this month in Postgres (none exists on the 1st), so the report has cached figures to reuse.
    const hasEarlierDay = today() !== firstOfMonth();
    if (hasEarlierDay) {
      const c = new pg.Client({ connectionString: stack.db.url });
      await c.connect();
      await c.query('INSERT INTO usage.daily_usage (account_id, day, request_count) VALUES ($1, $2, $3)', [
        accountId,
        firstOfMonth(),
        EARLIER_DAY_COUNT,
      ]);
      await c.end();
    }
    const earlier = hasEarlierDay ? EARLIER_DAY_COUNT : 0;

    let ok = 0;
    const statuses = new Map<number, number>();
    const call = async () => {
      const r = await get(`${base}/v1/account/usage`, apiKey);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 200) ok++;
      return r;
    };
    for (let i = 0; i < 10; i++) expect((await call()).status).toBe(200);

    await postgres.stopFast();
    const stoppedAt = Date.now();
    const during: Array<Awaited<ReturnType<typeof call>>> = [];
    while (Date.now() - stoppedAt < 20_000) {
      during.push(await call());
      await new Promise((r) => setTimeout(r, 100)); // about 10 requests a second, as in the incident
    }

    // A key the usage service never saw cannot be vouched for: 503 with Retry-After, never 401.
    const unknown = await get(`${base}/v1/account/usage`, `fcd_${'Z'.repeat(32)}`);
    expect(unknown.status).toBe(503);
    expect(unknown.body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(unknown.headers.get('retry-after')).toBe('1');
    // Readiness names Postgres down: the gateway's /readyz is 503, the usage replica stays ready, degraded.
    const gatewayReady = await get(`${base}/readyz`);
    expect(gatewayReady.status).toBe(503);
    expect(gatewayReady.body.error.details.checks.postgres.status).toBe('down');
    const usageReady = await get(`${usageHttp}/readyz`);
    expect(usageReady.status).toBe(200);
    expect(usageReady.body.data.status).toBe('degraded');
    expect(usageReady.body.data.checks.postgres.status).toBe('down');

    await postgres.start();

    // Every request during the outage was answered 200 from the live count, flagged stale.
    expect(during.length).toBeGreaterThan(50);
    expect(during.map((r) => r.status)).toEqual(during.map(() => 200));
    const last = during[during.length - 1] as Awaited<ReturnType<typeof call>>;
    expect(last.body.data.today.request_count).toBe(10 + during.length);
    expect(last.body.data.billing_period.total_requests).toBe(earlier + 10 + during.length);
    expect(last.headers.get('x-usage-stale')).toBe(hasEarlierDay ? 'true' : null);
    expect(last.headers.get('x-ratelimit-remaining')).toBe(String(25_000 - 10 - during.length));

    // After Postgres returns: fresh figures (no stale flag), and the stored count equals the 2xx answers.
    const after = await eventually(call, (r) => r.status === 200 && r.headers.get('x-usage-stale') === null);
    expect(after.body.data.billing_period.total_requests).toBe(earlier + ok);
    expect([...statuses.keys()]).toEqual([200]);
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === earlier + ok,
    );
    expect(stack.usage.logs().some((l) => l.msg === 'uncaught exception' || (l.level as unknown) === 60 || l.level === 'fatal')).toBe(
      false,
    );
  }, 90_000);
});
