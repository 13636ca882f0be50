import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock, uuidSource } from '@fcd/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import { rowsOf } from '../src/domain/row-source';
import { Ingestion } from '../src/store/ingestion';
import { setupDb, type TestDb } from './helpers';

let db: TestDb;
const dir = mkdtempSync(join(tmpdir(), 'facility-50k-'));
const file = join(dir, 'facilities.ndjson');
const ROWS = 50_000;

beforeAll(async () => {
  db = await setupDb('facility_import50k');
  const data = generateDemoData({ facilities: ROWS, seed: 'bench' });
  writeFileSync(file, `${data.facilities.map((f) => JSON.stringify(f)).join('\n')}\n`);
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await db?.close();
});

describe('import of a 50,000-row file', () => {
  it('imports every row and is idempotent on re-import (nothing changes, no events)', async () => {
    const ingestion = new Ingestion({ pool: db.pool, clock: systemClock, ids: uuidSource });

    // Timing is measured by `npm run bench` (scripts/bench/import.mjs), not here; the timeout bounds it.
    const first = await ingestion.ingestStream('facilities', rowsOf('ndjson', createReadStream(file), 'facilities'));
    expect(first.counts.facilities).toEqual({ received: ROWS, inserted: ROWS, updated: 0, unchanged: 0, rejected: 0 });
    expect(first.errors).toEqual([]);
    const before = await db.pool.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM facilities');
    const outboxBefore = await db.pool.query('SELECT count(*)::int AS n FROM outbox');

    const again = await ingestion.ingestStream('facilities', rowsOf('ndjson', createReadStream(file), 'facilities'));
    expect(again.counts.facilities).toEqual({ received: ROWS, inserted: 0, updated: 0, unchanged: ROWS, rejected: 0 });
    expect(Object.values(again.events).reduce((a, b) => a + b, 0)).toBe(0);
    expect((await db.pool.query('SELECT count(*)::int AS n, max(updated_at) AS last FROM facilities')).rows).toEqual(before.rows);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM outbox')).rows).toEqual(outboxBefore.rows);
    expect(before.rows[0].n).toBe(ROWS);
  }, 60_000);
});
