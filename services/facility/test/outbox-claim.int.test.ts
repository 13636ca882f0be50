import { afterAll, beforeAll, expect, it } from 'vitest';
import { claimBatch } from '../src/store/outbox';
import { setupDb, type TestDb } from './helpers';

// The relay's claim over an outbox whose sent rows are not vacuumed yet (store/outbox.ts claimBatch).

let db: TestDb;

beforeAll(async () => {
  db = await setupDb('facility_outbox_claim');
});

afterAll(async () => {
  await db?.close();
});

interface PlanNode {
  'Node Type': string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

const nodeTypes = (n: PlanNode): string[] => [n['Node Type'], ...(n.Plans ?? []).flatMap(nodeTypes)];

it('skips the rows sent since the last VACUUM after one pass, whatever the statistics say', async () => {
  const insert = (n: number, tag: string) =>
    db.pool.query(
      `INSERT INTO outbox (id, type, payload, created_at)
       SELECT gen_random_uuid(), 'violation.new', repeat($2, 600), now() FROM generate_series(1, $1::int)`,
      [n, tag],
    );
  // A table never analyzed (no autovacuum pass yet), as in the paced benchmark.
  await insert(6000, 's');
  await db.pool.query('UPDATE outbox SET sent_at = now()');
  await insert(2, 'p');
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const first = await claimBatch(client, 500);
    expect(first.map((r) => r.payload[0])).toEqual(['p', 'p']);
    // The same statement again, in the same transaction (the claim's setting in force), explained.
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
       SELECT id, type, payload, trace_context FROM outbox WHERE sent_at IS NULL ORDER BY seq LIMIT 500 FOR UPDATE SKIP LOCKED`,
    );
    const plan = (rows[0]?.['QUERY PLAN'][0] as { Plan: PlanNode }).Plan;
    expect(nodeTypes(plan)).toContain('Index Scan');
    expect(nodeTypes(plan)).not.toContain('Bitmap Heap Scan');
    // The dead entries of the 6,000 sent rows were marked by the first pass: a few dozen pages, not the ~500 of the sent rows.
    expect(plan['Shared Hit Blocks'] + plan['Shared Read Blocks']).toBeLessThan(40);
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
});
