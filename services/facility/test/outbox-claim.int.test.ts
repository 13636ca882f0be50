import { afterAll, beforeAll, expect, it } from 'vitest';
import { claimBatch } from '../src/store/outbox';
import { setupDb, type TestDb } from './helpers';

// The relay's claim over an outbox whose sent rows are not vacuumed yet (store/outbox.ts claimBatch):
// an index scan, which marks the dead entries it passes so later claims skip them (once no
// transaction of the database can still see those rows), where a bitmap scan would visit them all
// on every claim. Without statistics the planner picks the bitmap scan unless told not to.

let db: TestDb;

beforeAll(async () => {
  db = await setupDb('facility_outbox_claim');
});

afterAll(async () => {
  await db?.close();
});

interface PlanNode {
  'Node Type': string;
  Plans?: PlanNode[];
}

const nodeTypes = (n: PlanNode): string[] => [n['Node Type'], ...(n.Plans ?? []).flatMap(nodeTypes)];

it('claims with an index scan of the pending rows, never a bitmap scan, whatever the statistics say', async () => {
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
      `EXPLAIN (ANALYZE, FORMAT JSON)
       SELECT id, type, payload, trace_context FROM outbox WHERE sent_at IS NULL ORDER BY seq LIMIT 500 FOR UPDATE SKIP LOCKED`,
    );
    const plan = (rows[0] as { 'QUERY PLAN': Array<{ Plan: PlanNode }> })['QUERY PLAN'][0]?.Plan as PlanNode;
    expect(nodeTypes(plan)).toContain('Index Scan');
    expect(nodeTypes(plan)).not.toContain('Bitmap Heap Scan');
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
});
