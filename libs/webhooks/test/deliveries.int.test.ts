import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, eventually, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AttemptDecision,
  type AttemptRecord,
  type ClaimedDelivery,
  type ClaimRef,
  type DecisionInput,
  DeliveryStore,
  generateSecret,
  recoverEvents,
  SECRET_UNREADABLE_DEFER_MS,
  SecretBox,
  SubscriptionStore,
  WEBHOOK_SCHEMA,
  webhookMigrations,
} from '../src/index';

/** The dispatcher's batched SQL gives the same rows as its one-at-a-time form. */

let db: TestDatabase;
let pool: Pool;
let subs: SubscriptionStore;
let deliveries: DeliveryStore;
const box = new SecretBox(randomBytes(32));
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';

async function subscription(facilityIds: string[] | null = null, events = ['violation.new']) {
  return subs.create(
    {
      id: `wh_${randomUUID()}`,
      account_id: `acct_${randomUUID()}`,
      url: 'https://hooks.example.com/fcd',
      events,
      facility_ids: facilityIds,
      secret: generateSecret(),
      now: T0,
    },
    25,
  );
}

const event = (type: string, facilityIds: string[]) => {
  const id = `evt_${randomUUID()}`;
  return { id, type, body: JSON.stringify({ id, type, created_at: new Date(T0).toISOString(), data: {} }), facilityIds };
};

beforeAll(async () => {
  db = await createTestDatabase('webhooks_deliveries');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-deliveries-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  subs = new SubscriptionStore(pool, box);
  deliveries = new DeliveryStore(pool, box);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('DeliveryStore.fanOutMany', () => {
  it('creates one delivery per (event, matching subscription) in one call, and nothing for events already fanned out', async () => {
    const type = `violation.new.${randomUUID()}`;
    const all = await subscription(null, [type]);
    const onlyF1 = await subscription([F1], [type]);
    const e1 = event(type, [F1.toUpperCase()]);
    const e2 = event(type, [F2]);
    const e3 = event(type, []);
    const created = await deliveries.fanOutMany([e1, e2, e1, e3], T0);
    expect(created.map((ids) => ids.length)).toEqual([2, 1, 0, 1]);
    const { rows } = await pool.query<{ subscription_id: string; event_id: string; body: string; status: string }>(
      'SELECT subscription_id, event_id, body, status FROM webhook.deliveries WHERE event_type = $1 ORDER BY event_id, subscription_id',
      [type],
    );
    const expected = [
      { subscription_id: all.id, event_id: e1.id, body: e1.body, status: 'pending' },
      { subscription_id: onlyF1.id, event_id: e1.id, body: e1.body, status: 'pending' },
      { subscription_id: all.id, event_id: e2.id, body: e2.body, status: 'pending' },
      { subscription_id: all.id, event_id: e3.id, body: e3.body, status: 'pending' },
    ].sort((a, b) => (a.event_id + a.subscription_id < b.event_id + b.subscription_id ? -1 : 1));
    expect(rows).toEqual(expected);
    // Redelivered: nothing new, and fanOut agrees.
    expect(await deliveries.fanOutMany([e1, e2], T0)).toEqual([[], []]);
    expect(await deliveries.fanOut(e3, T0)).toEqual([]);
  });
});

describe('DeliveryStore.recordAttempts', () => {
  /** Failure at attempt 1 → retry; the item marked `last` fails for good and deactivates. */
  const decide = (input: DecisionInput): AttemptDecision =>
    input.success
      ? { status: 'succeeded' }
      : input.attempt >= 2
        ? { status: 'failed', deactivate: true }
        : { status: 'pending', nextAttemptAt: input.finishedAt + 60_000 };

  /** A subscription with `n` deliveries, each claimed once (attempt 1) or twice (attempt 2) as listed. */
  async function scenario(attempts: number[]) {
    const type = `case.new.${randomUUID()}`;
    const sub = await subscription(null, [type]);
    const events = attempts.map(() => event(type, []));
    await deliveries.fanOutMany(events, T0);
    const claimed = [];
    for (let i = 0; i < attempts.length; i++) {
      const { rows } = await pool.query<{ id: string }>('SELECT id FROM webhook.deliveries WHERE event_id = $1', [events[i]?.id]);
      const id = rows[0]?.id as string;
      await pool.query('UPDATE webhook.deliveries SET attempt_count = $2 - 1, first_attempt_at = $3 WHERE id = $1', [
        id,
        attempts[i],
        attempts[i] === 1 ? null : new Date(T0),
      ]);
      await pool.query(
        "UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1 AND event_type LIKE 'case.new.%'",
        [sub.id],
      );
    }
    const now = T0 + 1000;
    const all = await deliveries.claimDue(now + 1_000_000_000, 1000, now + 2_000_000_000);
    for (const c of all.filter((c) => c.subscriptionId === sub.id)) claimed.push(c);
    // In the plan's order.
    const order = new Map(events.map((e, i) => [e.id, i]));
    claimed.sort((a, b) => (order.get(a.eventId) ?? 0) - (order.get(b.eventId) ?? 0));
    return { sub, claimed, events };
  }

  /** The subscription and its deliveries, in the order of `eventIds`. */
  async function state(subscriptionId: string, eventIds: string[]) {
    const s = await pool.query(
      'SELECT is_active, deactivation_reason, consecutive_failures, last_success_at, last_failure_at FROM webhook.subscriptions WHERE id = $1',
      [subscriptionId],
    );
    const d = await pool.query(
      `SELECT d.status, d.attempt_count, d.next_attempt_at, d.updated_at,
              (SELECT json_agg(json_build_object('attempt', a.attempt, 'outcome', a.outcome, 'status', a.response_status, 'error', a.error) ORDER BY a.attempt)
                 FROM webhook.delivery_attempts a WHERE a.delivery_id = d.id) AS attempts
         FROM webhook.deliveries d WHERE d.subscription_id = $1 ORDER BY array_position($2::text[], d.event_id)`,
      [subscriptionId, eventIds],
    );
    return { subscription: s.rows[0], deliveries: d.rows };
  }

  it('gives the same rows and outcomes as recording the attempts one by one, deactivation included', async () => {
    // success, failure (retry), failure of attempt 2 (deactivates), then two more of the same subscription.
    const plan = [
      { attempt: 1, success: true },
      { attempt: 1, success: false },
      { attempt: 2, success: false },
      { attempt: 1, success: true },
      { attempt: 1, success: false },
    ];
    const results = [];
    for (const mode of ['one-by-one', 'batch'] as const) {
      const { sub, claimed, events } = await scenario(plan.map((p) => p.attempt));
      expect(claimed).toHaveLength(plan.length);
      const items: AttemptRecord[] = claimed.map((c, i) => ({
        claimed: c,
        result: {
          startedAt: T0 + 2000 + i * 10,
          finishedAt: T0 + 2005 + i * 10,
          durationMs: 5,
          responseStatus: plan[i]?.success ? 200 : 500,
          error: plan[i]?.success ? null : 'HTTP 500',
          success: plan[i]?.success ?? false,
        },
      }));
      const outcomes = [];
      if (mode === 'batch') outcomes.push(...(await deliveries.recordAttempts(items, decide)));
      else for (const item of items) outcomes.push(await deliveries.recordAttempt(item.claimed, item.result, decide));
      results.push({
        outcomes,
        ...(await state(
          sub.id,
          events.map((e) => e.id),
        )),
      });
    }
    const [oneByOne, batch] = results;
    expect(batch).toEqual(oneByOne);
    expect(batch?.subscription).toMatchObject({ is_active: false, deactivation_reason: 'consecutive_failures', consecutive_failures: 2 });
    expect(batch?.outcomes.map((o) => [o.applied, o.deactivated, o.cancelled])).toEqual([
      [true, false, 0],
      [true, false, 0],
      [true, true, 3],
      [false, false, 0],
      [false, false, 0],
    ]);
    expect(batch?.deliveries.map((d: { status: string }) => d.status)).toEqual([
      'succeeded',
      'cancelled',
      'failed',
      'cancelled',
      'cancelled',
    ]);
  });

  it('records a batch of successes as the transaction would: counters reset, a pause kept, a stale attempt not applied', async () => {
    const { sub, claimed, events } = await scenario([1, 1, 2]);
    await pool.query(
      `UPDATE webhook.subscriptions SET consecutive_failures = 4, connection_failures = 3, last_success_at = $2,
              paused_until = $3, pause_reason = 'unreachable' WHERE id = $1`,
      [sub.id, new Date(T0 - 1000), new Date(T0 + 1500)],
    );
    // The third was claimed again meanwhile (attempt 2): its attempt-1 success is recorded, not applied.
    const items: AttemptRecord[] = claimed.map((c, i) => ({
      claimed: i === 2 ? { ...c, attempt: 1 } : c,
      result: {
        startedAt: T0 + 2000 + i * 10,
        finishedAt: T0 + 2005 + i * 10,
        durationMs: 5,
        responseStatus: 200,
        error: null,
        success: true,
      },
    }));
    const outcomes = await deliveries.recordAttempts(items, decide);
    expect(outcomes).toEqual([
      { decision: { status: 'succeeded' }, applied: true, deactivated: false, cancelled: 0, paused: null },
      { decision: { status: 'succeeded' }, applied: true, deactivated: false, cancelled: 0, paused: null },
      { decision: { status: 'succeeded' }, applied: false, deactivated: false, cancelled: 0 },
    ]);
    const after = await state(
      sub.id,
      events.map((e) => e.id),
    );
    expect(after.subscription).toEqual({
      is_active: true,
      deactivation_reason: null,
      consecutive_failures: 0,
      last_success_at: new Date(T0 + 2010),
      last_failure_at: null,
    });
    const pause = await pool.query('SELECT connection_failures, paused_until, pause_reason FROM webhook.subscriptions WHERE id = $1', [
      sub.id,
    ]);
    expect(pause.rows[0]).toEqual({ connection_failures: 0, paused_until: new Date(T0 + 1500), pause_reason: 'unreachable' });
    expect(after.deliveries.map((d: { status: string; attempts: unknown }) => [d.status, d.attempts])).toEqual([
      ['succeeded', [{ attempt: 1, outcome: 'success', status: 200, error: null }]],
      ['succeeded', [{ attempt: 1, outcome: 'success', status: 200, error: null }]],
      ['pending', [{ attempt: 1, outcome: 'success', status: 200, error: null }]],
    ]);
  });

  it('sends a row from before the body column (migration 0003) from its payload, and new rows store no payload', async () => {
    const type = `case.new.${randomUUID()}`;
    const sub = await subscription(null, [type]);
    const e = event(type, []);
    await deliveries.fanOutMany([e], T0);
    const stored = await pool.query('SELECT payload, body FROM webhook.deliveries WHERE subscription_id = $1', [sub.id]);
    expect(stored.rows).toEqual([{ payload: null, body: e.body }]);
    await pool.query(
      `UPDATE webhook.deliveries SET body = NULL, payload = '{"data": {"n": 1}, "type": "case.new", "id": "evt_old", "created_at": "2026-01-01T00:00:00Z"}'
        WHERE subscription_id = $1`,
      [sub.id],
    );
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1", [
      sub.id,
    ]);
    const claimed = await deliveries.claimDue(T0 + 1000, 10, T0 + 2000);
    expect(claimed.map((c) => c.body)).toEqual(['{"id":"evt_old","type":"case.new","created_at":"2026-01-01T00:00:00Z","data":{"n":1}}']);
  });

  it('decrypts the secret again after a rotation (the cache is keyed on the ciphertext)', async () => {
    const type = `facility.status_changed.${randomUUID()}`;
    const sub = await subscription(null, [type]);
    const before = await subs.signingSecret(sub.id);
    await deliveries.fanOutMany([event(type, [])], T0);
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1", [
      sub.id,
    ]);
    const first = await deliveries.claimDue(T0 + 1000, 10, T0 + 2000);
    expect(first.map((c) => c.secret)).toEqual([before]);
    const rotated = generateSecret();
    await subs.rotateSecret(sub.account_id, sub.id, rotated, T0 + 3000);
    const second = await deliveries.claimDue(T0 + 5000, 10, T0 + 6000);
    expect(second.map((c) => c.secret)).toEqual([rotated]);
  });

  it('signs with both secrets, newest first, until the overlap ends, then with the new one only', async () => {
    const type = `case.new.${randomUUID()}`;
    const sub = await subscription(null, [type]);
    const old = await subs.signingSecret(sub.id);
    const fresh = generateSecret();
    const rotated = await subs.rotateSecret(sub.account_id, sub.id, fresh, T0, 60);
    expect(rotated?.secret_rotation_ends_at).toBe('2026-11-22T08:01:00.000Z');
    const claimAt = async (now: number) => {
      await deliveries.fanOutMany([event(type, [])], now);
      await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1", [
        sub.id,
      ]);
      const claimed = await deliveries.claimDue(now, 10, now + 1000);
      await pool.query("UPDATE webhook.deliveries SET status = 'succeeded' WHERE subscription_id = $1", [sub.id]);
      return claimed.map((c) => c.secrets);
    };
    expect(await claimAt(T0 + 59_999)).toEqual([[fresh, old]]);
    expect(await claimAt(T0 + 60_000)).toEqual([[fresh]]);
    // Without an overlap the replaced secret stops at once, and the end time is cleared.
    const again = generateSecret();
    expect((await subs.rotateSecret(sub.account_id, sub.id, again, T0 + 70_000, 0))?.secret_rotation_ends_at).toBeNull();
    expect(await claimAt(T0 + 70_001)).toEqual([[again]]);
  });

  it('puts back the deliveries of a subscription whose secret does not decrypt, and hands out the rest of the batch', async () => {
    const type = `case.updated.${randomUUID()}`;
    const good = await subscription(null, [type]);
    const broken = await subscription(null, [type]);
    // Encrypted under another key: what a wrong WEBHOOK_SECRET_KEY looks like.
    const foreign = new SecretBox(randomBytes(32)).encrypt(generateSecret(), broken.id);
    await pool.query('UPDATE webhook.subscriptions SET secret_ciphertext = $2 WHERE id = $1', [broken.id, foreign]);
    await deliveries.fanOutMany([event(type, []), event(type, [])], T0);
    await pool.query(
      "UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id NOT IN ($1, $2)",
      [good.id, broken.id],
    );
    const reported: Array<[string, number]> = [];
    const store = new DeliveryStore(pool, box, { onSecretUnreadable: (id, ids) => reported.push([id, ids.length]) });
    const now = T0 + 10_000;
    const claimed = await store.claimDue(now, 10, now + 60_000);
    expect(claimed.map((c) => [c.subscriptionId, c.attempt, c.secret])).toEqual([
      [good.id, 1, await subs.signingSecret(good.id)],
      [good.id, 1, await subs.signingSecret(good.id)],
    ]);
    expect(reported).toEqual([[broken.id, 2]]);
    const { rows } = await pool.query<{ status: string; attempt_count: number; next_attempt_at: Date; first_attempt_at: Date | null }>(
      'SELECT status, attempt_count, next_attempt_at, first_attempt_at FROM webhook.deliveries WHERE subscription_id = $1',
      [broken.id],
    );
    expect(rows).toEqual([
      { status: 'pending', attempt_count: 0, next_attempt_at: new Date(now + SECRET_UNREADABLE_DEFER_MS), first_attempt_at: null },
      { status: 'pending', attempt_count: 0, next_attempt_at: new Date(now + SECRET_UNREADABLE_DEFER_MS), first_attempt_at: null },
    ]);
    // Not due again before the deferral ends.
    expect(await store.claimDue(now + 1000, 10, now + 61_000)).toEqual([]);
  });

  it('puts back a retry exactly as it was: attempt number, first and last attempt times', async () => {
    const type = `case.updated.${randomUUID()}`;
    const broken = await subscription(null, [type]);
    const foreign = new SecretBox(randomBytes(32)).encrypt(generateSecret(), broken.id);
    await pool.query('UPDATE webhook.subscriptions SET secret_ciphertext = $2 WHERE id = $1', [broken.id, foreign]);
    await deliveries.fanOutMany([event(type, [])], T0);
    // Two attempts already made: the first at T0, the last at T0 + 60 s.
    await pool.query(
      'UPDATE webhook.deliveries SET attempt_count = 2, first_attempt_at = $2, last_attempt_at = $3, next_attempt_at = $4 WHERE subscription_id = $1',
      [broken.id, new Date(T0), new Date(T0 + 60_000), new Date(T0 + 360_000)],
    );
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1", [
      broken.id,
    ]);
    const now = T0 + 400_000;
    expect(await deliveries.claimDue(now, 10, now + 60_000)).toEqual([]);
    const { rows } = await pool.query(
      'SELECT attempt_count, first_attempt_at, last_attempt_at, next_attempt_at FROM webhook.deliveries WHERE subscription_id = $1',
      [broken.id],
    );
    expect(rows).toEqual([
      {
        attempt_count: 2,
        first_attempt_at: new Date(T0),
        last_attempt_at: new Date(T0 + 60_000),
        next_attempt_at: new Date(now + SECRET_UNREADABLE_DEFER_MS),
      },
    ]);
  });

  it('releaseClaims undoes only the latest claim of a delivery', async () => {
    const type = `case.new.${randomUUID()}`;
    const sub = await subscription(null, [type]);
    await deliveries.fanOutMany([event(type, [])], T0);
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending' AND subscription_id <> $1", [
      sub.id,
    ]);
    const [first] = await deliveries.claimDue(T0 + 1000, 10, T0 + 2000);
    // The lease ended without a recorded outcome: claimed again (attempt 2).
    const [second] = await deliveries.claimDue(T0 + 3000, 10, T0 + 4000);
    expect([first?.attempt, second?.attempt]).toEqual([1, 2]);
    expect(await deliveries.releaseClaims([first?.claim as ClaimRef], T0 + 3500, T0 + 9000)).toBe(0);
    expect(await deliveries.releaseClaims([second?.claim as ClaimRef], T0 + 3500, T0 + 9000)).toBe(1);
    const { rows } = await pool.query(
      'SELECT attempt_count, first_attempt_at, last_attempt_at, next_attempt_at FROM webhook.deliveries WHERE subscription_id = $1',
      [sub.id],
    );
    expect(rows).toEqual([
      {
        attempt_count: 1,
        first_attempt_at: new Date(T0 + 1000),
        last_attempt_at: new Date(T0 + 1000),
        next_attempt_at: new Date(T0 + 9000),
      },
    ]);
  });
});

describe('per-subscription limits in the claim', () => {
  async function limited(n: number, limits: { rate_limit_per_second?: number | null; max_in_flight?: number }) {
    const type = `case.new.${randomUUID()}`;
    const sub = await subs.create(
      {
        id: `wh_${randomUUID()}`,
        account_id: `acct_${randomUUID()}`,
        url: 'https://hooks.example.com/fcd',
        events: [type],
        facility_ids: null,
        secret: generateSecret(),
        now: T0,
        ...limits,
      },
      25,
    );
    await deliveries.fanOutMany(
      Array.from({ length: n }, () => event(type, [])),
      T0,
    );
    return sub;
  }
  const mine = (sub: { id: string }, claimed: ClaimedDelivery[]) => claimed.filter((c) => c.subscriptionId === sub.id);
  const counts = async (sub: { id: string }) =>
    (
      await pool.query<{ attempt_count: number; n: number }>(
        'SELECT attempt_count, count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1 GROUP BY 1 ORDER BY 1',
        [sub.id],
      )
    ).rows;

  it('max_in_flight: claims only what is not leased yet; a recorded attempt frees its place; held ones use no attempt', async () => {
    const sub = await limited(5, { max_in_flight: 2 });
    const now = Date.now();
    const first = mine(sub, await deliveries.claimDue(now, 100, now + 60_000));
    expect(first).toHaveLength(2);
    const again = await deliveries.claim(now + 1, 100, now + 60_000);
    expect(mine(sub, again.claimed)).toHaveLength(0);
    expect(again.held.inFlight).toBeGreaterThanOrEqual(1);
    expect(await counts(sub)).toEqual([
      { attempt_count: 0, n: 3 },
      { attempt_count: 1, n: 2 },
    ]);
    await deliveries.recordAttempt(
      first[0] as ClaimedDelivery,
      { startedAt: now, finishedAt: now + 5, durationMs: 5, responseStatus: 204, error: null, success: true },
      () => ({ status: 'succeeded' }),
    );
    expect(mine(sub, await deliveries.claimDue(now + 10, 100, now + 60_000))).toHaveLength(1);
    // An expired lease (a replica died mid-send) no longer counts as in flight.
    expect(mine(sub, await deliveries.claimDue(now + 61_000, 100, now + 120_000))).toHaveLength(2);
  });

  it('max_in_flight: a leased delivery whose request is answered (named by the claimer) frees its place before it is recorded', async () => {
    const sub = await limited(4, { max_in_flight: 2 });
    const now = Date.now();
    const first = mine(sub, await deliveries.claimDue(now, 100, now + 60_000));
    expect(first).toHaveLength(2);
    const [a, b] = first as [ClaimedDelivery, ClaimedDelivery];
    // Both still leased and neither answered: nothing more.
    expect(mine(sub, (await deliveries.claim(now + 1, 100, now + 60_000, [])).claimed)).toHaveLength(0);
    // `a` has its response: one place frees up, while `a` stays leased and pending until recorded.
    const next = mine(sub, (await deliveries.claim(now + 2, 100, now + 60_000, [a.id])).claimed);
    expect(next).toHaveLength(1);
    expect(next[0]?.id).not.toBe(a.id);
    expect(next[0]?.id).not.toBe(b.id);
    const leased = await pool.query<{ id: string; status: string }>(
      'SELECT id, status FROM webhook.deliveries WHERE subscription_id = $1 AND leased_until IS NOT NULL ORDER BY id',
      [sub.id],
    );
    expect(leased.rows).toEqual([a.id, b.id, (next[0] as ClaimedDelivery).id].sort().map((id) => ({ id, status: 'pending' })));
    // Now `b` and the new one are in flight (a is answered): the limit of 2 holds again.
    expect(mine(sub, (await deliveries.claim(now + 3, 100, now + 60_000, [a.id])).claimed)).toHaveLength(0);
    expect(await counts(sub)).toEqual([
      { attempt_count: 0, n: 1 },
      { attempt_count: 1, n: 3 },
    ]);
  });

  it('rate_limit_per_second: one start per 220 ms at 5/s, and the claim says when to come back', async () => {
    const sub = await limited(5, { rate_limit_per_second: 5, max_in_flight: 64 });
    const now = Date.now();
    const first = await deliveries.claim(now, 100, now + 60_000);
    expect(mine(sub, first.claimed)).toHaveLength(1);
    expect(first.wakeAt).not.toBeNull();
    expect((first.wakeAt as number) - now).toBeGreaterThan(150);
    expect((first.wakeAt as number) - now).toBeLessThanOrEqual(225);
    const again = await deliveries.claim(now, 100, now + 60_000);
    expect(mine(sub, again.claimed)).toHaveLength(0);
    expect(again.held.rate).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, (first.wakeAt as number) - now + 5));
    expect(mine(sub, (await deliveries.claim(Date.now(), 100, Date.now() + 60_000)).claimed)).toHaveLength(1);
    expect(await counts(sub)).toEqual([
      { attempt_count: 0, n: 3 },
      { attempt_count: 1, n: 2 },
    ]);
  });

  it('a rate-limited delivery carries its start deadline from the claim; given back unsent, it uses no attempt and is paced again', async () => {
    const paced = await limited(2, { rate_limit_per_second: 5, max_in_flight: 64 });
    const free = await limited(1, {});
    const now = Date.now();
    // The caller's clock, read once, just before the statements (an explicit time, apart from `now`).
    const reads: number[] = [];
    const first = await deliveries.claim(now, 100, now + 60_000, [], () => {
      reads.push(now + 7);
      return now + 7;
    });
    expect(reads).toHaveLength(1);
    const [taken] = mine(paced, first.claimed);
    expect(mine(paced, first.claimed)).toHaveLength(1);
    expect(taken?.startBy).toBe(now + 7 + 50);
    expect(mine(free, first.claimed).map((c) => c.startBy)).toEqual([null]);
    // Its start would be too late: the claim is given back, due at once, with no attempt used.
    expect(await deliveries.releaseClaims([(taken as ClaimedDelivery).claim], now + 100, now + 100)).toBe(1);
    expect(await counts(paced)).toEqual([{ attempt_count: 0, n: 2 }]);
    // Its pacing slot is spent: the next claim holds the subscription until its next start (no hot loop)...
    const again = await deliveries.claim(Date.now(), 100, Date.now() + 60_000);
    expect(mine(paced, again.claimed)).toHaveLength(0);
    expect(again.held.rate).toBeGreaterThanOrEqual(1);
    // ...and then takes one of them, paced as before (5/s: 220 ms after the first start, its tat).
    const { rows } = await pool.query<{ tat: number }>(
      'SELECT extract(epoch FROM rate_tat) * 1000 AS tat FROM webhook.subscriptions WHERE id = $1',
      [paced.id],
    );
    await new Promise((r) => setTimeout(r, Math.max(0, Number(rows[0]?.tat) - Date.now()) + 5));
    expect(mine(paced, (await deliveries.claim(Date.now(), 100, Date.now() + 60_000)).claimed)).toHaveLength(1);
    expect(await counts(paced)).toEqual([
      { attempt_count: 0, n: 1 },
      { attempt_count: 1, n: 1 },
    ]);
  });

  it('reads the clock of the start deadline once a client is held: the wait for the pool does not count', async () => {
    const one = createPool({
      connectionString: db.url,
      applicationName: 'webhooks-deliveries-one',
      max: 1,
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
    const holder = await one.connect();
    let released = false;
    try {
      const reads: boolean[] = [];
      const claiming = new DeliveryStore(one, box).claim(Date.now(), 100, Date.now() + 60_000, [], () => {
        reads.push(released);
        return Date.now();
      });
      // The claim waits for the pool's only client; the clock must not have been read yet.
      await eventually(
        async () => one.waitingCount,
        (n) => n === 1,
      );
      expect(reads).toEqual([]);
      released = true;
      holder.release();
      await claiming;
      expect(reads).toEqual([true]);
    } finally {
      if (!released) holder.release();
      await one.end();
    }
  });
});

describe('fairness of the claim', () => {
  it('takes due deliveries round-robin across subscriptions, not the deepest backlog first', async () => {
    // Nothing else due: park every other pending delivery of this database.
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending'");
    const make = async (n: number, at: number) => {
      const type = `case.new.${randomUUID()}`;
      const sub = await subs.create(
        {
          id: `wh_${randomUUID()}`,
          account_id: `acct_${randomUUID()}`,
          url: 'https://hooks.example.com/fcd',
          events: [type],
          facility_ids: null,
          secret: generateSecret(),
          now: T0,
          max_in_flight: 64,
        },
        25,
      );
      await deliveries.fanOutMany(
        Array.from({ length: n }, () => event(type, [])),
        at,
      );
      return sub;
    };
    // A deep, older backlog and two small, newer ones.
    const deep = await make(20, T0);
    const small = await make(3, T0 + 10_000);
    const smaller = await make(2, T0 + 20_000);
    const now = Date.now();
    const claimed = await deliveries.claimDue(now, 9, now + 60_000);
    const per = (sub: { id: string }) => claimed.filter((c) => c.subscriptionId === sub.id).length;
    expect([per(deep), per(small), per(smaller)]).toEqual([4, 3, 2]);
  });

  it("takes a live event before a recovery's backlog: recovered deliveries are due at the recovery's pace, not all at once", async () => {
    await pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01' WHERE status = 'pending'");
    const type = 'violation.new';
    const sub = await subs.create(
      {
        id: `wh_${randomUUID()}`,
        account_id: `acct_${randomUUID()}`,
        url: 'https://hooks.example.com/fcd',
        events: [type],
        facility_ids: null,
        secret: generateSecret(),
        now: T0 - 1000,
        max_in_flight: 64,
      },
      25,
    );
    // 1,000 logged events the subscription missed, recovered now: paced at the default 10/s.
    await pool.query(
      `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at)
       SELECT x.id, $2, x.at, '{}'::uuid[], json_build_object('id', x.id, 'type', $2::text, 'data', json_build_object())::text, x.at
         FROM (SELECT 'evt_' || gen_random_uuid() AS id, $1::timestamptz + g * interval '1 second' AS at FROM generate_series(0, 999) g) x`,
      [new Date(T0), type],
    );
    const now = Date.now();
    const recovery = await recoverEvents(pool, { subscriptionId: sub.id, since: T0, until: T0 + 1_000_000, dryRun: false, now });
    expect(recovery).toMatchObject({ status: 'done', events: 1000 });
    // Two live events 50 ms later, and a claim with room for far more than they need.
    const live = [event(type, []), event(type, [])];
    await deliveries.fanOutMany(live, now + 50);
    const mine = (claimed: ClaimedDelivery[]) => claimed.filter((c) => c.subscriptionId === sub.id);
    const first = mine(await deliveries.claimDue(now + 50, 100, now + 60_000));
    // Both live events, and of the recovery only what its pace has made due (the one due at now).
    expect(first.filter((c) => live.some((e) => e.id === c.eventId))).toHaveLength(2);
    expect(first).toHaveLength(3);
    // A second later, the recovery's next 10 (one per 100 ms), no more.
    expect(mine(await deliveries.claimDue(now + 1050, 100, now + 60_000))).toHaveLength(10);
  });
});
