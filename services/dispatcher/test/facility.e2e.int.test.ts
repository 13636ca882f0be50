import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { eventually, type LogLine, repoRoot, type ServiceProcess, startService, testUrls, uniqueName } from '@fcd/testing';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Bus, openBus, Receiver, SECRET_KEY, setupDb, subscribe, type TestDb, teardownDb, testCertificate } from './helpers';

/**
 * End to end through real services: ingestion into the facility service →
 * outbox → relay → JetStream → dispatcher process → HTTPS receiver.
 */
let db: TestDb;
let receiver: Receiver;
let bus: Bus;
let cert: ReturnType<typeof testCertificate>;
const running: ServiceProcess[] = [];
const stream = uniqueName('DISP_E2E').toUpperCase();
const INGEST_TOKEN = 'e2e-ingest-token-0123456789abcdef0123456789';

beforeAll(async () => {
  execFileSync('npm', ['run', 'build', '-w', '@fcd/facility'], { cwd: repoRoot, stdio: 'ignore' });
  execFileSync('npm', ['run', 'build', '-w', '@fcd/dispatcher'], { cwd: repoRoot, stdio: 'ignore' });
  cert = testCertificate();
  db = await setupDb('dispatcher_e2e');
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
}, 120_000);

afterAll(async () => {
  for (const p of running) await p.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

it('a violation.new ingested by the facility service reaches the receiver: the envelope with data.violation, signed', async () => {
  const common = {
    DATABASE_URL: db.database.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
  };
  const facility = await startService('facility', {
    ...common,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    INTERNAL_AUTH_SECRET: 'e2e-internal-auth-secret-0123456789abcdef',
    INGEST_TOKEN,
    OUTBOX_POLL_MS: '50',
  });
  running.push(facility);
  running.push(
    await startService('dispatcher', {
      ...common,
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DISPATCHER_CONSUMER: 'e2e',
      WEBHOOK_SECRET_KEY: SECRET_KEY,
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      NODE_EXTRA_CA_CERTS: cert.certFile,
    }),
  );
  const port = (facility.logs().find((l) => l.msg === 'ready') as LogLine & { port: number }).port;
  const ingest = (body: object) =>
    fetch(`http://127.0.0.1:${port}/internal/v1/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.status);

  const registryId = `11${Date.now()}`.slice(0, 12);
  expect(
    await ingest({ facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }] }),
  ).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facility.facilities WHERE registry_id = $1', [registryId]);
  const facilityId = rows[0]?.id as string;
  const p = `/hook/${randomUUID()}`;
  const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facilityId] });
  const other = `/hook/${randomUUID()}`;
  await subscribe(db, { url: receiver.url(other), events: ['case.new'], facility_ids: [facilityId] });

  expect(
    await ingest({
      violations: [
        {
          source_id: `V-${randomUUID()}`,
          registry_id: registryId,
          program: 'CAA',
          violation_type: 'emissions_exceedance',
          violation_date: '2026-11-20',
          severity: 'significant',
        },
      ],
    }),
  ).toBe(200);
  const [got] = await eventually(
    async () => receiver.at(p),
    (r) => r.length === 1,
    20_000,
  );
  const envelope = JSON.parse(got?.body ?? '{}');
  expect(envelope).toMatchObject({
    type: 'violation.new',
    data: { violation: { facility_id: facilityId, facility_name: 'Acme Smelting' } },
  });
  expect(envelope.id).toMatch(/^evt_/);
  expect(Object.keys(envelope.data)).toEqual(['violation']);
  expect(Object.keys(envelope.data.violation)).toEqual(
    expect.arrayContaining(['id', 'facility_id', 'facility_name', 'program', 'violation_type', 'violation_date', 'severity']),
  );
  expect(got?.headers['x-service-event-id']).toBe(envelope.id);
  expect(await octokitVerify(sub.secret, got?.body ?? '', got?.headers['x-service-signature'] ?? '')).toBe(true);
  expect(receiver.at(other)).toHaveLength(0);
}, 60_000);
