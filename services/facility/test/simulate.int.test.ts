import { ManualClock } from '@fcd/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import { runSimulation } from '../src/demo/simulate';
import { Ingestion, type RawRow } from '../src/store/ingestion';
import { sequentialIds, setupDb, silentLogger, type TestDb } from './helpers';

let db: TestDb;
const clock = new ManualClock(Date.parse('2026-06-01T10:00:00.000Z'));
const rows = (items: object[]): RawRow[] => items.map((raw, index) => ({ ref: { index }, raw: { ...raw } }));

beforeAll(async () => {
  db = await setupDb('facility_simulate');
});

afterAll(async () => {
  await db?.close();
});

describe('simulate', () => {
  it('refuses to run without facilities', async () => {
    const ingestion = new Ingestion({ pool: db.pool, clock, ids: sequentialIds(1) });
    await expect(runSimulation({ pool: db.pool, ingestion, clock, logger: silentLogger, rate: 10, maxSteps: 1 })).rejects.toThrow(
      /run `seed`/,
    );
  });

  it('keeps producing violations and case/status changes at the given rate, each with its events in the outbox', async () => {
    const ingestion = new Ingestion({ pool: db.pool, clock, ids: sequentialIds(2) });
    const d = generateDemoData({ facilities: 60, seed: 'sim' });
    await ingestion.ingestAll({ facilities: rows(d.facilities), violations: rows(d.violations), cases: rows(d.cases) });
    await db.pool.query('TRUNCATE outbox');

    const started = clock.now();
    const summary = await runSimulation({
      pool: db.pool,
      ingestion,
      clock,
      logger: silentLogger,
      rate: 4,
      durationMs: 20_000,
      seed: 'sim-run',
      sleep: async (ms) => clock.advance(ms),
    });
    // 4 per second for 20 seconds of (simulated) time.
    expect(summary.steps).toBe(80);
    expect(clock.now() - started).toBe(20_000);
    for (const type of ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'] as const) {
      expect(summary.events[type], type).toBeGreaterThan(0);
    }
    const { rows: byType } = await db.pool.query<{ type: string; n: number }>('SELECT type, count(*)::int AS n FROM outbox GROUP BY type');
    expect(Object.fromEntries(byType.map((r) => [r.type, r.n]))).toEqual(summary.events);
  });
});
