import type { EventEnvelope } from '@fcd/events';
import { ManualClock, type Pool } from '@fcd/service-kit';
import { testUrls, uniqueName } from '@fcd/testing';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Counter, Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import { OutboxRelay } from '../src/outbox/relay';
import { EventBus } from '../src/store/event-bus';
import { Ingestion, type RawRow } from '../src/store/ingestion';
import { claimBatch } from '../src/store/outbox';
import { natsManager, pendingOutbox, readStream, sequentialIds, setupDb, silentLogger, streamCount, type TestDb, waitFor } from './helpers';

let db: TestDb;
let nc: NatsConnection;
let jsm: JetStreamManager;
const stream = uniqueName('FAC_EVENTS').toUpperCase();
const prefix = uniqueName('facevents');
const clock = new ManualClock(Date.parse('2026-04-01T08:00:00.000Z'));
const buses: EventBus[] = [];
const relays: OutboxRelay[] = [];

function newBus(): EventBus {
  const bus = new EventBus({ url: testUrls.nats, stream, subjectPrefix: prefix, logger: silentLogger });
  buses.push(bus);
  bus.start();
  return bus;
}

function newRelay(pool: Pool, bus: EventBus, counter?: Counter<'type'>, batchSize = 100): OutboxRelay {
  const relay = new OutboxRelay({
    pool,
    bus,
    clock,
    logger: silentLogger,
    batchSize,
    pollMs: 20,
    retentionHours: 0,
    ...(counter ? { eventsPublished: counter } : {}),
  });
  relays.push(relay);
  return relay;
}

const rows = (items: object[]): RawRow[] => items.map((raw, index) => ({ ref: { index }, raw: { ...raw } }));

beforeAll(async () => {
  db = await setupDb('facility_events');
  ({ nc, jsm } = await natsManager(testUrls.nats));
});

afterAll(async () => {
  for (const r of relays) await r.stop();
  for (const b of buses) await b.close();
  await jsm?.streams.delete(stream).catch(() => undefined);
  await nc?.close();
  await db?.close();
});

beforeEach(async () => {
  for (const r of relays.splice(0)) await r.stop();
  await db.pool.query('TRUNCATE outbox, cases, violations, facilities');
  await jsm.streams.purge(stream).catch(() => undefined);
});

describe('outbox relay to JetStream', () => {
  const ingestion = () => new Ingestion({ pool: db.pool, clock, ids: sequentialIds(3) });
  const facility = {
    registry_id: 'F-1',
    name: 'Coastal Chemical Plant',
    state: 'LA',
    compliance_status: 'no_violation',
    programs: ['CAA', 'CWA'],
  };
  const caseRow = {
    case_number: 'CAA-06-2026-00077',
    case_type: 'administrative_formal',
    status: 'filed',
    lead_agency: 'EPA',
    filed_date: '2026-03-02',
    registry_ids: ['F-1'],
  };

  it('an import that adds a violation, files a case, changes a case status and a facility compliance status yields exactly those four events', async () => {
    const bus = newBus();
    const relay = newRelay(db.pool, bus);
    relay.start();
    await ingestion().ingestAll({ facilities: rows([facility]), cases: rows([caseRow]) });
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 15_000, 'base events published');
    const base = await readStream(jsm, stream);
    expect(base.map((m) => m.envelope.type)).toEqual(['case.new']);

    const report = await ingestion().ingestAll({
      facilities: rows([{ ...facility, compliance_status: 'violation' }]),
      violations: rows([
        {
          source_id: 'LA-V-1',
          registry_id: 'F-1',
          program: 'CWA',
          violation_type: 'Effluent limit exceedance',
          violation_date: '2026-03-20',
          severity: 'moderate',
        },
      ]),
      cases: rows([
        { ...caseRow, status: 'active' },
        { ...caseRow, case_number: 'CWA-06-2026-00078', registry_ids: ['F-1'] },
      ]),
    });
    expect(report.events).toEqual({ 'violation.new': 1, 'case.new': 1, 'case.updated': 1, 'facility.status_changed': 1 });
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 15_000, 'events published');

    const all = await readStream(jsm, stream);
    const added = all.slice(base.length);
    expect(added.map((m) => m.envelope.type)).toEqual(['facility.status_changed', 'violation.new', 'case.updated', 'case.new']);
    const { rows: outboxRows } = await db.pool.query<{ payload: string; sent_at: Date | null }>(
      'SELECT payload, sent_at FROM outbox ORDER BY seq',
    );
    expect(outboxRows.every((r) => r.sent_at !== null)).toBe(true);
    all.forEach((m, i) => {
      expect(m.subject).toBe(`${prefix}.${m.envelope.type}`);
      expect(m.msgId).toBe(m.envelope.id);
      expect(m.envelope.id).toMatch(/^evt_[0-9a-f-]{36}$/);
      expect(m.envelope.created_at).toBe('2026-04-01T08:00:00.000Z');
      expect(m.envelope).toEqual(JSON.parse(outboxRows[i]?.payload as string));
    });
    const [status, violation, updated, created] = added.map((m) => m.envelope) as EventEnvelope[];
    expect(status?.data).toMatchObject({
      previous_status: 'no_violation',
      facility: { registry_id: 'F-1', compliance_status: 'violation' },
    });
    expect(violation?.data).toMatchObject({ violation: { facility_name: 'Coastal Chemical Plant', severity: 'moderate', program: 'CWA' } });
    expect(updated?.data).toMatchObject({ previous_status: 'filed', case: { case_number: 'CAA-06-2026-00077', status: 'active' } });
    expect(created?.data).toMatchObject({ case: { case_number: 'CWA-06-2026-00078', status: 'filed' } });
    // What the relay publishes carries the facility snapshots: the facility as the status change
    // left it, on the violation and on both cases (one facility each).
    const snapshot = status?.data.facility;
    expect(snapshot).toMatchObject({ registry_id: 'F-1', state: 'LA', programs: ['CAA', 'CWA'], compliance_status: 'violation' });
    expect(violation?.data.facility).toEqual(snapshot);
    expect(updated?.data.facilities).toEqual([snapshot]);
    expect(created?.data.facilities).toEqual([snapshot]);

    // The same import again: nothing changes, nothing is published.
    await ingestion().ingestAll({ facilities: rows([{ ...facility, compliance_status: 'violation' }]) });
    expect(await pendingOutbox(db.pool)).toBe(0);
    expect(await streamCount(jsm, stream)).toBe(all.length);

    const info = await jsm.streams.info(stream);
    expect(info.config.subjects).toEqual([`${prefix}.>`]);
    expect(info.config.duplicate_window).toBeGreaterThanOrEqual(120 * 1e9);
  });

  it('an event published but not marked sent (crash after the ack, before the commit) is on the stream once after the relay runs again', async () => {
    const bus = newBus();
    await waitFor(() => (bus.connected ? true : undefined), 10_000, 'nats');
    const data = generateDemoData({ facilities: 40, seed: 'crash-window' });
    await ingestion().ingestAll({ facilities: rows(data.facilities), violations: rows(data.violations), cases: rows(data.cases) });
    const total = await pendingOutbox(db.pool);
    expect(total).toBe(data.violations.length + data.cases.length);

    // A relay that published a batch and died before marking it sent.
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const claimed = await claimBatch(client, Math.ceil(total / 2));
      const published = await bus.publish(claimed);
      expect(published.failed).toBe(0);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await pendingOutbox(db.pool)).toBe(total);

    const relay = newRelay(db.pool, bus);
    relay.start();
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 15_000, 'outbox drained');
    const msgs = await readStream(jsm, stream);
    expect(msgs).toHaveLength(total);
    expect(new Set(msgs.map((m) => m.envelope.id)).size).toBe(total);
  });

  it('several relay replicas publish each event exactly once (FOR UPDATE SKIP LOCKED)', async () => {
    const data = generateDemoData({ facilities: 250, seed: 'replicas' });
    await ingestion().ingestAll({ facilities: rows(data.facilities), violations: rows(data.violations), cases: rows(data.cases) });
    const total = await pendingOutbox(db.pool);
    expect(total).toBeGreaterThan(200);

    const registry = new Registry();
    const counter = new Counter({ name: 'published', help: 'published', labelNames: ['type'] as const, registers: [registry] });
    const replicas = [0, 1, 2].map(() => newRelay(db.pool, newBus(), counter, 10));
    await waitFor(() => (buses.slice(-3).every((b) => b.connected) ? true : undefined), 10_000, 'nats');
    for (const r of replicas) r.start();
    await waitFor(async () => ((await pendingOutbox(db.pool)) === 0 ? true : undefined), 20_000, 'outbox drained');

    const published = (await counter.get()).values.reduce((s, v) => s + v.value, 0);
    expect(published).toBe(total);
    const msgs = await readStream(jsm, stream);
    expect(msgs).toHaveLength(total);
    expect(new Set(msgs.map((m) => m.msgId)).size).toBe(total);
  });
});
