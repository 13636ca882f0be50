import { AppError, createLogger, createPool, KeyId, MAX_LIVE_KEYS, ManualClock, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase, testUrls, uniqueName } from '@fcd/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLive } from '../src/domain/account-keys';
import { type AuditActor, OPERATOR } from '../src/domain/audit';
import { KeyCache } from '../src/domain/key-cache';
import { UsageMeter } from '../src/meter/index';
import { LAST_USED_RESOLUTION_MS } from '../src/meter/write-behind';
import { createUsageMetrics } from '../src/metrics';
import { AccountStore } from '../src/store/accounts';
import { CounterStore } from '../src/store/counters';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

/** Several keys per account, managed by the account: the store's rules and how the meter sees them. */

let db: TestDatabase;
let pool: Pool;
let redis: Redis;
let accounts: AccountStore;
const logger = createLogger({ service: 'usage-account-keys-test', level: 'silent' });
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
/** The actor of the account's own changes (its audit entries are tested in audit-log.int.test.ts). */
const ACTOR: AuditActor = { type: 'key', keyId: 'key_00000000-0000-4000-8000-000000000001' as KeyId };

function meterWith(clock: ManualClock) {
  return new UsageMeter({
    accounts,
    counters: new CounterStore(redis, `${uniqueName('keys')}:`),
    cache: new KeyCache(clock, 5000, 1000),
    clock,
    logger,
    metrics: createUsageMetrics(),
    failOpen: false,
  });
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
}

beforeAll(async () => {
  db = await createTestDatabase('usage_account_keys');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  redis = new Redis(testUrls.redis);
  accounts = new AccountStore(pool);
});

afterAll(async () => {
  redis?.disconnect();
  await pool?.end();
  await db?.drop();
});

describe('account keys', () => {
  it('lists keys with name, prefix and times but never the key; the 11th live key is LIMIT_REACHED', async () => {
    const account = await accounts.createAccount({ name: 'keys', tier: 'pro' });
    const first = await accounts.keys.create(account.id, { name: 'default', expiresAt: null }, OPERATOR, T0);
    const created = [];
    for (let i = 1; i < MAX_LIVE_KEYS; i++)
      created.push(await accounts.keys.create(account.id, { name: `ci ${i}`, expiresAt: null }, ACTOR, T0));
    expect(await codeOf(accounts.keys.create(account.id, { name: 'eleventh', expiresAt: null }, ACTOR, T0))).toBe('LIMIT_REACHED');

    const list = await accounts.keys.list(account.id);
    expect(list).toHaveLength(MAX_LIVE_KEYS);
    expect(list[0]).toMatchObject({ id: first.key.id, name: 'default', prefix: first.apiKey.slice(0, 8), lastUsedAt: null });
    const one = created[0] as { key: { id: string }; apiKey: string };
    expect(KeyId.is(one.key.id)).toBe(true);
    expect(list[1]).toEqual({
      id: one.key.id,
      accountId: account.id,
      last4: one.apiKey.slice(-4),
      name: 'ci 1',
      prefix: one.apiKey.slice(0, 8),
      createdAt: expect.stringMatching(/Z$/),
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
    });
    expect(JSON.stringify(list)).not.toContain(one.apiKey);

    // A revoked key frees a place; an expired one too.
    await accounts.keys.revoke(account.id, one.key.id as KeyId, ACTOR, T0);
    const expiring = await accounts.keys.create(account.id, { name: 'short', expiresAt: new Date(T0 + 60_000).toISOString() }, ACTOR, T0);
    expect(expiring.key.expiresAt).toBe('2026-11-22T08:01:00.000Z');
    expect(await codeOf(accounts.keys.create(account.id, { name: 'x', expiresAt: null }, ACTOR, T0))).toBe('LIMIT_REACHED');
    expect(await codeOf(accounts.keys.create(account.id, { name: 'x', expiresAt: null }, ACTOR, T0 + 60_000))).toBe('resolved');
  });

  it('renames, revokes idempotently, and refuses to revoke the last live key', async () => {
    const account = await accounts.createAccount({ name: 'last', tier: 'free' });
    const other = await accounts.createAccount({ name: 'other', tier: 'free' });
    const a = await accounts.keys.create(account.id, { name: 'a', expiresAt: null }, ACTOR, T0);
    const b = await accounts.keys.create(account.id, { name: 'b', expiresAt: null }, ACTOR, T0);
    const aId = a.key.id;
    expect((await accounts.keys.rename(account.id, aId, 'production', ACTOR, T0)).name).toBe('production');
    // Another account's key is NOT_FOUND, whatever the call.
    expect(await codeOf(accounts.keys.rename(other.id, aId, 'x', ACTOR, T0))).toBe('NOT_FOUND');
    expect(await codeOf(accounts.keys.revoke(other.id, aId, ACTOR, T0))).toBe('NOT_FOUND');
    expect(await codeOf(accounts.keys.roll(other.id, aId, 0, ACTOR, T0))).toBe('NOT_FOUND');

    const revoked = await accounts.keys.revoke(account.id, aId, ACTOR, T0);
    expect(revoked.revokedAt).toBe(new Date(T0).toISOString());
    expect((await accounts.keys.revoke(account.id, aId, ACTOR, T0 + 5000)).revokedAt).toBe(new Date(T0).toISOString());
    expect(await codeOf(accounts.keys.revoke(account.id, b.key.id, ACTOR, T0))).toBe('LIMIT_REACHED');
    expect((await accounts.keys.list(account.id)).map((k) => [k.name, k.revokedAt === null])).toEqual([
      ['production', false],
      ['b', true],
    ]);
  });

  it('two keys of a Free account share one daily counter: exactly 100 together', async () => {
    const clock = new ManualClock(T0);
    const meter = meterWith(clock);
    const account = await accounts.createAccount({ name: 'shared', tier: 'free' });
    const a = await accounts.keys.create(account.id, { name: 'a', expiresAt: null }, ACTOR, T0);
    const b = await accounts.keys.create(account.id, { name: 'b', expiresAt: null }, ACTOR, T0);
    const results = (await Promise.all([meter.authorize(Array(80).fill(a.apiKey)), meter.authorize(Array(80).fill(b.apiKey))])).flat();
    expect(results.filter((r) => r.decision === 'allowed')).toHaveLength(100);
    expect(results.filter((r) => r.decision === 'rate_limited')).toHaveLength(60);
    expect(new Set(results.map((r) => r.principal?.accountId))).toEqual(new Set([account.id]));
  });

  it('writes last_used_at with the batched flush, not per request', async () => {
    const clock = new ManualClock(T0);
    const meter = meterWith(clock);
    const account = await accounts.createAccount({ name: 'used', tier: 'pro' });
    const a = await accounts.keys.create(account.id, { name: 'a', expiresAt: null }, ACTOR, T0);
    await meter.authorize([a.apiKey]);
    clock.advance(1500);
    await meter.authorize([a.apiKey]);
    expect((await accounts.keys.list(account.id))[0]?.lastUsedAt).toBeNull();
    await meter.flush();
    expect((await accounts.keys.list(account.id))[0]?.lastUsedAt).toBe(new Date(T0 + 1500).toISOString());
    // An older use written later never moves it back.
    await accounts.touchKeys([{ keyId: a.key.id, usedAt: T0 }]);
    expect((await accounts.keys.list(account.id))[0]?.lastUsedAt).toBe(new Date(T0 + 1500).toISOString());
  });

  it('writes a key in steady use once a minute, not at every flush', async () => {
    const clock = new ManualClock(T0);
    const meter = meterWith(clock);
    const account = await accounts.createAccount({ name: 'steady', tier: 'pro' });
    const a = await accounts.keys.create(account.id, { name: 'a', expiresAt: null }, ACTOR, T0);
    const lastUsed = async () => (await accounts.keys.list(account.id))[0]?.lastUsedAt;
    await meter.authorize([a.apiKey]);
    await meter.flush();
    expect(await lastUsed()).toBe(new Date(T0).toISOString());
    // Uses within the minute after the written one are not written again.
    clock.advance(LAST_USED_RESOLUTION_MS - 1);
    await meter.authorize([a.apiKey]);
    await meter.flush();
    expect(await lastUsed()).toBe(new Date(T0).toISOString());
    // The first use a minute after it is.
    clock.advance(1);
    await meter.authorize([a.apiKey]);
    await meter.flush();
    expect(await lastUsed()).toBe(new Date(T0 + LAST_USED_RESOLUTION_MS).toISOString());
  });

  it('a rolled key keeps working until its expiry, then is refused; the new key has the same name', async () => {
    const clock = new ManualClock(T0);
    const meter = meterWith(clock);
    const account = await accounts.createAccount({ name: 'roll', tier: 'pro' });
    const old = await accounts.keys.create(account.id, { name: 'ci', expiresAt: null }, ACTOR, T0);
    await accounts.keys.create(account.id, { name: 'spare', expiresAt: null }, ACTOR, T0);
    const rolled = await accounts.keys.roll(account.id, old.key.id, 30, ACTOR, T0);
    expect(rolled.key.name).toBe('ci');
    expect(rolled.key.id).not.toBe(old.key.id);
    expect(rolled.old.expiresAt).toBe(new Date(T0 + 30_000).toISOString());
    const decisions = async () => (await meter.authorize([old.apiKey, rolled.apiKey])).map((r) => r.decision);
    expect(await decisions()).toEqual(['allowed', 'allowed']);
    clock.advance(29_999);
    expect(await decisions()).toEqual(['allowed', 'allowed']);
    clock.advance(1);
    expect(await decisions()).toEqual(['unauthenticated', 'allowed']);
    // An expired key can be rolled no more; rolling with 0 revokes the old key at once.
    expect(await codeOf(accounts.keys.roll(account.id, old.key.id, 0, ACTOR, T0 + 30_000))).toBe('NOT_FOUND');
    const again = await accounts.keys.roll(account.id, rolled.key.id, 0, ACTOR, T0 + 30_000);
    expect(again.old.revokedAt).toBe(new Date(T0 + 30_000).toISOString());
  });

  it('a roll at the limit of live keys may hold one more until the old key lapses, never two', async () => {
    const account = await accounts.createAccount({ name: 'rolls', tier: 'pro' });
    const keys = [];
    for (let i = 0; i < 10; i++) keys.push(await accounts.keys.create(account.id, { name: `k${i}`, expiresAt: null }, ACTOR, T0));
    const first = keys[0] as (typeof keys)[number];
    const rolled = await accounts.keys.roll(account.id, first.key.id, 60, ACTOR, T0);
    const live = (at: number) => accounts.keys.list(account.id).then((ks) => ks.filter((k) => isLive(k, at)).length);
    expect(await live(T0)).toBe(11);
    // Neither the old key (rolled again) nor the new one may add a twelfth while the old one lives.
    expect(await codeOf(accounts.keys.roll(account.id, first.key.id, 60, ACTOR, T0 + 1000))).toBe('LIMIT_REACHED');
    expect(await codeOf(accounts.keys.roll(account.id, rolled.key.id, 60, ACTOR, T0 + 1000))).toBe('LIMIT_REACHED');
    expect(await live(T0 + 1000)).toBe(11);
    // Once it has lapsed, the new key rolls like any other.
    const next = await accounts.keys.roll(account.id, rolled.key.id, 0, ACTOR, T0 + 60_000);
    expect(next.old.revokedAt).toBe(new Date(T0 + 60_000).toISOString());
    expect(await live(T0 + 60_000)).toBe(10);
  });
});
