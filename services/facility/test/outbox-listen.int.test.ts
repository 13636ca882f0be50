import { createPool, ManualClock, type Pool, Supervisor } from '@fcd/service-kit';
import { testUrls, uniqueName } from '@fcd/testing';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTBOX_CHANNEL, OutboxListener } from '../src/outbox/listener';
import { OutboxRelay } from '../src/outbox/relay';
import { EventBus } from '../src/store/event-bus';
import { Ingestion, type RawRow } from '../src/store/ingestion';
import { natsManager, readStream, sequentialIds, setupDb, silentLogger, streamCount, type TestDb, waitFor } from './helpers';

// The relay polls once an hour here: an event that reaches the stream within the test's timeout
// was relayed because the listener woke it, not by a poll.
const POLL_MS = 3_600_000;

let db: TestDb;
let writer: Pool;
let nc: NatsConnection;
let jsm: JetStreamManager;
let bus: EventBus;
let relay: OutboxRelay;
let workers: Supervisor;
let notifications = 0;
const stream = uniqueName('FAC_LISTEN').toUpperCase();
const clock = new ManualClock(Date.parse('2026-04-01T08:00:00.000Z'));
const rows = (items: object[]): RawRow[] => items.map((raw, index) => ({ ref: { index }, raw: { ...raw } }));

/** A write as another process makes it (the CLI, sync-echo, a second replica): its own pool, no nudge. */
async function writeCaseElsewhere(n: number): Promise<void> {
  const ingestion = new Ingestion({ pool: writer, clock, ids: sequentialIds(10 + n) });
  await ingestion.ingestAll({
    facilities: rows([{ registry_id: `F-${n}`, name: `Plant ${n}`, state: 'OH', compliance_status: 'no_violation', programs: ['CAA'] }]),
    cases: rows([
      {
        case_number: `CAA-05-2026-0000${n}`,
        case_type: 'administrative_formal',
        status: 'filed',
        lead_agency: 'EPA',
        filed_date: '2026-03-02',
        registry_ids: [`F-${n}`],
      },
    ]),
  });
}

async function listenerPid(): Promise<number | undefined> {
  const { rows: found } = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'facility-outbox-listen' AND query = $1`,
    [`LISTEN ${OUTBOX_CHANNEL}`],
  );
  return found.length === 1 ? found[0]?.pid : undefined;
}

beforeAll(async () => {
  db = await setupDb('facility_listen');
  writer = createPool({ connectionString: db.url, max: 2, applicationName: 'test-other-process', logger: silentLogger });
  ({ nc, jsm } = await natsManager(testUrls.nats));
  bus = new EventBus({ url: testUrls.nats, stream, subjectPrefix: uniqueName('faclisten'), logger: silentLogger });
  bus.start();
  await waitFor(() => (bus.connected ? true : undefined), 15_000, 'NATS connected');
  relay = new OutboxRelay({ pool: db.pool, bus, clock, logger: silentLogger, batchSize: 100, pollMs: POLL_MS, retentionHours: 0 });
  const listener = new OutboxListener({
    connection: { connectionString: db.url, application_name: 'facility-outbox-listen' },
    logger: silentLogger,
    onCommit: () => {
      notifications++;
      relay.nudge();
    },
  });
  workers = new Supervisor([relay, listener], { logger: silentLogger, restart: { initialMs: 50, maxMs: 200, jitter: 0 } });
  workers.start();
});

afterAll(async () => {
  await workers?.stop();
  await bus?.close();
  await jsm?.streams.delete(stream).catch(() => undefined);
  await nc?.close();
  await writer?.end();
  await db?.close();
});

describe('the relay wakes on commits of any process (LISTEN/NOTIFY)', () => {
  it("publishes another process's commit at once, though the relay polls hourly", async () => {
    await waitFor(listenerPid, 15_000, 'the listener to LISTEN');
    const before = notifications;
    await writeCaseElsewhere(1);
    await waitFor(async () => ((await streamCount(jsm, stream)) === 1 ? true : undefined), 15_000, 'the event published');
    expect(notifications).toBeGreaterThan(before);
    expect((await readStream(jsm, stream)).map((m) => m.envelope.type)).toEqual(['case.new']);
  });

  it('listens again after its connection is cut, and relays what was committed meanwhile', async () => {
    const first = await waitFor(listenerPid, 15_000, 'the listener to LISTEN');
    // The commit lands while no one listens: the reconnect's catch-up nudge relays it.
    await db.pool.query('SELECT pg_terminate_backend($1)', [first]);
    await writeCaseElsewhere(2);
    const second = await waitFor(
      async () => {
        const pid = await listenerPid();
        return pid !== undefined && pid !== first ? pid : undefined;
      },
      15_000,
      'the listener back',
    );
    await waitFor(async () => ((await streamCount(jsm, stream)) === 2 ? true : undefined), 15_000, 'the second event published');

    await writeCaseElsewhere(3);
    await waitFor(async () => ((await streamCount(jsm, stream)) === 3 ? true : undefined), 15_000, 'the third event published');
    expect(await listenerPid()).toBe(second);
    expect(workers.health()['outbox listener']).toMatchObject({ state: 'running' });
  });
});
