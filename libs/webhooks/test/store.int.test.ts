import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryStore, generateSecret, SecretBox, SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } from '../src/index';

let db: TestDatabase;
let pool: Pool;
let store: SubscriptionStore;
const box = new SecretBox(randomBytes(32));
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';

const account = () => `acct_${randomUUID()}`;
const whId = () => `wh_${randomUUID()}`;
const newSub = (accountId: string, now: number, extra: Partial<{ events: string[]; facility_ids: string[] | null }> = {}) => ({
  id: whId(),
  account_id: accountId,
  url: 'https://hooks.example.com/fcd',
  events: ['violation.new'],
  facility_ids: null,
  secret: generateSecret(),
  now,
  ...extra,
});

beforeAll(async () => {
  db = await createTestDatabase('webhooks_store');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-store-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  store = new SubscriptionStore(pool, box);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('webhook schema migrations', () => {
  it('create subscriptions, deliveries, delivery_attempts, events and the recover rate, and re-running them applies nothing', async () => {
    const { rows } = await pool.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'webhook' ORDER BY table_name",
    );
    expect(rows.map((r) => r.table_name)).toEqual([
      'deliveries',
      'delivery_attempts',
      'events',
      'recover_rate',
      'schema_migrations',
      'subscriptions',
    ]);
    expect(await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations)).toEqual([]);
  });
});

describe('SubscriptionStore', () => {
  it('creates a subscription with the redacted secret and stores the secret encrypted, decryptable for signing', async () => {
    const input = newSub(account(), T0, { facility_ids: [F1.toUpperCase(), F2] });
    const created = await store.create(input, 25);
    expect(created).toEqual({
      id: input.id,
      account_id: input.account_id,
      url: 'https://hooks.example.com/fcd',
      events: ['violation.new'],
      facility_ids: [F1, F2],
      filter: null,
      secret: `whsec_********${input.secret.slice(-4)}`,
      secret_rotation_ends_at: null,
      is_active: true,
      created_at: '2026-11-22T08:00:00.000Z',
      updated_at: '2026-11-22T08:00:00.000Z',
      deactivated_at: null,
      deactivation_reason: null,
      consecutive_failures: 0,
      last_failure_at: null,
      last_success_at: null,
      rate_limit_per_second: null,
      max_in_flight: 16,
    });
    const raw = await pool.query<{ secret_ciphertext: string }>('SELECT secret_ciphertext FROM webhook.subscriptions WHERE id = $1', [
      input.id,
    ]);
    expect(raw.rows[0]?.secret_ciphertext).toMatch(new RegExp(`^v1:${box.keyId}:`));
    expect(raw.rows[0]?.secret_ciphertext).not.toContain(input.secret.slice(6));
    expect(await store.signingSecret(input.id)).toBe(input.secret);
    expect(await store.signingSecret(whId())).toBeUndefined();
  });

  it('keeps facility_ids null for "all facilities"', async () => {
    const a = account();
    const created = await store.create(newSub(a, T0), 25);
    expect(created.facility_ids).toBeNull();
    expect((await store.get(a, created.id))?.facility_ids).toBeNull();
  });

  it("hides another account's subscription from get, update and delete", async () => {
    const owner = account();
    const other = account();
    const created = await store.create(newSub(owner, T0), 25);
    expect(await store.get(other, created.id)).toBeUndefined();
    expect(await store.update(other, created.id, { is_active: false }, T0 + 1)).toBeUndefined();
    expect(await store.delete(other, created.id)).toBe(false);
    expect((await store.get(owner, created.id))?.is_active).toBe(true);
  });

  it('lists newest first with keyset pages that stay stable when new subscriptions arrive', async () => {
    const a = account();
    const made: Array<{ id: string; t: number }> = [];
    // The last two share a millisecond: ordered by id, still a total order.
    for (const t of [0, 1000, 2000, 3000, 4000, 4000]) made.push({ id: (await store.create(newSub(a, T0 + t), 25)).id, t });
    const expected = made.sort((x, y) => y.t - x.t || (y.id < x.id ? -1 : 1)).map((m) => m.id);
    const page1 = await store.list(a, 4);
    expect(page1.items.map((s) => s.id)).toEqual(expected.slice(0, 4));
    expect(page1.has_more).toBe(true);
    await store.create(newSub(a, T0 + 10_000), 25); // a newer one must not shift the next page
    const last = page1.items[3]!;
    const page2 = await store.list(a, 4, { created_at: last.created_at, id: last.id });
    expect(page2.items.map((s) => s.id)).toEqual(expected.slice(4));
    expect(page2.has_more).toBe(false);
  });

  it('updates any subset, deactivates with reason "manual", and reactivation resets the failure count', async () => {
    const a = account();
    const created = await store.create(newSub(a, T0), 25);
    const changed = await store.update(
      a,
      created.id,
      { url: 'https://b.example.com/x', events: ['case.new', 'case.updated'], facility_ids: [F2] },
      T0 + 5,
    );
    expect(changed).toMatchObject({
      url: 'https://b.example.com/x',
      events: ['case.new', 'case.updated'],
      facility_ids: [F2],
      updated_at: '2026-11-22T08:00:00.005Z',
    });
    const off = await store.update(a, created.id, { is_active: false }, T0 + 10);
    expect(off).toMatchObject({ is_active: false, deactivated_at: '2026-11-22T08:00:00.010Z', deactivation_reason: 'manual' });
    const stillOff = await store.update(a, created.id, { is_active: false }, T0 + 20);
    expect(stillOff).toMatchObject({ is_active: false, deactivated_at: '2026-11-22T08:00:00.010Z', deactivation_reason: 'manual' });
    await pool.query('UPDATE webhook.subscriptions SET consecutive_failures = 5, last_failure_at = now() WHERE id = $1', [created.id]);
    const on = await store.update(a, created.id, { is_active: true }, T0 + 30);
    expect(on).toMatchObject({
      is_active: true,
      deactivated_at: null,
      deactivation_reason: null,
      consecutive_failures: 0,
      last_failure_at: null,
    });
    expect(await store.update(a, created.id, { facility_ids: null }, T0 + 40)).toMatchObject({ facility_ids: null });
  });

  it('refuses the subscription beyond the limit with LIMIT_REACHED, even when created concurrently', async () => {
    const a = account();
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.create(newSub(a, T0 + i), 5)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(3);
    for (const r of refused) expect(r.reason).toMatchObject({ code: 'LIMIT_REACHED', details: { limit: 5 } });
    expect(await store.count(a)).toBe(5);
  });

  it('deletes, after which the subscription is gone for every verb', async () => {
    const a = account();
    const created = await store.create(newSub(a, T0), 25);
    expect(await store.delete(a, created.id)).toBe(true);
    expect(await store.delete(a, created.id)).toBe(false);
    expect(await store.get(a, created.id)).toBeUndefined();
    expect(await store.update(a, created.id, { is_active: true }, T0)).toBeUndefined();
  });

  it('fans an event out to the active subscriptions it matches, and deactivates once', async () => {
    const a = account();
    const all = await store.create(newSub(a, T0, { events: ['case.new'] }), 25);
    const watching = await store.create(newSub(a, T0, { events: ['case.new'], facility_ids: [F2] }), 25);
    const other = await store.create(newSub(a, T0, { events: ['case.new'], facility_ids: [F1] }), 25);
    const inactive = await store.create(newSub(a, T0, { events: ['case.new'] }), 25);
    await store.create(newSub(a, T0, { events: ['violation.new'] }), 25);
    expect(await store.deactivate(inactive.id, 'consecutive_failures', T0 + 1)).toBe(true);
    expect(await store.deactivate(inactive.id, 'consecutive_failures', T0 + 2)).toBe(false);
    const id = `evt_${randomUUID()}`;
    const body = JSON.stringify({ id, type: 'case.new', created_at: new Date(T0).toISOString(), data: { case: { facility_ids: [F2] } } });
    await new DeliveryStore(pool, box).fanOut({ id, type: 'case.new', body, facilityIds: [F2.toUpperCase()] }, T0 + 3);
    const { rows } = await pool.query<{ subscription_id: string }>('SELECT subscription_id FROM webhook.deliveries WHERE event_id = $1', [
      id,
    ]);
    const found = rows.map((r) => r.subscription_id).filter((s) => [all.id, watching.id, other.id, inactive.id].includes(s));
    expect(found.sort()).toEqual([all.id, watching.id].sort());
  });
});
