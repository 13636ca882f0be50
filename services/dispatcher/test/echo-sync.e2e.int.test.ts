import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  type ApiStack,
  eventually,
  repoRoot,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_USAGE_GRPC_SECRET,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { download1, download2, F, writeDownload } from '../../facility/test/echo-fixtures';
import { type Bus, openBus, Receiver, SECRET_KEY, setupDb, type TestDb, teardownDb, testCertificate } from './helpers';

/**
 * ECHO sync end to end: `sync-echo` loads a first download (no events), a Pro account subscribes
 * through the gateway, the next download's 5 changes become exactly 5 events that the facility
 * service's relay publishes and the dispatcher delivers to the receiver, signed.
 */
const run = promisify(execFile);
let db: TestDb;
let receiver: Receiver;
let bus: Bus;
let cert: ReturnType<typeof testCertificate>;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
const stream = uniqueName('ECHO_E2E').toUpperCase();
const cli = resolve(repoRoot, 'services/facility/dist/cli.js');

beforeAll(async () => {
  cert = testCertificate();
  db = await setupDb('echo_e2e');
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
  stack = await startApiStack({
    label: 'echo_e2e',
    database: db.database,
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  dispatcher = await startService('dispatcher', {
    DATABASE_URL: db.database.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: 'echo-e2e',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
}, 180_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

async function syncEcho(from: string): Promise<{ events: Record<string, number>; initial_load: boolean }> {
  const result = await run(process.execPath, [cli, 'sync-echo', '--from', from, '--json'], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.database.url },
  }).catch((err: { code: number; stdout: string }) => {
    // Exit 2: the fixtures' rejectable rows were rejected; everything else applied.
    expect(err.code).toBe(2);
    return err;
  });
  return JSON.parse(result.stdout) as { events: Record<string, number>; initial_load: boolean };
}

it('a second ECHO download yields exactly its 5 events, delivered to a Pro subscription, signed', async () => {
  const first = await syncEcho(await writeDownload(download1()));
  expect(first.initial_load).toBe(true);
  expect(Object.values(first.events).every((n) => n === 0)).toBe(true);

  const { apiKey } = await stack.createAccount('pro');
  const path = `/hook/${randomUUID()}`;
  const res = await fetch(`${stack.gateway}/v1/webhooks`, {
    method: 'POST',
    headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({
      url: receiver.url(path),
      events: ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'],
    }),
  });
  const text = await res.text();
  expect(res.status, text).toBe(201);
  const sub = JSON.parse(text).data as { id: string; secret: string };

  const second = await syncEcho(await writeDownload(download2()));
  expect(second.events).toEqual({ 'violation.new': 2, 'case.new': 1, 'case.updated': 1, 'facility.status_changed': 1 });

  const got = await eventually(
    async () => receiver.at(path),
    (r) => r.length >= 5,
    30_000,
  );
  const envelopes = got.map((r) => JSON.parse(r.body) as { id: string; type: string; data: any });
  const summary = envelopes
    .map((e) =>
      e.type === 'violation.new'
        ? `violation.new ${e.data.violation.violation_type} ${e.data.violation.violation_date}`
        : e.type === 'facility.status_changed'
          ? `facility.status_changed ${e.data.facility.registry_id} ${e.data.previous_status} -> ${e.data.facility.compliance_status}`
          : `${e.type} ${e.data.case.case_number} ${e.data.case.status}`,
    )
    .sort();
  expect(summary).toEqual([
    'case.new 04-2027-0007 active',
    'case.updated 06-2024-0311 closed',
    `facility.status_changed ${F.plating} no_violation -> violation`,
    'violation.new 262.D 2026-10-06',
    'violation.new FRV 2026-09-02',
  ]);
  expect(new Set(envelopes.map((e) => e.id)).size).toBe(5);
  for (const r of got) {
    expect(r.headers['x-service-event-id']).toBe(JSON.parse(r.body).id);
    expect(await octokitVerify(sub.secret, r.body, r.headers['x-service-signature'] ?? '')).toBe(true);
  }

  // The same download again: nothing changes, nothing more is delivered.
  const third = await syncEcho(await writeDownload(download2()));
  expect(Object.values(third.events).every((n) => n === 0)).toBe(true);
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM facility.outbox');
  expect(rows[0]?.n).toBe(5);
  expect(receiver.at(path)).toHaveLength(5);
}, 120_000);
