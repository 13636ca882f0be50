import { ManualClock } from '@fcd/service-kit';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asAccount, createContext, insertEvents, newAccount, PUBLIC_HOST, type TestContext, target, testApp } from './helpers';

/**
 * POST /v1/webhooks/{id}/recover bounded (docs/webhooks.md "Recovery"), through the app: the
 * creation floor, the 10,000 cap and next_since, one recovery at a time (409), the account's rate
 * (429 with Retry-After), strict dates.
 */

let ctx: TestContext;
let app: FastifyInstance;
// Events one a second from T0; "now" is a day later (within the retention).
const T0 = Date.parse('2026-11-20T00:00:00.000Z');
const clock = new ManualClock(T0 + 86_400_000);

beforeAll(async () => {
  ctx = await createContext('webhook_recovery');
  ({ app } = await testApp(ctx, { clock }));
  await insertEvents(ctx.pool, 25_000, T0, 1000);
});

afterAll(async () => {
  await app?.close();
  await ctx?.close();
});

function call(accountId: string, options: InjectOptions): Promise<LightMyRequestResponse> {
  return app.inject({ ...options, headers: { ...asAccount(accountId, target(options)), ...(options.headers ?? {}) } });
}

/** A subscription to violation.new created at `createdAt` (the clock is set back to now after). */
async function subscription(accountId: string, createdAt = clock.now()): Promise<string> {
  const now = clock.now();
  clock.set(createdAt);
  const res = await call(accountId, {
    method: 'POST',
    url: '/v1/webhooks',
    payload: { url: `https://${PUBLIC_HOST}/fcd`, events: ['violation.new'] },
  });
  clock.set(now);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().data.id;
}

const recover = (accountId: string, id: string, payload: object) =>
  call(accountId, { method: 'POST', url: `/v1/webhooks/${id}/recover`, payload });
const iso = (t: number) => new Date(t).toISOString();

describe('POST /v1/webhooks/{id}/recover, bounded', () => {
  it('sends nothing from before the subscription was created: since is raised to its created_at', async () => {
    const account = newAccount();
    const created = T0 + 24_000_000; // 24,000 events after T0: 1,000 events from then on
    const id = await subscription(account, created);
    const res = await recover(account, id, { since: iso(T0) });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ data: { events: 1000, since: iso(created), until: iso(clock.now()), next_since: null } });
    const { rows } = await ctx.pool.query<{ n: number; oldest: Date }>(
      `SELECT count(*)::int AS n, min(e.created_at) AS oldest FROM webhook.deliveries d JOIN webhook.events e ON e.id = d.event_id
        WHERE d.subscription_id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ n: 1000, oldest: new Date(created) });
    // A window that ends before the creation: nothing.
    const other = await subscription(account, created);
    const empty = await recover(account, other, { since: iso(T0), until: iso(T0 + 1000), dry_run: true });
    expect(empty.json()).toEqual({ data: { events: 0, since: iso(T0 + 1000), until: iso(T0 + 1000), next_since: null } });
  });

  it('recovers a 25,000-event window 10,000 at a time: each answer names the next since', async () => {
    const account = newAccount();
    const id = await subscription(account, T0 - 60_000);
    const res = await recover(account, id, { since: iso(T0) });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ data: { events: 10_000, since: iso(T0), until: iso(clock.now()), next_since: iso(T0 + 10_000_000) } });
    const dry = await recover(account, id, { since: res.json().data.next_since, dry_run: true });
    expect(dry.json().data).toEqual({
      events: 10_000,
      since: iso(T0 + 10_000_000),
      until: iso(clock.now()),
      next_since: iso(T0 + 20_000_000),
    });
  });

  it('answers 409 LIMIT_REACHED with Retry-After while a recovery of the subscription is in progress, concurrent calls included', async () => {
    const account = newAccount();
    const id = await subscription(account, T0 - 60_000);
    const answers = await Promise.all(Array.from({ length: 5 }, () => recover(account, id, { since: iso(T0), until: iso(T0 + 100_000) })));
    const statuses = answers.map((a) => a.statusCode).sort();
    expect(statuses).toEqual([202, 409, 409, 409, 409]);
    expect(answers.find((a) => a.statusCode === 202)?.json().data.events).toBe(100);
    for (const refused of answers.filter((a) => a.statusCode === 409)) {
      expect(refused.json().error).toMatchObject({ code: 'LIMIT_REACHED', details: { limit: 'recovery_in_progress' } });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    // Still pending (100 deliveries at 10/s: the last is due 9.9 s after now): 409, Retry-After 10.
    const later = await recover(account, id, { since: iso(T0) });
    expect(later.statusCode).toBe(409);
    expect(later.headers['retry-after']).toBe('10');
    expect(later.json().error.details).toEqual({ limit: 'recovery_in_progress', last_due_at: iso(clock.now() + 9_900) });
    // Exactly 100 deliveries were written, once each.
    const { rows } = await ctx.pool.query<{ n: number; events: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS events FROM webhook.deliveries WHERE subscription_id = $1',
      [id],
    );
    expect(rows[0]).toEqual({ n: 100, events: 100 });
  });

  it('100 recover calls in a second: 10 answered, then 429 RATE_LIMIT_EXCEEDED with Retry-After; another account is not affected', async () => {
    const account = newAccount();
    const id = await subscription(account, T0 - 60_000);
    const body = { since: iso(T0), until: iso(T0 + 10_000), dry_run: true };
    const answers: LightMyRequestResponse[] = [];
    for (let i = 0; i < 100; i++) answers.push(await recover(account, id, body));
    expect(answers.map((a) => a.statusCode)).toEqual([...Array(10).fill(202), ...Array(90).fill(429)]);
    const refused = answers[10] as LightMyRequestResponse;
    expect(refused.headers['retry-after']).toBe('6');
    expect(refused.json()).toEqual({
      error: {
        code: 'RATE_LIMIT_EXCEEDED',
        message: 'At most 10 recover calls per 60 s per account. Retry after 6 s.',
        details: { limit: 10, window_seconds: 60, retry_after_seconds: 6 },
      },
    });
    // 6 s later, one more.
    clock.advance(6000);
    expect((await recover(account, id, body)).statusCode).toBe(202);
    expect((await recover(account, id, body)).statusCode).toBe(429);
    const other = newAccount();
    expect((await recover(other, await subscription(other, T0 - 60_000), body)).statusCode).toBe(202);
  });

  it('refuses impossible dates (400 VALIDATION_ERROR), as GET /v1/events does, instead of rolling them over', async () => {
    const account = newAccount();
    const id = await subscription(account, T0 - 60_000);
    for (const [body, field] of [
      [{ since: '2026-02-29T00:00:00Z' }, 'since'],
      [{ since: '2026-11-20T24:00:00Z' }, 'since'],
      [{ since: iso(T0), until: '2026-11-20T10:00:60Z' }, 'until'],
    ] as const) {
      const res = await recover(account, id, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { fields: [{ field, message: 'must be an RFC 3339 date-time' }] },
      });
    }
    const events = await call(account, { method: 'GET', url: '/v1/events?since=2026-02-29T00:00:00Z' });
    expect(events.statusCode).toBe(400);
  });
});
