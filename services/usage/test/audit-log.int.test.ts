import { create } from '@bufbuild/protobuf';
import { ActorType, CreateKeyRequestSchema, RenameKeyRequestSchema, RevokeKeyRequestSchema, RollKeyRequestSchema } from '@fcd/proto';
import { AppError, createLogger, createPool, type KeyId, MAX_LIVE_KEYS, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { type ListUnderTest, paginationSuite } from '@fcd/testing/pagination-suite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditActor, type AuditRecord, OPERATOR } from '../src/domain/audit';
import { keyHandlers } from '../src/grpc/keys';
import type { UsageMeter } from '../src/meter/index';
import { AccountStore } from '../src/store/accounts';
import { migrations, USAGE_SCHEMA } from '../src/store/migrations';

/** The audit log of key changes: one entry per change, in its transaction; each account's own, paged. */

let db: TestDatabase;
let pool: Pool;
let accounts: AccountStore;
const logger = createLogger({ service: 'usage-audit-log-test', level: 'silent' });
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const SESSION = 'pses_0b6c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d';

beforeAll(async () => {
  db = await createTestDatabase('usage_audit_log');
  pool = createPool({ connectionString: db.url, applicationName: 'test', logger });
  await migrate(pool, USAGE_SCHEMA, migrations);
  accounts = new AccountStore(pool);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
}

/** Every row of the account's log, oldest first, as stored. */
async function rowsOf(accountId: string) {
  const { rows } = await pool.query(
    `SELECT id, actor_type, actor_key_id, action, target_key_id, details, occurred_at
       FROM usage.audit_log WHERE account_id = $1 ORDER BY seq`,
    [accountId],
  );
  return rows;
}

/** An account with one key made by the operator; the account then acts through that key. */
async function accountWithKey(tier = 'pro') {
  const account = await accounts.createAccount({ name: 'audited', tier });
  const first = await accounts.keys.create(account.id, { name: 'first', expiresAt: null }, OPERATOR, T0);
  const actor: AuditActor = { type: 'key', keyId: first.key.id };
  return { accountId: account.id, first, actor };
}

describe('audit log of key changes', () => {
  it('refuses a key change over gRPC that names no actor (a gateway older than the log), writing nothing', async () => {
    const { accountId, first } = await accountWithKey();
    const handlers = keyHandlers(accounts, { now: () => T0, keysChanged: async () => undefined } as unknown as UsageMeter);
    const calls = [
      handlers.createKey(create(CreateKeyRequestSchema, { accountId, name: 'x' })),
      handlers.renameKey(create(RenameKeyRequestSchema, { accountId, keyId: first.key.id, name: 'x' })),
      handlers.revokeKey(create(RevokeKeyRequestSchema, { accountId, keyId: first.key.id, actor: { type: ActorType.OPERATOR } })),
      handlers.rollKey(create(RollKeyRequestSchema, { accountId, keyId: first.key.id, actor: { type: ActorType.KEY, keyId: 'nope' } })),
    ];
    for (const call of calls) expect(await codeOf(call)).toBe('SERVICE_UNAVAILABLE');
    expect((await rowsOf(accountId)).map((r) => r.action)).toEqual(['key.created']);
    expect((await accounts.keys.list(accountId)).map((k) => [k.name, k.revokedAt])).toEqual([['first', null]]);
  });

  it('writes exactly one entry per change, with its actor, action, key and details, never the key', async () => {
    const { accountId, first, actor } = await accountWithKey();
    const made = await accounts.keys.create(accountId, { name: 'ci', expiresAt: iso(T0 + 86_400_000) }, actor, T0 + 1000);
    await accounts.keys.rename(accountId, made.key.id, 'deploy', actor, T0 + 2000);
    const rolled = await accounts.keys.roll(accountId, made.key.id, 60, actor, T0 + 3000);
    await accounts.keys.revoke(accountId, rolled.key.id, actor, T0 + 4000);
    await accounts.keys.revoke(accountId, rolled.key.id, actor, T0 + 5000);

    const key = { actor_type: 'key', actor_key_id: first.key.id };
    expect(await rowsOf(accountId)).toEqual([
      {
        id: expect.stringMatching(/^aud_[0-9a-f-]{36}$/),
        actor_type: 'operator',
        actor_key_id: null,
        action: 'key.created',
        target_key_id: first.key.id,
        details: { name: 'first', expires_at: null },
        occurred_at: new Date(T0),
      },
      {
        id: expect.any(String),
        ...key,
        action: 'key.created',
        target_key_id: made.key.id,
        details: { name: 'ci', expires_at: iso(T0 + 86_400_000) },
        occurred_at: new Date(T0 + 1000),
      },
      {
        id: expect.any(String),
        ...key,
        action: 'key.renamed',
        target_key_id: made.key.id,
        details: { name: 'deploy', previous_name: 'ci' },
        occurred_at: new Date(T0 + 2000),
      },
      {
        id: expect.any(String),
        ...key,
        action: 'key.rolled',
        target_key_id: made.key.id,
        details: { name: 'deploy', new_key_id: rolled.key.id, expires_in_seconds: 60 },
        occurred_at: new Date(T0 + 3000),
      },
      {
        id: expect.any(String),
        ...key,
        action: 'key.revoked',
        target_key_id: rolled.key.id,
        details: { name: 'deploy', was_live: true },
        occurred_at: new Date(T0 + 4000),
      },
      // Revoking again changes nothing, and says so.
      {
        id: expect.any(String),
        ...key,
        action: 'key.revoked',
        target_key_id: rolled.key.id,
        details: { name: 'deploy', was_live: false },
        occurred_at: new Date(T0 + 5000),
      },
    ]);
    const everything = JSON.stringify(await pool.query('SELECT * FROM usage.audit_log'));
    for (const k of [first.apiKey, made.apiKey, rolled.apiKey]) expect(everything).not.toContain(k.slice(4));
    const { rows } = await pool.query<{ digest: string }>('SELECT digest FROM usage.api_keys WHERE account_id = $1', [accountId]);
    for (const { digest } of rows) expect(everything).not.toContain(digest);
  });

  it('writes nothing for a refused change; an operator may revoke the last live key, the account may not', async () => {
    const { accountId, first, actor } = await accountWithKey('free');
    const other = await accountWithKey('free');
    const before = (await rowsOf(accountId)).length;
    expect(await codeOf(accounts.keys.revoke(accountId, first.key.id, actor, T0))).toBe('LIMIT_REACHED');
    expect(await codeOf(accounts.keys.rename(other.accountId, first.key.id, 'x', other.actor, T0))).toBe('NOT_FOUND');
    expect(await codeOf(accounts.keys.roll(accountId, 'key_00000000-0000-4000-8000-000000000000' as KeyId, 0, actor, T0))).toBe(
      'NOT_FOUND',
    );
    for (let i = 1; i < MAX_LIVE_KEYS; i++) await accounts.keys.create(accountId, { name: `k${i}`, expiresAt: null }, actor, T0);
    expect(await codeOf(accounts.keys.create(accountId, { name: 'eleventh', expiresAt: null }, OPERATOR, T0))).toBe('LIMIT_REACHED');
    expect((await rowsOf(accountId)).length).toBe(before + MAX_LIVE_KEYS - 1);
    expect(await rowsOf(other.accountId)).toHaveLength(1);

    const lone = await accountWithKey('free');
    const revoked = await accounts.keys.revoke(lone.accountId, lone.first.key.id, OPERATOR, T0 + 1000);
    expect(revoked.revokedAt).toBe(iso(T0 + 1000));
    expect((await rowsOf(lone.accountId)).map((r) => [r.actor_type, r.action, r.details])).toEqual([
      ['operator', 'key.created', { name: 'first', expires_at: null }],
      ['operator', 'key.revoked', { name: 'first', was_live: true }],
    ]);
  });

  it('records a portal session as the actor over gRPC, by its id; the database refuses one without it', async () => {
    const { accountId, first } = await accountWithKey('free');
    const handlers = keyHandlers(accounts, { now: () => T0 + 1000, keysChanged: async () => undefined } as unknown as UsageMeter);
    const actor = { type: ActorType.PORTAL_SESSION, sessionId: SESSION };
    const made = await handlers.createKey(create(CreateKeyRequestSchema, { accountId, name: 'ci', actor }));
    await handlers.renameKey(create(RenameKeyRequestSchema, { accountId, keyId: first.key.id, name: 'renamed', actor }));
    await handlers.revokeKey(create(RevokeKeyRequestSchema, { accountId, keyId: made.key?.id as string, actor }));
    const last = handlers.revokeKey(create(RevokeKeyRequestSchema, { accountId, keyId: first.key.id, actor }));
    expect(await codeOf(last)).toBe('LIMIT_REACHED');
    const malformed = { type: ActorType.PORTAL_SESSION, sessionId: 'sess_1' };
    expect(await codeOf(handlers.createKey(create(CreateKeyRequestSchema, { accountId, name: 'x', actor: malformed })))).toBe(
      'SERVICE_UNAVAILABLE',
    );
    const session: AuditActor = { type: 'portal_session', sessionId: SESSION };
    expect((await accounts.keys.auditLog(accountId, {})).items.map((e) => [e.action, e.actor])).toEqual([
      ['key.revoked', session],
      ['key.renamed', session],
      ['key.created', session],
      ['key.created', OPERATOR],
    ]);
    const { rows } = await pool.query(
      'SELECT actor_type, actor_key_id, actor_session_id FROM usage.audit_log WHERE account_id = $1 ORDER BY seq DESC LIMIT 1',
      [accountId],
    );
    expect(rows).toEqual([{ actor_type: 'portal_session', actor_key_id: null, actor_session_id: SESSION }]);

    const insert = (type: string, keyId: string | null, sessionId: string | null) =>
      pool.query(
        `INSERT INTO usage.audit_log (id, account_id, actor_type, actor_key_id, actor_session_id, action, target_key_id, occurred_at)
         VALUES ($1, $2, $3, $4, $5, 'key.renamed', $6, now())`,
        [`aud_${type}_${keyId}_${sessionId}`, accountId, type, keyId, sessionId, first.key.id],
      );
    for (const [type, keyId, sessionId] of [
      ['portal_session', null, null],
      ['portal_session', first.key.id, SESSION],
      ['key', first.key.id, SESSION],
      ['operator', null, SESSION],
      ['someone', null, null],
    ] as const)
      await expect(insert(type, keyId, sessionId)).rejects.toMatchObject({ code: '23514' });
  });

  it("lists an account's own entries only, newest first", async () => {
    const a = await accountWithKey();
    const b = await accountWithKey();
    await accounts.keys.rename(a.accountId, a.first.key.id, 'a2', a.actor, T0 + 1000);
    await accounts.keys.rename(b.accountId, b.first.key.id, 'b2', b.actor, T0 + 1000);
    await accounts.keys.rename(a.accountId, a.first.key.id, 'a3', a.actor, T0 + 2000);
    const page = await accounts.keys.auditLog(a.accountId, {});
    expect(page.items.map((e) => [e.action, e.details.name, e.actor])).toEqual([
      ['key.renamed', 'a3', a.actor],
      ['key.renamed', 'a2', a.actor],
      ['key.created', 'first', OPERATOR],
    ]);
    expect([page.has_more, page.next_cursor, page.limit]).toEqual([false, null, 25]);
    expect((await accounts.keys.auditLog(b.accountId, {})).items.map((e) => e.details.name)).toEqual(['b2', 'first']);
    expect((await accounts.keys.auditLog('acct_none', {})).items).toEqual([]);
  });
});

paginationSuite<AuditRecord>({
  name: 'the audit log',
  order: 'newest first',
  idOf: (e) => e.id,
  async newList(): Promise<ListUnderTest<AuditRecord>> {
    const { accountId, first, actor } = await accountWithKey();
    await pool.query('DELETE FROM usage.audit_log WHERE account_id = $1', [accountId]);
    let n = 0;
    return {
      async add(count) {
        const ids: string[] = [];
        for (let i = 0; i < count; i++) {
          await accounts.keys.rename(accountId, first.key.id, `name ${++n}`, actor, T0 + n);
          const { rows } = await pool.query<{ id: string }>(
            'SELECT id FROM usage.audit_log WHERE account_id = $1 ORDER BY seq DESC LIMIT 1',
            [accountId],
          );
          ids.push(rows[0]?.id as string);
        }
        return ids;
      },
      page: (request) => accounts.keys.auditLog(accountId, request),
      async foreignCursor() {
        const other = await accountWithKey();
        await accounts.keys.rename(other.accountId, other.first.key.id, 'x', other.actor, T0);
        return (await accounts.keys.auditLog(other.accountId, { limit: 1 })).next_cursor as string;
      },
    };
  },
});
