import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  type ApiStack,
  eventually,
  PrivateTlsNats,
  type ServiceProcess,
  startApiStack,
  startService,
  TestCertificates,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Receiver, SECRET_KEY, setupDb, subscribe, type TestDb, teardownDb, testCertificate } from './helpers';

/**
 * Facility relay and dispatcher against a NATS server that requires a user and TLS, each user
 * limited to what docs/operations.md ("NATS accounts and permissions") grants: the facility may
 * publish events, the dispatcher may only consume them.
 */
const stream = uniqueName('NATS_TLS').toUpperCase();
const prefix = stream.toLowerCase();
const consumer = 'tls_dispatcher';
const PASSWORDS = { facility: 'facility-nats-password-0123456789', dispatcher: 'dispatcher-nats-password-0123456789' };

/** The permission blocks of docs/operations.md for this stream, subject prefix and consumer. */
function natsPermissions(s: string, p: string, c: string) {
  return {
    facility: {
      publish: [`${p}.>`, '$JS.API.INFO', `$JS.API.STREAM.INFO.${s}`, `$JS.API.STREAM.CREATE.${s}`, `$JS.API.STREAM.UPDATE.${s}`],
      subscribe: ['_INBOX.>'],
    },
    dispatcher: {
      publish: [
        '$JS.API.INFO',
        `$JS.API.STREAM.INFO.${s}`,
        `$JS.API.STREAM.CREATE.${s}`,
        `$JS.API.CONSUMER.INFO.${s}.${c}`,
        `$JS.API.CONSUMER.CREATE.${s}.${c}`,
        `$JS.API.CONSUMER.CREATE.${s}.${c}.>`,
        `$JS.API.CONSUMER.DURABLE.CREATE.${s}.${c}`,
        `$JS.API.CONSUMER.MSG.NEXT.${s}.${c}`,
        `$JS.ACK.${s}.${c}.>`,
      ],
      subscribe: ['_INBOX.>'],
    },
  };
}

let certs: TestCertificates;
let nats: PrivateTlsNats;
let db: TestDb;
let receiver: Receiver;
let stack: ApiStack;
let dispatcher: ServiceProcess;
const httpsCert = testCertificate();

beforeAll(async () => {
  certs = new TestCertificates();
  const perms = natsPermissions(stream, prefix, consumer);
  nats = await PrivateTlsNats.start(certs, [
    { user: 'facility', password: PASSWORDS.facility, ...perms.facility },
    { user: 'dispatcher', password: PASSWORDS.dispatcher, ...perms.dispatcher },
    { user: 'admin', password: 'admin-nats-password-0123456789' },
  ]);
  db = await setupDb('nats_tls');
  receiver = new Receiver(httpsCert);
  await receiver.start();
  const natsEnv = (user: 'facility' | 'dispatcher') => ({
    NATS_URL: nats.url,
    NATS_USER: user,
    NATS_PASSWORD: PASSWORDS[user],
    NATS_TLS_CA_FILE: certs.caFile,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: prefix,
  });
  stack = await startApiStack({
    label: 'nats_tls',
    database: db.database,
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    facilityEnv: natsEnv('facility'),
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  dispatcher = await startService('dispatcher', {
    ...natsEnv('dispatcher'),
    DATABASE_URL: db.database.url,
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: consumer,
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: httpsCert.certFile,
  });
}, 120_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  await receiver?.close();
  await teardownDb(db);
  await nats?.stop();
  certs?.remove();
});

it('the facility relay publishes and the dispatcher consumes through a NATS server requiring a user and TLS', async () => {
  const registryId = `21${Date.now()}`.slice(0, 12);
  expect(
    (
      await stack.ingest({
        facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }],
      })
    ).status,
  ).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facility.facilities WHERE registry_id = $1', [registryId]);
  const p = `/hook/${randomUUID()}`;
  await subscribe(db, { url: receiver.url(p), facility_ids: [rows[0]?.id as string] });
  expect((await stack.ingest({ violations: [violationRow(registryId)] })).status).toBe(200);
  const [got] = await eventually(
    async () => receiver.at(p),
    (r) => r.length === 1,
    20_000,
  );
  expect(JSON.parse(got?.body ?? '{}')).toMatchObject({ type: 'violation.new' });
  const logs = JSON.stringify([...stack.facility.logs(), ...dispatcher.logs()]);
  expect(logs).not.toContain(PASSWORDS.facility);
  expect(logs).not.toContain(PASSWORDS.dispatcher);
}, 60_000);

it('refuses the dispatcher user publishing events: nothing reaches the stream', async () => {
  const nc = await connect({
    servers: nats.url,
    user: 'dispatcher',
    pass: PASSWORDS.dispatcher,
    tls: { ca: readFileSync(certs.caFile, 'utf8') },
  });
  const admin = await connect({
    servers: nats.url,
    user: 'admin',
    pass: 'admin-nats-password-0123456789',
    tls: { ca: readFileSync(certs.caFile, 'utf8') },
  });
  try {
    const jsm = await jetstreamManager(admin);
    const before = (await jsm.streams.info(stream)).state.messages;
    const refused = await nc.request(`${prefix}.violation.new`, '{}', { timeout: 1000 }).then(
      () => 'answered',
      (err: Error) => err.message,
    );
    expect(refused).not.toBe('answered');
    expect((await jsm.streams.info(stream)).state.messages).toBe(before);
    expect(nats.log()).toMatch(
      /Publish Violation.*"dispatcher".*violation\.new|Permissions Violation for Publish to "[^"]*violation\.new"/i,
    );
  } finally {
    await nc.close();
    await admin.close();
  }
});
