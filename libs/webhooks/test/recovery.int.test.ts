import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EventLog,
  generateSecret,
  RECOVERY_STATEMENTS,
  recoverEvents,
  SecretBox,
  type SubscriptionFilter,
  SubscriptionStore,
  takeRecoverCall,
  WEBHOOK_SCHEMA,
  webhookMigrations,
} from '../src/index';

/**
 * Recovery bounded (docs/webhooks.md "Recovery"): from the subscription's creation on, at most
 * 10,000 events per call with the next `since`, one at a time per subscription without waiting on
 * a connection, paced deliveries, index plans on tables never analysed, and the per-account rate.
 */

let db: TestDatabase;
let pool: Pool;
let subs: SubscriptionStore;
let log: EventLog;
const box = new SecretBox(randomBytes(32));
const T0 = Date.parse('2026-11-22T08:00:00.000Z');

/** `n` violation.new events in the log, created `stepMs` apart from `from`, in one statement. */
async function insertEvents(n: number, from: number, stepMs: number, type = 'violation.new'): Promise<void> {
  await pool.query(
    `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at)
     SELECT x.id, $4, x.at, '{}'::uuid[],
            json_build_object('id', x.id, 'type', $4::text, 'created_at', to_char(x.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                              'data', json_build_object('violation', json_build_object('id', gen_random_uuid())))::text,
            x.at
       FROM (SELECT 'evt_' || gen_random_uuid() AS id, $1::timestamptz + g * $3 * interval '1 millisecond' AS at
               FROM generate_series(0, $2::int - 1) g) x`,
    [new Date(from), n, stepMs, type],
  );
}

async function subscription(
  createdAt: number,
  options: { rate?: number; events?: string[]; facilityIds?: string[] | null; filter?: SubscriptionFilter | null } = {},
) {
  const sub = await subs.create(
    {
      id: `wh_${randomUUID()}`,
      account_id: `acct_${randomUUID()}`,
      url: 'https://hooks.example.com/fcd',
      events: options.events ?? ['violation.new'],
      facility_ids: options.facilityIds ?? null,
      filter: options.filter ?? null,
      secret: generateSecret(),
      now: createdAt,
      ...(options.rate ? { rate_limit_per_second: options.rate } : {}),
    },
    25,
  );
  return sub;
}

const recovered = async (subscriptionId: string) =>
  (
    await pool.query<{ created_at: Date; next_attempt_at: Date }>(
      `SELECT e.created_at, d.next_attempt_at FROM webhook.deliveries d JOIN webhook.events e ON e.id = d.event_id
        WHERE d.subscription_id = $1 AND d.recovery ORDER BY d.next_attempt_at`,
      [subscriptionId],
    )
  ).rows.map((r) => ({ created: r.created_at.getTime(), due: r.next_attempt_at.getTime() }));

beforeAll(async () => {
  db = await createTestDatabase('webhooks_recovery');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-recovery-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  // "Never analysed": no autovacuum analyse behind the test's back.
  for (const table of ['events', 'deliveries', 'subscriptions'])
    await pool.query(`ALTER TABLE webhook.${table} SET (autovacuum_enabled = false)`);
  subs = new SubscriptionStore(pool, box);
  log = new EventLog(pool);
  // 25,000 events, one a second from T0 (about 7 hours).
  await insertEvents(25_000, T0, 1000);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('recovery bounds', () => {
  it('sends nothing from before the subscription was created: the window starts at its created_at', async () => {
    const created = T0 + 20_000_000; // 5,000 events later
    const sub = await subscription(created);
    const result = await log.recover({ subscriptionId: sub.id, since: T0, until: T0 + 21_000_000, dryRun: false, now: created + 1 });
    expect(result).toEqual({ status: 'done', events: 1000, since: created, nextSince: null });
    const rows = await recovered(sub.id);
    expect(rows).toHaveLength(1000);
    expect(Math.min(...rows.map((r) => r.created))).toBe(created);
    expect(rows.every((r) => r.created >= created)).toBe(true);
    // A window that ends before the creation is empty.
    const other = await subscription(created);
    expect(await log.recover({ subscriptionId: other.id, since: T0, until: created - 1, dryRun: false, now: created + 1 })).toEqual({
      status: 'done',
      events: 0,
      since: created - 1,
      nextSince: null,
    });
  });

  it('enqueues at most 10,000 events of a 25,000-event window and returns where the next call starts; the calls together cover it once', async () => {
    const sub = await subscription(T0 - 1000, { rate: 50 });
    const now = T0 + 30_000_000;
    const first = await log.recover({ subscriptionId: sub.id, since: T0, until: now, dryRun: false, now });
    // The 10,001st event of the window, one a second from T0.
    expect(first).toEqual({ status: 'done', events: 10_000, since: T0, nextSince: T0 + 10_000_000 });
    // Paced at the subscription's 50/s: 20 ms apart, the last 199.98 s after the first.
    const rows = await recovered(sub.id);
    expect(rows).toHaveLength(10_000);
    expect(rows[0]?.due).toBe(now);
    expect(rows[1]?.due).toBe(now + 20);
    expect(rows[9_999]?.due).toBe(now + 9_999 * 20);
    // While they are pending, the next call is refused (one recovery in progress), not queued.
    expect(await log.recover({ subscriptionId: sub.id, since: T0 + 10_000_000, until: now, dryRun: false, now })).toEqual({
      status: 'in_progress',
      lastDueAt: now + 9_999 * 20,
    });
    // Once they are sent, the next calls go on from next_since until the window is done.
    await pool.query("UPDATE webhook.deliveries SET status = 'succeeded' WHERE subscription_id = $1", [sub.id]);
    const second = await log.recover({ subscriptionId: sub.id, since: T0 + 10_000_000, until: now, dryRun: false, now });
    expect(second).toEqual({ status: 'done', events: 10_000, since: T0 + 10_000_000, nextSince: T0 + 20_000_000 });
    await pool.query("UPDATE webhook.deliveries SET status = 'succeeded' WHERE subscription_id = $1", [sub.id]);
    const third = await log.recover({ subscriptionId: sub.id, since: T0 + 20_000_000, until: now, dryRun: false, now });
    expect(third).toEqual({ status: 'done', events: 5_000, since: T0 + 20_000_000, nextSince: null });
    const all = await recovered(sub.id);
    expect(new Set(all.map((r) => r.created)).size).toBe(25_000);
  }, 60_000);

  it('paces a subscription without a rate at the default 10/s, and a dry run counts up to the cap without writing', async () => {
    const sub = await subscription(T0 - 1000);
    const now = T0 + 30_000_000;
    expect(await log.recover({ subscriptionId: sub.id, since: T0, until: now, dryRun: true, now })).toEqual({
      status: 'done',
      events: 10_000,
      since: T0,
      nextSince: T0 + 10_000_000,
    });
    expect(await recovered(sub.id)).toEqual([]);
    await log.recover({ subscriptionId: sub.id, since: T0, until: T0 + 3000, dryRun: false, now });
    expect((await recovered(sub.id)).map((r) => r.due)).toEqual([now, now + 100, now + 200]);
  });

  it('does not wait for the lock of a recovery running elsewhere: busy at once, no connection held waiting', async () => {
    const sub = await subscription(T0 - 1000);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`webhook.recover:${sub.id}`]);
      const started = Date.now();
      const results = await Promise.all(
        Array.from({ length: 5 }, () =>
          recoverEvents(pool, { subscriptionId: sub.id, since: T0, until: T0 + 5000, dryRun: false, now: T0 + 1 }),
        ),
      );
      expect(results).toEqual(Array.from({ length: 5 }, () => ({ status: 'busy' })));
      expect(Date.now() - started).toBeLessThan(2000);
      // Nothing of this test is left waiting on a lock in Postgres.
      const waiting = await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
      );
      expect(waiting.rows[0]?.n).toBe(0);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await recoverEvents(pool, { subscriptionId: sub.id, since: T0, until: T0 + 5000, dryRun: false, now: T0 + 1 })).toMatchObject({
      status: 'done',
      events: 5,
    });
  });

  it('reads the window by index on tables never analysed (EXPLAIN), not by a join whose plan depends on statistics', async () => {
    const sub = await subscription(T0 - 1000);
    const analysed = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_user_tables WHERE schemaname = 'webhook' AND relname IN ('events', 'deliveries')
          AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)`,
    );
    expect(analysed.rows[0]?.n).toBe(0);
    const plan = async (sql: string, params: unknown[]) =>
      (await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params)).rows.map((r) => r['QUERY PLAN']).join('\n');
    const ids = Array.from({ length: 1000 }, () => `evt_${randomUUID()}`);
    // The page takes the subscription's types and facilities, and reads its filter from its row.
    const page = async (types: string[], facilities: string[] | null, filter: SubscriptionFilter | null = null) => {
      const s = await subscription(T0 - 1000, { events: types, facilityIds: facilities, filter });
      return plan(RECOVERY_STATEMENTS.page, [new Date(T0), '0', new Date(T0 + 30_000_000), types, facilities, s.id, 500]);
    };
    const received = async () => {
      const text = await plan(RECOVERY_STATEMENTS.received, [sub.id, ids]);
      expect(text, text).toMatch(/deliveries_fan_out_once/);
      expect(text, text).toMatch(/deliveries_recovered/);
      expect(text, text).not.toMatch(/Seq Scan/);
    };
    const ALL_TYPES = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'];
    // Never analysed: per type, an ordered range of events_type_created that the LIMIT stops; the
    // one full Sort is the merge of the types' pages (at most 4 × 500 rows).
    for (const types of [['violation.new'], ALL_TYPES]) {
      const cases: Array<[string[] | null, SubscriptionFilter | null]> = [
        [null, null],
        [[randomUUID()], null],
        [null, { states: ['OH'], severities: ['significant'] }],
      ];
      for (const [facilities, filter] of cases) {
        const text = await page(types, facilities, filter);
        expect(text, text).toMatch(/Index (Only )?Scan using events_type_created on events/);
        expect(text, text).not.toMatch(/Seq Scan|Bitmap/);
        expect(text.match(/-> {2}Sort {2}/g), text).toHaveLength(1);
      }
    }
    await received();
    // Analysed (25,000 events, 35,000 deliveries by now): still an ordered index range (by
    // created_at when the type selects nothing), or, for a subscription to a few facilities, the
    // GIN index of those facilities' events; never a sequential read of the log.
    await pool.query('ANALYZE webhook.events');
    await pool.query('ANALYZE webhook.deliveries');
    for (const types of [['violation.new'], ALL_TYPES]) {
      const text = await page(types, null);
      expect(text, text).toMatch(/Index (Only )?Scan using events_(type_created|created_at) on events/);
      expect(text, text).not.toMatch(/Seq Scan|Bitmap/);
      expect(text.match(/-> {2}Sort {2}/g), text).toHaveLength(1);
      expect(await page(types, [randomUUID()])).toMatch(
        /(Index (Only )?Scan using events_(type_created|created_at)|Bitmap Index Scan on events_facility_ids) /,
      );
    }
    await received();
  });
});

describe('recover rate per account', () => {
  it('takes 10 calls at once, then refuses with the seconds to wait, one more every 6 s; accounts apart', async () => {
    const account = `acct_${randomUUID()}`;
    const now = T0;
    const calls = await Promise.all(Array.from({ length: 12 }, () => takeRecoverCall(pool, account, now)));
    expect(calls.filter((c) => c.allowed)).toHaveLength(10);
    expect(calls.filter((c) => !c.allowed)).toEqual([
      { allowed: false, retryAfterSeconds: 6 },
      { allowed: false, retryAfterSeconds: 6 },
    ]);
    expect(await takeRecoverCall(pool, account, now + 3000)).toEqual({ allowed: false, retryAfterSeconds: 3 });
    expect(await takeRecoverCall(pool, account, now + 6000)).toEqual({ allowed: true });
    expect(await takeRecoverCall(pool, account, now + 6000)).toEqual({ allowed: false, retryAfterSeconds: 6 });
    expect(await takeRecoverCall(pool, `acct_${randomUUID()}`, now)).toEqual({ allowed: true });
  });
});
