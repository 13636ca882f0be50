import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool, withTransaction } from '@fcd/service-kit';
import { createTestDatabase, eventually, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeliveryStore,
  EventLog,
  eventFacilityIds,
  generateSecret,
  type LoggedEvent,
  SecretBox,
  SubscriptionStore,
  WEBHOOK_SCHEMA,
  webhookMigrations,
} from '../src/index';

let db: TestDatabase;
let pool: Pool;
let log: EventLog;
let subs: SubscriptionStore;
let deliveries: DeliveryStore;
const box = new SecretBox(randomBytes(32));
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';

/** A logged event with a real envelope (matching reads its facility references). */
function event(type: string, facilities: string[], createdAt = T0): LoggedEvent {
  const id = `evt_${randomUUID()}`;
  const data =
    type === 'violation.new'
      ? { violation: { id: randomUUID(), facility_id: facilities[0] } }
      : type === 'facility.status_changed'
        ? { facility: { id: facilities[0] }, previous_status: 'no_violation' }
        : { case: { id: randomUUID(), facility_ids: facilities } };
  const envelope = { id, type, created_at: new Date(createdAt).toISOString(), data };
  return { id, type, body: JSON.stringify(envelope), facilityIds: eventFacilityIds(envelope), createdAt };
}

const append = (events: LoggedEvent[], now = T0) => withTransaction(pool, (client) => EventLog.append(client, events, now));

/** A subscription to `events` of `facilities`. */
const subscribe = (events: string[], facilities: string[]) =>
  subs.create(
    {
      id: `wh_${randomUUID()}`,
      account_id: `acct_${randomUUID()}`,
      url: 'https://hooks.example.com/fcd',
      events,
      facility_ids: facilities,
      secret: generateSecret(),
      now: T0,
    },
    25,
  );

/** Until one backend other than `pid` waits for a lock of `locktype`. */
const waitingOn = (locktype: 'advisory' | 'transactionid', pid: number | undefined) =>
  eventually(
    async () =>
      (
        await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_locks WHERE locktype = $1 AND NOT granted AND pid <> $2', [
          locktype,
          pid,
        ])
      ).rows[0]?.n,
    (n) => n === 1,
  );

beforeAll(async () => {
  db = await createTestDatabase('webhooks_event_log');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-event-log-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  subs = new SubscriptionStore(pool, box);
  deliveries = new DeliveryStore(pool, box);
  log = new EventLog(pool);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('EventLog', () => {
  it('appends in order, once per event id, only the public event types; lists oldest first with filters and gets one', async () => {
    await pool.query('TRUNCATE webhook.events');
    const a = event('violation.new', [F1], T0);
    const b = event('case.new', [F2, F1], T0 + 1000);
    const c = event('facility.status_changed', [F2], T0 + 2000);
    const other = { ...event('violation.new', [F1]), type: 'something.else' };
    expect(await append([a, b, a, other])).toBe(2);
    expect(await append([c, b])).toBe(1);
    const all = await log.list({}, 10);
    expect(all.has_more).toBe(false);
    expect(all.items.map((e) => e.id)).toEqual([a.id, b.id, c.id]);
    expect(all.items.map((e) => e.body)).toEqual([a.body, b.body, c.body]);
    const positions = all.items.map((e) => BigInt(e.position));
    expect([...positions].sort((x, y) => (x < y ? -1 : 1))).toEqual(positions);

    const page = await log.list({}, 2);
    expect([page.items.map((e) => e.id), page.has_more]).toEqual([[a.id, b.id], true]);
    const rest = await log.list({}, 2, page.items[1]?.position);
    expect([rest.items.map((e) => e.id), rest.has_more]).toEqual([[c.id], false]);

    expect((await log.list({ type: 'case.new' }, 10)).items.map((e) => e.id)).toEqual([b.id]);
    expect((await log.list({ facilityId: F1 }, 10)).items.map((e) => e.id)).toEqual([a.id, b.id]);
    expect((await log.list({ facilityId: F2.toUpperCase() }, 10)).items.map((e) => e.id)).toEqual([b.id, c.id]);
    expect((await log.list({ since: T0 + 1000 }, 10)).items.map((e) => e.id)).toEqual([b.id, c.id]);
    expect((await log.list({ type: 'violation.new', facilityId: F2 }, 10)).items).toEqual([]);

    expect(await log.get(b.id)).toEqual({ position: all.items[1]?.position, id: b.id, body: b.body });
    expect(await log.get(other.id)).toBeUndefined();
  });

  it('pages in position order past any number of digits (9 before 10), cursor after cursor', async () => {
    await pool.query('TRUNCATE webhook.events RESTART IDENTITY');
    const events = Array.from({ length: 23 }, (_, i) => event('violation.new', [F1], T0 + i));
    for (const e of events) await append([e]);
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await log.list({}, 4, after);
      seen.push(...page.items.map((e) => e.id));
      after = page.items[page.items.length - 1]?.position ?? after;
      if (!page.has_more) break;
    }
    expect(seen).toEqual(events.map((e) => e.id));
    expect(after).toBe('23');
  });

  it('assigns positions in commit order: an append waits for an earlier uncommitted one, so a reader never skips a row', async () => {
    await pool.query('TRUNCATE webhook.events');
    const first = event('violation.new', [F1]);
    const second = event('violation.new', [F1]);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await EventLog.append(holder, [first], T0);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // The second append starts while the first is uncommitted: it waits on the append lock.
      const later = append([second]);
      await waitingOn('advisory', rows[0]?.pid);
      expect((await log.list({}, 10)).items).toEqual([]);
      await holder.query('COMMIT');
      expect(await later).toBe(1);
    } finally {
      holder.release();
    }
    const listed = await log.list({}, 10);
    expect(listed.items.map((e) => e.id)).toEqual([first.id, second.id]);
    expect(BigInt(listed.items[1]?.position ?? 0)).toBeGreaterThan(BigInt(listed.items[0]?.position ?? 0));
  });

  it('fans out and logs in one statement: behind an uncommitted append neither is visible, then both; once per event', async () => {
    await pool.query('TRUNCATE webhook.events');
    const sub = await subscribe(['violation.new'], [F2]);
    const first = event('violation.new', [F1]);
    const second = event('violation.new', [F2]);
    const other = { ...event('violation.new', [F2]), type: 'something.else' };
    const mine = async () =>
      (await pool.query<{ event_id: string }>('SELECT event_id FROM webhook.deliveries WHERE subscription_id = $1', [sub.id])).rows;
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await EventLog.append(holder, [first], T0);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const later = deliveries.fanOutAndLog([second, other, second], T0 + 1);
      await waitingOn('advisory', rows[0]?.pid);
      // The statement waits on the append lock with its deliveries uncommitted: nothing is seen.
      expect(await mine()).toEqual([]);
      await holder.query('COMMIT');
      const created = await later;
      expect(created.map((ids) => ids.length)).toEqual([1, 0, 0]);
      expect(await mine()).toEqual([{ event_id: second.id }]);
    } finally {
      holder.release();
    }
    const listed = await log.list({}, 10);
    expect(listed.items.map((e) => e.id)).toEqual([first.id, second.id]);
    expect(BigInt(listed.items[1]?.position ?? 0)).toBeGreaterThan(BigInt(listed.items[0]?.position ?? 0));
    // Redelivered: no delivery and no log row more.
    expect(await deliveries.fanOutAndLog([second], T0 + 2)).toEqual([[]]);
    expect((await log.list({}, 10)).items.map((e) => e.id)).toEqual([first.id, second.id]);
    // An event of no public type is fanned out (to no one here) without taking the log's lock.
    expect(await deliveries.fanOutAndLog([other], T0 + 3)).toEqual([[]]);
  });

  it('does not hold the append lock while its insert waits on a subscription another transaction locks', async () => {
    const facility = randomUUID();
    const sub = await subscribe(['violation.new'], [facility]);
    const holder = await pool.connect();
    try {
      // As a DELETE of the subscription would: a lock that conflicts with the foreign key's.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM webhook.subscriptions WHERE id = $1 FOR UPDATE', [sub.id]);
      const matching = deliveries.fanOutAndLog([event('violation.new', [facility])], T0);
      const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await waitingOn('transactionid', rows[0]?.pid);
      // Another event, matching nothing, is fanned out and logged meanwhile.
      const other = event('violation.new', [F1]);
      expect(await deliveries.fanOutAndLog([other], T0 + 1)).toEqual([[]]);
      expect((await log.get(other.id))?.id).toBe(other.id);
      await holder.query('COMMIT');
      expect((await matching).map((ids) => ids.length)).toEqual([1]);
    } finally {
      holder.release();
    }
  });

  it('prunes the events created before a time, in batches, and keeps the rest', async () => {
    await pool.query('TRUNCATE webhook.events');
    const old = Array.from({ length: 5 }, (_, i) => event('violation.new', [F1], T0 - 40 * 86_400_000 + i));
    const recent = [event('case.new', [F1], T0), event('violation.new', [F2], T0 + 1)];
    await append([...old, ...recent]);
    expect(await log.prune(T0 - 30 * 86_400_000, 2)).toBe(5);
    expect((await log.list({}, 10)).items.map((e) => e.id)).toEqual(recent.map((e) => e.id));
    expect(await log.prune(T0 - 30 * 86_400_000, 2)).toBe(0);
  });

  it('recovers the matching events of a window not received successfully and not pending, once; a dry run writes nothing', async () => {
    await pool.query('TRUNCATE webhook.events');
    const sub = await subscribe(['violation.new', 'case.new'], [F1]);
    const at = (s: number) => T0 + s * 1000;
    const before = event('violation.new', [F1], at(0));
    const succeeded = event('violation.new', [F1], at(1));
    const cancelled = event('case.new', [F2, F1], at(2));
    const pending = event('violation.new', [F1], at(3));
    const missed = event('violation.new', [F1], at(4));
    const otherFacility = event('violation.new', [F2], at(5));
    const otherType = event('facility.status_changed', [F1], at(6));
    const after = event('case.new', [F1], at(10));
    const all = [before, succeeded, cancelled, pending, missed, otherFacility, otherType, after];
    await append(all);
    // Deliveries as the fan-out left them: succeeded, cancelled (inactive meanwhile), still pending.
    await deliveries.fanOutMany([succeeded, cancelled, pending], at(7));
    const status = async (eventId: string, s: string) =>
      pool.query('UPDATE webhook.deliveries SET status = $3 WHERE subscription_id = $1 AND event_id = $2', [sub.id, eventId, s]);
    await status(succeeded.id, 'succeeded');
    await status(cancelled.id, 'cancelled');
    const rows = async () =>
      (
        await pool.query<{ event_id: string; status: string; recovery: boolean; body: string }>(
          'SELECT event_id, status, recovery, body FROM webhook.deliveries WHERE subscription_id = $1 AND recovery ORDER BY event_id',
          [sub.id],
        )
      ).rows;

    const window = { subscriptionId: sub.id, since: at(1), until: at(10), now: at(20) };
    const done = { status: 'done', events: 2, since: at(1), nextSince: null };
    expect(await log.recover({ ...window, dryRun: true })).toEqual(done);
    expect(await rows()).toEqual([]);
    expect(await log.recover({ ...window, dryRun: false })).toEqual(done);
    const recovered = await rows();
    expect(recovered).toEqual(
      [cancelled, missed]
        .map((e) => ({ event_id: e.id, status: 'pending', recovery: true, body: e.body }))
        .sort((x, y) => x.event_id.localeCompare(y.event_id)),
    );
    // Those are pending now, paced at the default 10/s: a second recovery is refused until they are
    // sent (the last is due 100 ms after the first), and a dry run finds nothing more to send.
    expect(await log.recover({ ...window, dryRun: false })).toEqual({ status: 'in_progress', lastDueAt: at(20) + 100 });
    expect(await log.recover({ ...window, dryRun: true })).toEqual({ ...done, events: 0 });
    // The fan-out of an already logged event still creates nothing new (recovered rows do not count).
    expect(await deliveries.fanOutMany([cancelled], at(21))).toEqual([[]]);

    await subs.update(sub.account_id, sub.id, { is_active: false }, at(22));
    expect(await log.recover({ ...window, dryRun: true })).toEqual({ status: 'inactive' });
    expect(await log.recover({ ...window, subscriptionId: `wh_${randomUUID()}`, dryRun: true })).toEqual({ status: 'not_found' });
  });
});
