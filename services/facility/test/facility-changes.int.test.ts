import { randomUUID } from 'node:crypto';
import type { PageRequest } from '@fcd/service-kit';
import { type ListUnderTest, paginationSuite } from '@fcd/testing/pagination-suite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCursor } from '../src/domain/cursor';
import { facilityQuery, listFacilities } from '../src/store/queries';
import { accountHeader, buildTestApp, setupDb, type TestApp, type TestDb, waitFor } from './helpers';

/**
 * `updated_since` (docs/api.md, "Changes since an instant"): exactly the facilities changed after
 * the instant, in the order their writes committed, and a page walk that runs while other
 * transactions write misses none of them: a write still uncommitted is held back until it commits,
 * then met ahead of the walk's position.
 */
let db: TestDb;
let t: TestApp;

beforeAll(async () => {
  db = await setupDb('facility_changes');
  t = await buildTestApp(db.pool);
});

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

type Body = {
  data: Array<{ registry_id: string; name: string }>;
  pagination: { limit: number; next_cursor: string | null; has_more: boolean };
  error?: { code: string; details: { fields: Array<{ field: string; message: string }> } };
};

async function get(url: string): Promise<{ status: number; body: Body }> {
  const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
  return { status: res.statusCode, body: res.json() as Body };
}

async function addFacility(registryId: string, name: string, updatedAt: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO facilities (id, registry_id, name, state, compliance_status, updated_at)
     VALUES ($1, $2, $3, 'OH', 'violation', $4::timestamptz)`,
    [randomUUID(), registryId, name, updatedAt],
  );
}

/**
 * Until every facility's last write is settled: older than every write transaction still running in
 * the cluster (the feed shows a write only then; other test files' transactions may hold it back).
 */
async function settled(): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await db.pool.query<{ ok: boolean }>(
        'SELECT coalesce(bool_and(change_xid < pg_snapshot_xmin(pg_current_snapshot())), true) AS ok FROM facilities',
      );
      return rows[0]?.ok ? true : undefined;
    },
    15_000,
    'the writes to settle',
  );
}

/** A write as a sync makes it: new values and the write's updated_at, through `db` (the pool or an open transaction). */
async function touch(client: { query(text: string, values: unknown[]): Promise<unknown> }, registryId: string, updatedAt: string) {
  await client.query(`UPDATE facilities SET name = name || '*', updated_at = $2::timestamptz WHERE registry_id = $1`, [
    registryId,
    updatedAt,
  ]);
}

describe('updated_since', () => {
  const prefix = 'CHG';
  const id = (n: number) => `${prefix}${String(n).padStart(3, '0')}`;
  const since = '2026-11-01T00:00:00Z';
  const tokenQuery = `q=Changes&updated_since=${encodeURIComponent(since)}`;

  beforeAll(async () => {
    for (let n = 1; n <= 12; n++) await addFacility(id(n), `Changes ${n}`, n <= 6 ? '2026-10-01T00:00:00Z' : '2026-11-02T00:00:00Z');
  });

  it('returns exactly the facilities changed after the instant, in the order their writes committed', async () => {
    await touch(db.pool, id(3), '2026-11-03T00:00:00Z');
    await settled();
    const res = await get(`/v1/facilities?${tokenQuery}&limit=100`);
    expect(res.body.data.map((f) => f.registry_id)).toEqual([id(7), id(8), id(9), id(10), id(11), id(12), id(3)]);
    // A later instant narrows it; the instant may carry an offset.
    const later = await get(`/v1/facilities?q=Changes&updated_since=${encodeURIComponent('2026-11-02T05:00:00+05:00')}&limit=100`);
    expect(later.body.data.map((f) => f.registry_id)).toEqual([id(3)]);
  });

  it('misses no change while a walk runs beside writes, one of them held open across pages', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    const page = async () => {
      const res = await get(`/v1/facilities?${tokenQuery}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      seen.push(...res.body.data.map((f) => f.registry_id));
      cursor = res.body.pagination.next_cursor ?? cursor;
      return res.body;
    };
    await page();
    // A sync's transaction writes facility 1 and stays open; others write and commit meanwhile.
    const sync = await db.pool.connect();
    try {
      await sync.query('BEGIN');
      await touch(sync, id(1), '2026-11-04T00:00:00Z');
      await touch(db.pool, id(2), '2026-11-04T00:00:01Z');
      await page();
      await page();
      await touch(db.pool, id(4), '2026-11-04T00:00:02Z');
      for (let n = 0; n < 10 && (await page()).data.length > 0; n++);
      // Facility 1's write is not committed: the feed holds back every write after it, 2 and 4 too.
      expect(seen).not.toContain(id(1));
      expect(seen).not.toContain(id(2));
      await sync.query('COMMIT');
    } finally {
      sync.release();
    }
    await settled();
    for (let n = 0; n < 10 && (await page()).data.length > 0; n++);
    const { rows } = await db.pool.query<{ registry_id: string }>(
      `SELECT registry_id FROM facilities WHERE name LIKE 'Changes%' AND updated_at > $1 ORDER BY registry_id`,
      [since],
    );
    expect([...seen].sort()).toEqual(rows.map((r) => r.registry_id));
    expect(new Set(seen).size).toBe(seen.length);
    // In commit order: the held write (1) before those committed after it began (2, 4).
    expect(seen.slice(-3)).toEqual([id(1), id(2), id(4)]);
  });

  it('filters the export by the same instant (rows in id order there)', async () => {
    const url = `/internal/v1/exports/facilities?q=Changes&updated_since=${encodeURIComponent('2026-11-02T05:00:00+05:00')}`;
    const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
    expect(res.statusCode).toBe(200);
    const exported = res.body
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { registry_id: string }).registry_id);
    const { rows } = await db.pool.query<{ registry_id: string }>(
      `SELECT registry_id FROM facilities WHERE name LIKE 'Changes%' AND updated_at > '2026-11-02T00:00:00Z' ORDER BY registry_id`,
    );
    expect(exported.sort()).toEqual(rows.map((r) => r.registry_id));
    expect(exported.length).toBeGreaterThan(0);
  });

  it('refuses a bad instant, a sort beside it, and a cursor of another order, with 400 VALIDATION_ERROR', async () => {
    const bad: Array<[string, string]> = [
      ['updated_since=yesterday', 'updated_since'],
      ['updated_since=2026-11-01', 'updated_since'],
      ['updated_since=2026-11-01T00:00:00', 'updated_since'],
      ['updated_since=2026-02-30T00:00:00Z', 'updated_since'],
      ['updated_since=0000-01-01T00:00:00Z', 'updated_since'],
      ['updated_since=2026-11-01T24:00:00Z', 'updated_since'],
      [`updated_since=${encodeURIComponent(since)}&sort=name`, 'sort'],
      [`updated_since=${encodeURIComponent(since)}&cursor=${encodeCursor('facilities', { registry_id: 'CHG001' })}`, 'cursor'],
    ];
    for (const [query, field] of bad) {
      const res = await get(`/v1/facilities?${query}`);
      expect([res.status, res.body.error?.code, res.body.error?.details.fields.map((f) => f.field)], query).toEqual([
        400,
        'VALIDATION_ERROR',
        [field],
      ]);
    }
  });

  it('is served by the change index, from the first change since the instant, or from the cursor on', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      await client.query('SET LOCAL enable_sort = off');
      const first = facilityQuery({ filter: { updated_since: since } }, 25);
      const firstPlan = JSON.stringify((await client.query(`EXPLAIN (FORMAT JSON) ${first.text}`, first.values)).rows[0]);
      expect(firstPlan).toContain('"Index Name":"facilities_change_idx"');
      expect(firstPlan).toContain('(change_xid >= $1)');
      const next = facilityQuery({ filter: { updated_since: since } }, 25, { value: '1000', registry_id: 'CHG001' });
      const nextPlan = JSON.stringify((await client.query(`EXPLAIN (FORMAT JSON) ${next.text}`, next.values)).rows[0]);
      expect(nextPlan).toContain('"Index Name":"facilities_change_idx"');
      expect(nextPlan).toContain('"Index Cond"');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

/** The shared pagination suite on the change feed: each list is its own name token, all changed after 2000. */
paginationSuite<{ registry_id: string }>({
  name: 'facilities changed since an instant',
  order: 'oldest first',
  polled: true,
  idOf: (f) => f.registry_id,
  async newList(): Promise<ListUnderTest<{ registry_id: string }>> {
    const token = `feed-${randomUUID()}`;
    return {
      async add(count) {
        const ids: string[] = [];
        for (let n = 0; n < count; n++) {
          const registryId = `F${randomUUID().slice(0, 8)}`;
          await addFacility(registryId, `Feed ${token} ${n}`, new Date().toISOString());
          ids.push(registryId);
        }
        await settled();
        return ids;
      },
      page: (request: PageRequest) => listFacilities(db.pool, { filter: { q: token, updated_since: '2000-01-01T00:00:00Z' } }, request),
      foreignCursor: async () => encodeCursor('facilities', { registry_id: 'F0000000' }),
    };
  },
});
