import { eventually, type Stack, startStack } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ label: 'usage_overage' });
});

afterAll(async () => {
  await stack?.stop();
});

const PRO_LIMIT = 25_000;

/** n requests at $0.003, as an exact decimal string computed here independently (integer thousandths). */
function usd(n: number): string {
  const thousandths = n * 3;
  return `${Math.floor(thousandths / 1000)}.${String(thousandths % 1000).padStart(3, '0')}`;
}

async function seed(accountId: string, rows: Array<[day: string, count: number]>): Promise<void> {
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    for (const [day, count] of rows) {
      await client.query('INSERT INTO usage.daily_usage (account_id, day, request_count) VALUES ($1, $2, $3)', [accountId, day, count]);
    }
  } finally {
    await client.end();
  }
}

describe('Pro overage through the real gateway (GET /v1/account/usage)', () => {
  it('bills every day of the month over 25,000 at $0.003 with exact figures, today and this call included', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    // The expected amounts' own arithmetic, on the example of docs/metering.md.
    expect([usd(6505), usd(1), usd(0)]).toEqual(['19.515', '0.003', '0.000']);

    // Dates from today's UTC date (the service has no injectable clock; it uses the same one).
    const now = new Date();
    const [y, m, d] = [now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()];
    const date = (day: number) => new Date(Date.UTC(y, m, day)).toISOString().slice(0, 10);
    const daysInMonth = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
    const today = date(d);
    const nextMidnight = new Date(Date.UTC(y, m, d + 1)).toISOString();

    // Earlier days of this month (none on the 1st): over, exactly at, under and far over the limit, in turn.
    const pattern = [PRO_LIMIT + 1_234, PRO_LIMIT, 12_345, PRO_LIMIT + 5_001];
    const earlier = Array.from({ length: d - 1 }, (_, i) => [date(i + 1), pattern[i % pattern.length] as number] as [string, number]);
    // Today: a count persisted in Postgres before this account's first request. Its Redis counter is missing, so the
    // first request seeds it from Postgres (docs/metering.md, "Counting") and counts on top: today is over the limit
    // even on the 1st of the month, when there are no earlier days.
    const todaySeed = PRO_LIMIT + 269;
    // The last day of the previous month: outside the billing period, never billed here.
    const previousMonth = date(0);
    await seed(accountId, [...earlier, [today, todaySeed], [previousMonth, 99_999]]);

    const earlierTotal = earlier.reduce((sum, [, c]) => sum + c, 0);
    const earlierOverage = earlier.reduce((sum, [, c]) => sum + Math.max(0, c - PRO_LIMIT), 0);
    const expected = (todayCount: number) => {
      const overage = earlierOverage + (todayCount - PRO_LIMIT);
      return {
        data: {
          tier: 'pro',
          daily_limit: PRO_LIMIT,
          today: { request_count: todayCount, remaining: 0, resets_at: nextMidnight },
          billing_period: {
            start: date(1),
            end: date(daysInMonth),
            total_requests: earlierTotal + todayCount,
            included_requests: PRO_LIMIT * daysInMonth,
            overage_requests: overage,
            overage_rate_usd: '0.003',
            estimated_overage_usd: usd(overage),
          },
        },
      };
    };

    const url = `${stack.gatewayUrls[0]}/v1/account/usage`;
    const get = async () => {
      const res = await fetch(url, { headers: { 'x-api-key': apiKey } });
      return {
        status: res.status,
        limit: res.headers.get('x-ratelimit-limit'),
        remaining: res.headers.get('x-ratelimit-remaining'),
        body: await res.json(),
      };
    };

    // Never refused for volume: 200, and the figures include this very call.
    expect(await get()).toEqual({ status: 200, limit: '25000', remaining: '0', body: expected(todaySeed + 1) });
    // Another metered request (a 404 counts too), then the report again: two more requests of overage, $0.006 more.
    const notFound = await fetch(`${stack.gatewayUrls[0]}/v1/no-such-route`, { headers: { 'x-api-key': apiKey } });
    expect(notFound.status).toBe(404);
    const second = await get();
    expect(second).toEqual({ status: 200, limit: '25000', remaining: '0', body: expected(todaySeed + 3) });

    // The counted requests reach Postgres on top of the seeded rows (all days, the previous month's included).
    const stored = earlierTotal + todaySeed + 3 + 99_999;
    expect(
      await eventually(
        () => stack.storedCount(accountId),
        (n) => n === stored,
      ),
    ).toBe(stored);
  });
});
