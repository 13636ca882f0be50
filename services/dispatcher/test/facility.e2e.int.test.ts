import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import {
  type ApiStack,
  eventually,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_USAGE_GRPC_SECRET,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { verifyDelivery, verifyDeliveryHeaders } from '@fcd/webhook-verify';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  attemptsOf,
  type Bus,
  openBus,
  Receiver,
  SECRET_KEY,
  setupDb,
  subscribe,
  type TestDb,
  teardownDb,
  testCertificate,
} from './helpers';

/**
 * End to end through real services: ingestion into the facility service →
 * outbox → relay → JetStream → dispatcher process → HTTPS receiver; and the
 * webhook API through the gateway (usage service for keys and tiers, webhook
 * service) on the same database, so what a customer does through the API is
 * what the dispatcher sends.
 */
let db: TestDb;
let receiver: Receiver;
let bus: Bus;
let cert: ReturnType<typeof testCertificate>;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
let gateway: string;
const stream = uniqueName('DISP_E2E').toUpperCase();

beforeAll(async () => {
  cert = testCertificate();
  db = await setupDb('dispatcher_e2e');
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
  // The receiver is on loopback: this stack allows private destinations in the API and the dispatcher.
  stack = await startApiStack({
    label: 'dispatcher_e2e',
    database: db.database,
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  gateway = stack.gateway;
  dispatcher = await startService('dispatcher', {
    DATABASE_URL: db.database.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: 'e2e',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
}, 120_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

async function ingest(body: object): Promise<number> {
  return (await stack.ingest(body)).status;
}

/** A new facility (ingested) and its id. */
async function newFacility(registryId: string): Promise<string> {
  expect(
    await ingest({ facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }] }),
  ).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facility.facilities WHERE registry_id = $1', [registryId]);
  return rows[0]?.id as string;
}

function ingestViolation(registryId: string): Promise<number> {
  return ingest({ violations: [violationRow(registryId)] });
}

async function call(
  path: string,
  key: string,
  init: { method?: string; body?: unknown } = {},
): Promise<{ status: number; text: string; body: any }> {
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
}

/** The signature check a receiver writes with node:crypto alone. */
function hmacVerifies(secret: string, body: string, header: string | undefined): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
  const got = Buffer.from(header ?? '');
  return got.length === expected.length && timingSafeEqual(got, expected);
}

async function signedBy(secret: string, r: { body: string; headers: Record<string, string> } | undefined): Promise<[boolean, boolean]> {
  const header = r?.headers['x-service-signature'] ?? '';
  return [await octokitVerify(secret, r?.body ?? '', header), hmacVerifies(secret, r?.body ?? '', header)];
}

it('a violation.new ingested by the facility service reaches the receiver: the envelope with data.violation, signed', async () => {
  const registryId = `11${Date.now()}`.slice(0, 12);
  const facilityId = await newFacility(registryId);
  const p = `/hook/${randomUUID()}`;
  const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facilityId] });
  const other = `/hook/${randomUUID()}`;
  await subscribe(db, { url: receiver.url(other), events: ['case.new'], facility_ids: [facilityId] });

  expect(await ingestViolation(registryId)).toBe(200);
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
  // The violation, then its facility's snapshot (what subscription filters match on).
  expect(Object.keys(envelope.data)).toEqual(['violation', 'facility']);
  expect(envelope.data.facility).toMatchObject({ id: facilityId, name: 'Acme Smelting' });
  expect(Object.keys(envelope.data.violation)).toEqual(
    expect.arrayContaining(['id', 'facility_id', 'facility_name', 'program', 'violation_type', 'violation_date', 'severity']),
  );
  expect(got?.headers['x-service-event-id']).toBe(envelope.id);
  expect(await octokitVerify(sub.secret, got?.body ?? '', got?.headers['x-service-signature'] ?? '')).toBe(true);
  expect(receiver.at(other)).toHaveLength(0);
}, 60_000);

it('through the gateway with a Pro key: subscriptions (one facility, all facilities) get ingested events; the delivery log shows every attempt; manual retry, test event and rotate-secret work end to end', async () => {
  const { apiKey } = await stack.createAccount('pro');
  const registryId = `12${Date.now()}`.slice(0, 12);
  const facilityId = await newFacility(registryId);
  const [p, pAll] = [`/hook/${randomUUID()}`, `/hook/${randomUUID()}`];

  const created = await call('/v1/webhooks', apiKey, {
    method: 'POST',
    body: { url: receiver.url(p), events: ['violation.new'], facility_ids: [facilityId] },
  });
  expect(created.status, created.text).toBe(201);
  const sub = created.body.data as { id: string; secret: string; facility_ids: string[] | null };
  expect(sub.facility_ids).toEqual([facilityId]);
  // facility_ids omitted: every facility, shown as null.
  const createdAll = await call('/v1/webhooks', apiKey, { method: 'POST', body: { url: receiver.url(pAll), events: ['violation.new'] } });
  expect(createdAll.status, createdAll.text).toBe(201);
  const all = createdAll.body.data as { id: string; secret: string; facility_ids: string[] | null };
  expect(all.facility_ids).toBeNull();

  // 1. An ingested violation reaches both subscriptions, each signed with its own secret.
  expect(await ingestViolation(registryId)).toBe(200);
  await eventually(
    async () => [receiver.at(p).length, receiver.at(pAll).length],
    ([a, b]) => a === 1 && b === 1,
    20_000,
  );
  const first = receiver.at(p)[0]!;
  const envelope = JSON.parse(first.body);
  expect(envelope).toMatchObject({ type: 'violation.new', data: { violation: { facility_id: facilityId } } });
  expect(first.headers['x-service-event-id']).toBe(envelope.id);
  expect(first.headers['x-service-delivery-attempt']).toBe('1');
  expect(await signedBy(sub.secret, first)).toEqual([true, true]);
  const firstAll = receiver.at(pAll)[0]!;
  expect(firstAll.body).toBe(first.body);
  expect(firstAll.headers['x-service-event-id']).toBe(envelope.id);
  expect(await signedBy(all.secret, firstAll)).toEqual([true, true]);

  // 2. The delivery log through the API: the delivery and its one attempt, as recorded.
  const deliveriesPath = `/v1/webhooks/${sub.id}/deliveries`;
  const logged = async (attempts: number) =>
    eventually(
      () => call(deliveriesPath, apiKey),
      (r) => r.body?.data?.[0]?.attempts?.length === attempts && r.body.data[0].status !== 'pending',
    );
  const log1 = await logged(1);
  expect(log1.status).toBe(200);
  const deliveryId = first.headers['x-service-delivery-id'] as string;
  // The API's attempt view of the rows the dispatcher recorded (latency_ms is duration_ms; the timings are their columns).
  const recorded = async () =>
    (await attemptsOf(db, sub.id)).map((row) => {
      const a = row as typeof row & Record<string, unknown>;
      return {
        attempt: a.attempt,
        started_at: a.started_at.toISOString(),
        latency_ms: a.duration_ms,
        response_status: a.response_status,
        error: a.error,
        outcome: a.outcome,
        request_headers: a.request_headers,
        response_headers: a.response_headers,
        response_headers_truncated: a.response_headers_truncated,
        response_body: a.response_body,
        response_body_truncated: a.response_body_truncated,
        timings: {
          dns_ms: a.dns_ms,
          connect_ms: a.connect_ms,
          tls_ms: a.tls_ms,
          first_byte_ms: a.first_byte_ms,
          connection_reused: a.connection_reused,
        },
        subscription_paused: null,
      };
    });
  const attempts1 = await recorded();
  expect(attempts1).toEqual([
    {
      attempt: 1,
      started_at: expect.any(String),
      latency_ms: expect.any(Number),
      response_status: 204,
      error: null,
      outcome: 'success',
      request_headers: expect.objectContaining({
        'x-service-delivery-id': first.headers['x-service-delivery-id'],
        'x-service-delivery-attempt': '1',
      }),
      response_headers: expect.objectContaining({ 'content-type': 'text/plain' }),
      response_headers_truncated: false,
      // A 204 has no body.
      response_body: '',
      response_body_truncated: false,
      timings: attempts1[0]?.timings.connection_reused
        ? { dns_ms: null, connect_ms: null, tls_ms: null, first_byte_ms: expect.any(Number), connection_reused: true }
        : {
            dns_ms: expect.any(Number),
            connect_ms: expect.any(Number),
            tls_ms: expect.any(Number),
            first_byte_ms: expect.any(Number),
            connection_reused: false,
          },
      subscription_paused: null,
    },
  ]);
  // Both subscriptions point at the receiver's one origin: whichever delivery went first opened the
  // connection (the other may have reused it), so at least one first attempt has connection timings.
  const firstAllAttempt = (
    await eventually(
      () => attemptsOf(db, all.id),
      (rows) => rows.length === 1,
    )
  )[0] as Record<string, unknown> | undefined;
  expect([attempts1[0]?.timings.connection_reused, firstAllAttempt?.connection_reused]).toContain(false);
  expect(log1.body).toEqual({
    data: [
      {
        id: deliveryId,
        event_id: envelope.id,
        event_type: 'violation.new',
        status: 'succeeded',
        attempt_count: 1,
        next_attempt_at: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
        attempts: attempts1,
      },
    ],
    pagination: { limit: 25, next_cursor: null, has_more: false },
  });

  // 3. The receiver fails the next request; a manual retry sends the same event again (attempt 2, failed, no
  //    automatic retry), a second manual retry succeeds (attempt 3). The log shows all three.
  receiver.behaviours.set(p, (_r, n) => (n === 2 ? 500 : 204));
  const retry = () => call(`${deliveriesPath}/${deliveryId}/retry`, apiKey, { method: 'POST' });
  const retried = await retry();
  expect(retried.status, retried.text).toBe(202);
  expect(retried.body.data).toMatchObject({ id: deliveryId, status: 'pending', attempt_count: 1 });
  const log2 = await logged(2);
  expect(log2.body.data[0]).toMatchObject({ status: 'failed', attempt_count: 2, next_attempt_at: null });
  expect((await retry()).status).toBe(202);
  const log3 = await logged(3);
  const attempts3 = await recorded();
  expect(attempts3.map((a) => [a.attempt, a.outcome, a.response_status, a.error])).toEqual([
    [1, 'success', 204, null],
    [2, 'failure', 500, 'HTTP 500'],
    [3, 'success', 204, null],
  ]);
  expect(log3.body.data).toEqual([
    {
      id: deliveryId,
      event_id: envelope.id,
      event_type: 'violation.new',
      status: 'succeeded',
      attempt_count: 3,
      next_attempt_at: null,
      created_at: log1.body.data[0].created_at,
      updated_at: expect.any(String),
      attempts: attempts3,
    },
  ]);
  const sent = receiver.at(p);
  expect(
    sent.map((r) => [r.headers['x-service-event-id'], r.headers['x-service-delivery-id'], r.headers['x-service-delivery-attempt']]),
  ).toEqual([
    [envelope.id, deliveryId, '1'],
    [envelope.id, deliveryId, '2'],
    [envelope.id, deliveryId, '3'],
  ]);
  expect(sent.every((r) => r.body === first.body)).toBe(true);
  expect(receiver.at(pAll)).toHaveLength(1);

  // 4. A test event: one signed webhook.test delivery, to this subscription only.
  const test = await call(`/v1/webhooks/${sub.id}/test`, apiKey, { method: 'POST' });
  expect(test.status, test.text).toBe(202);
  expect(test.body.data).toMatchObject({ event_type: 'webhook.test', status: 'pending', attempt_count: 0, attempts: [] });
  const [testGot] = await eventually(
    async () => receiver.at(p).filter((r) => r.headers['x-service-event-type'] === 'webhook.test'),
    (r) => r.length === 1,
  );
  expect(JSON.parse(testGot?.body ?? '{}')).toEqual({
    id: test.body.data.event_id,
    type: 'webhook.test',
    created_at: expect.any(String),
    data: { webhook_id: sub.id, message: 'This is a test event sent from the webhook settings.' },
  });
  expect([
    testGot?.headers['x-service-event-id'],
    testGot?.headers['x-service-delivery-id'],
    testGot?.headers['x-service-delivery-attempt'],
  ]).toEqual([test.body.data.event_id, test.body.data.id, '1']);
  expect(await signedBy(sub.secret, testGot)).toEqual([true, true]);
  expect(receiver.at(pAll)).toHaveLength(1);

  // 5. rotate-secret: the new secret is returned once; the next delivery verifies with it and not with the old one.
  const rotated = await call(`/v1/webhooks/${sub.id}/rotate-secret`, apiKey, { method: 'POST' });
  expect(rotated.status, rotated.text).toBe(200);
  const newSecret = rotated.body.data.secret as string;
  expect(newSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  expect(newSecret).not.toBe(sub.secret);
  expect((await call(`/v1/webhooks/${sub.id}`, apiKey)).body.data.secret).toBe(`whsec_********${newSecret.slice(-4)}`);
  const before = receiver.at(p).length;
  expect(await ingestViolation(registryId)).toBe(200);
  const [next] = await eventually(
    async () => receiver.at(p).slice(before),
    (r) => r.length === 1,
    20_000,
  );
  const nextEnvelope = JSON.parse(next?.body ?? '{}');
  expect(nextEnvelope).toMatchObject({ type: 'violation.new', data: { violation: { facility_id: facilityId } } });
  expect(nextEnvelope.id).not.toBe(envelope.id);
  expect(await signedBy(newSecret, next)).toEqual([true, true]);
  expect(await signedBy(sub.secret, next)).toEqual([false, false]);
  // The all-facilities subscription got it too, still signed with its own (unrotated) secret.
  const [, nextAll] = await eventually(
    async () => receiver.at(pAll),
    (r) => r.length === 2,
  );
  expect(nextAll?.headers['x-service-event-id']).toBe(nextEnvelope.id);
  expect(await signedBy(all.secret, nextAll)).toEqual([true, true]);
}, 60_000);

/** A delivery as every verifier a receiver may use sees it: [standardwebhooks, svix, octokit, node:crypto (both headers)]. */
function verifiers(secret: string, r: { body: string; headers: Record<string, string> }, body = r.body, headers = r.headers) {
  const attempt = <T>(f: () => T) => {
    try {
      f();
      return true;
    } catch {
      return false;
    }
  };
  const std = {
    'webhook-id': headers['webhook-id'],
    'webhook-timestamp': headers['webhook-timestamp'],
    'webhook-signature': headers['webhook-signature'],
  } as Record<string, string>;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const manual = `v1,${createHmac('sha256', key).update(`${std['webhook-id']}.${std['webhook-timestamp']}.${body}`).digest('base64')}`;
  return Promise.all([
    attempt(() => new StandardWebhook(secret).verify(body, std)),
    attempt(() => new SvixWebhook(secret).verify(body, std)),
    octokitVerify(secret, body, headers['x-service-signature'] ?? '').catch(() => false),
    hmacVerifies(secret, body, headers['x-service-signature']) && (std['webhook-signature'] ?? '').split(' ').includes(manual),
  ]);
}

it('every event type (and webhook.test) verifies with standardwebhooks, svix, @octokit/webhooks-methods and node:crypto; a tampered body, timestamp or id does not', async () => {
  const { apiKey } = await stack.createAccount('pro');
  const registryId = `13${Date.now()}`.slice(0, 12);
  const facilityId = await newFacility(registryId);
  const p = `/hook/${randomUUID()}`;
  const created = await call('/v1/webhooks', apiKey, {
    method: 'POST',
    body: {
      url: receiver.url(p),
      events: ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'],
      facility_ids: [facilityId],
    },
  });
  expect(created.status, created.text).toBe(201);
  const sub = created.body.data as { id: string; secret: string };
  const caseRow = {
    case_number: `CAA-05-2026-${registryId.slice(-5)}`,
    case_type: 'administrative_formal',
    status: 'filed',
    lead_agency: 'EPA',
    filed_date: '2026-03-02',
    registry_ids: [registryId],
  };
  expect(await ingest({ cases: [caseRow] })).toBe(200);
  await eventually(
    async () => receiver.at(p),
    (r) => r.length === 1,
    20_000,
  );
  expect(
    await ingest({
      facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'violation' }],
      violations: [violationRow(registryId)],
      cases: [{ ...caseRow, status: 'active' }],
    }),
  ).toBe(200);
  expect((await call(`/v1/webhooks/${sub.id}/test`, apiKey, { method: 'POST' })).status).toBe(202);
  const got = await eventually(
    async () => receiver.at(p),
    (r) => r.length === 5,
    20_000,
  );
  expect(got.map((r) => r.headers['x-service-event-type']).sort()).toEqual([
    'case.new',
    'case.updated',
    'facility.status_changed',
    'violation.new',
    'webhook.test',
  ]);
  for (const r of got) {
    const envelope = JSON.parse(r.body);
    expect(Object.keys(envelope), envelope.type).toEqual(['id', 'type', 'created_at', 'data']);
    expect([r.headers['webhook-id'], r.headers['x-service-event-id']]).toEqual([envelope.id, envelope.id]);
    expect(Math.abs(Number(r.headers['webhook-timestamp']) - r.at / 1000)).toBeLessThan(5);
    expect(await verifiers(sub.secret, r), envelope.type).toEqual([true, true, true, true]);
    const ts = String(Number(r.headers['webhook-timestamp']) + 1);
    expect(await verifiers(sub.secret, r, `${r.body} `), `${envelope.type} body`).toEqual([false, false, false, false]);
    expect((await verifiers(sub.secret, r, r.body, { ...r.headers, 'webhook-timestamp': ts })).slice(0, 2)).toEqual([false, false]);
    expect((await verifiers(sub.secret, r, r.body, { ...r.headers, 'webhook-id': `${envelope.id}x` })).slice(0, 2)).toEqual([false, false]);
  }
}, 60_000);

it('rotate-secret with an overlap: both secrets verify under both conventions until secret_rotation_ends_at, then only the new one', async () => {
  const { apiKey } = await stack.createAccount('pro');
  const p = `/hook/${randomUUID()}`;
  const created = await call('/v1/webhooks', apiKey, { method: 'POST', body: { url: receiver.url(p), events: ['violation.new'] } });
  expect(created.status, created.text).toBe(201);
  const sub = created.body.data as { id: string; secret: string; secret_rotation_ends_at: string | null };
  expect(sub.secret_rotation_ends_at).toBeNull();
  const testEvent = async () => {
    const before = receiver.at(p).length;
    expect((await call(`/v1/webhooks/${sub.id}/test`, apiKey, { method: 'POST' })).status).toBe(202);
    const [r] = await eventually(
      async () => receiver.at(p).slice(before),
      (x) => x.length === 1,
      20_000,
    );
    return r as NonNullable<typeof r>;
  };
  const rotate = (body?: unknown) =>
    call(`/v1/webhooks/${sub.id}/rotate-secret`, apiKey, { method: 'POST', ...(body === undefined ? {} : { body }) });

  // Out of range: 400 naming the field, nothing rotated.
  for (const bad of [{ overlap_seconds: -1 }, { overlap_seconds: 604_801 }, { overlap_seconds: '60' }, { overlap: 60 }]) {
    const refused = await rotate(bad);
    expect(refused.status, JSON.stringify(bad)).toBe(400);
    expect(refused.body.error.code).toBe('VALIDATION_ERROR');
  }
  expect(await verifiers(sub.secret, await testEvent())).toEqual([true, true, true, true]);

  const t0 = Date.now();
  const rotated = await rotate({ overlap_seconds: 60 });
  expect(rotated.status, rotated.text).toBe(200);
  const second = rotated.body.data.secret as string;
  const endsAt = Date.parse(rotated.body.data.secret_rotation_ends_at);
  expect(endsAt).toBeGreaterThanOrEqual(t0 + 59_000);
  expect(endsAt).toBeLessThanOrEqual(Date.now() + 61_000);
  expect((await call(`/v1/webhooks/${sub.id}`, apiKey)).body.data.secret_rotation_ends_at).toBe(rotated.body.data.secret_rotation_ends_at);
  const during = await testEvent();
  expect(during.headers['webhook-signature']?.split(' ')).toHaveLength(2);
  expect(during.headers['x-service-signature']?.split(',')).toHaveLength(2);
  // The receiver helper accepts either form, with either secret; independent verifiers take the Standard Webhooks header.
  for (const secret of [second, sub.secret]) {
    const [std, svix] = await verifiers(secret, during);
    expect([std, svix]).toEqual([true, true]);
    expect(verifyDeliveryHeaders(secret, during.body, (n) => during.headers[n])).toBe(true);
    expect(verifyDelivery(secret, during.body, during.headers['x-service-signature'])).toBe(true);
  }

  // A rotation with a 1 s overlap: once it has passed, only the newest secret signs.
  const third = await rotate({ overlap_seconds: 1 });
  const thirdSecret = third.body.data.secret as string;
  const thirdEnds = Date.parse(third.body.data.secret_rotation_ends_at);
  await eventually(
    async () => Date.now(),
    (now) => now > thirdEnds + 50,
  );
  const after = await testEvent();
  expect(after.headers['webhook-signature']?.split(' ')).toHaveLength(1);
  expect(await verifiers(thirdSecret, after)).toEqual([true, true, true, true]);
  expect(await verifiers(second, after)).toEqual([false, false, false, false]);
  expect(verifyDeliveryHeaders(second, after.body, (n) => after.headers[n])).toBe(false);
  expect((await call(`/v1/webhooks/${sub.id}`, apiKey)).body.data.secret_rotation_ends_at).toBe(third.body.data.secret_rotation_ends_at);
}, 90_000);
