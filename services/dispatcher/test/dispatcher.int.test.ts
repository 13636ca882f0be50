import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:https';
import { eventually, testUrls, uniqueName } from '@fcd/testing';
import { DeliveryStore, verify as verifySignature } from '@fcd/webhooks';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { Dispatcher } from '../src/delivery/dispatcher';
import { Sender } from '../src/delivery/sender';
import {
  attemptsOf,
  type Bus,
  caseEvent,
  deliveriesOf,
  openBus,
  Receiver,
  SECRET_KEY,
  secretBox,
  setupDb,
  silentLogger,
  sleep,
  subscribe,
  type TestDb,
  teardownDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * The dispatcher in-process against real Postgres and the machine's NATS (own
 * stream, subject prefix and consumer), delivering to a real HTTPS receiver
 * with a test certificate. Shrunk retry schedule and timeouts.
 */
const SCHEDULE = [200, 400, 600, 800, 1000];
const TOLERANCE_MS = 250;
const TIMEOUT_MS = 1500;

let db: TestDb;
let bus: Bus;
let receiver: Receiver;
let dispatcher: Dispatcher;
let cert: ReturnType<typeof testCertificate>;
const stream = uniqueName('DISP_INT').toUpperCase();

beforeAll(async () => {
  cert = testCertificate();
  db = await setupDb('dispatcher_int');
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
  const config = loadConfig({
    DATABASE_URL: db.database.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: 'dispatcher_int',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_RETRY_SCHEDULE: SCHEDULE.map((ms) => `${ms}ms`).join(','),
    // These tests measure the schedule itself; the ±jitter is shown by src/domain/retry.test.ts.
    WEBHOOK_RETRY_JITTER_PERCENT: '0',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    WEBHOOK_CONNECT_TIMEOUT_MS: '1000',
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    DISPATCHER_POLL_MS: '100',
  });
  dispatcher = new Dispatcher({ config, pool: db.pool, secretBox, logger: silentLogger, tls: { ca: cert.cert } });
  dispatcher.start();
  await eventually(
    () =>
      dispatcher.consumer.check().then(
        () => true,
        () => false,
      ),
    (ok) => ok,
  );
});

afterAll(async () => {
  await dispatcher?.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

const path = () => `/hook/${randomUUID()}`;

/**
 * A sentinel for "nothing was fanned out": publishes one event for a facility of its own, to a
 * subscription of its own, and waits until its delivery exists. The one consumer hands events to
 * the fan-out in stream order and the fan-out commits one batch at a time, in that order, so every
 * event published before it has been fanned out (committed) by then.
 */
async function fannedOutSoFar(): Promise<void> {
  const facility = randomUUID();
  const sentinel = await subscribe(db, { url: receiver.url(path()), facility_ids: [facility] });
  await bus.publish(violationEvent(facility));
  await eventually(
    () => deliveriesOf(db, sentinel.id),
    (d) => d.length === 1,
  );
}

describe('matching and sending', () => {
  it('delivers a violation.new for a watched facility: the envelope, the documented headers, a signature that verifies independently', async () => {
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const event = violationEvent(facility);
    await bus.publish(event);
    const [got] = await eventually(
      async () => receiver.at(p),
      (r) => r.length === 1,
    );
    if (!got) throw new Error('nothing received');
    expect(JSON.parse(got.body)).toEqual(event);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-agent']).toBe('FacilityCompliance-Webhooks/1.0');
    expect(got.headers['x-service-event-id']).toBe(event.id);
    expect(got.headers['x-service-event-type']).toBe('violation.new');
    expect(got.headers['x-service-delivery-id']).toMatch(/^dlv_[0-9a-f-]{36}$/);
    expect(got.headers['x-service-delivery-attempt']).toBe('1');
    const signature = got.headers['x-service-signature'] ?? '';
    expect(signature).toMatch(/^sha256=[0-9a-f]{64}$/);
    // node:crypto, independently of our sign()
    const expected = Buffer.from(`sha256=${createHmac('sha256', sub.secret).update(got.body).digest('hex')}`);
    expect(timingSafeEqual(Buffer.from(signature), expected)).toBe(true);
    // @octokit/webhooks-methods (GitHub's sha256= scheme)
    expect(await octokitVerify(sub.secret, got.body, signature)).toBe(true);
    expect(await octokitVerify(`${sub.secret}x`, got.body, signature)).toBe(false);
    const [delivery] = await eventually(
      () => deliveriesOf(db, sub.id),
      (d) => d[0]?.status === 'succeeded',
    );
    expect(delivery).toMatchObject({ event_id: event.id, status: 'succeeded', attempt_count: 1 });
  });

  it('sends nothing for a non-matching type, an unwatched facility or an inactive subscription', async () => {
    const watched = randomUUID();
    const [pType, pFacility, pInactive, pSentinel] = [path(), path(), path(), path()];
    const byType = await subscribe(db, { url: receiver.url(pType), events: ['case.new'], facility_ids: [watched] });
    const byFacility = await subscribe(db, { url: receiver.url(pFacility), facility_ids: [randomUUID()] });
    const inactive = await subscribe(db, { url: receiver.url(pInactive), facility_ids: [watched] });
    await db.subscriptions.update('acct_test', inactive.id, { is_active: false }, Date.now());
    await subscribe(db, { url: receiver.url(pSentinel), facility_ids: [watched] });
    const first = violationEvent(watched);
    const last = violationEvent(watched);
    await bus.publish(first);
    await bus.publish(last);
    // The sentinel got both events, in whatever order: everything before them was processed too.
    await eventually(
      async () => receiver.at(pSentinel),
      (r) => r.length === 2,
    );
    // Both events' fan-outs (one statement each, for every subscription) committed before the sentinel's
    // POSTs: no delivery row for the others now means no POST to them ever.
    expect(await deliveriesOf(db, byType.id)).toEqual([]);
    expect(await deliveriesOf(db, byFacility.id)).toEqual([]);
    expect(receiver.at(pType)).toHaveLength(0);
    expect(receiver.at(pFacility)).toHaveLength(0);
    expect(receiver.at(pInactive)).toHaveLength(0);
    expect(await deliveriesOf(db, inactive.id)).toEqual([]);
  });

  it('a case event matches a subscription through any of its facilities', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const p = path();
    await subscribe(db, { url: receiver.url(p), events: ['case.new'], facility_ids: [b] });
    const event = caseEvent([a, b]);
    await bus.publish(event);
    const got = await eventually(
      async () => receiver.at(p),
      (r) => r.length === 1,
    );
    expect(JSON.parse(got[0]?.body ?? '{}').id).toBe(event.id);
  });

  it('an event redelivered (same id published twice, and handled again) creates one delivery and one POST', async () => {
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const event = violationEvent(facility);
    await bus.publish(event, { msgId: false });
    await bus.publish(event, { msgId: false });
    expect(await dispatcher.handleEvent(JSON.stringify(event))).toEqual({ ack: true });
    await eventually(
      async () => receiver.at(p),
      (r) => r.length === 1,
    );
    // Published after both copies, the sentinel is fanned out after them: no second delivery can come later.
    await fannedOutSoFar();
    const deliveries = await eventually(
      () => deliveriesOf(db, sub.id),
      (d) => d.every((x) => x.status !== 'pending'),
    );
    expect(deliveries).toEqual([expect.objectContaining({ event_id: event.id, status: 'succeeded', attempt_count: 1 })]);
    expect(receiver.at(p)).toHaveLength(1);
  });

  it('terminates a message that is not an envelope', async () => {
    expect(await dispatcher.handleEvent('not json')).toEqual({ term: 'not JSON' });
    expect(await dispatcher.handleEvent('{"type":"violation.new","data":{}}')).toEqual({ term: 'missing or malformed id' });
  });
});

describe('retries and deactivation', () => {
  it('a receiver answering 500: attempts at the schedule, 6 in all, then failed and the subscription deactivated', async () => {
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, () => 500);
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await bus.publish(violationEvent(facility));
    await eventually(
      () => db.subscriptions.get('acct_test', sub.id),
      (s) => s?.is_active === false,
      15_000,
    );
    const got = receiver.at(p);
    expect(got.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2', '3', '4', '5', '6']);
    const gaps = got.slice(1).map((r, i) => r.at - (got[i] as { at: number }).at);
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual((SCHEDULE[i] as number) - 20);
      expect(gap).toBeLessThanOrEqual((SCHEDULE[i] as number) + TOLERANCE_MS);
    });
    const s = await db.subscriptions.get('acct_test', sub.id);
    expect(s).toMatchObject({ is_active: false, deactivation_reason: 'consecutive_failures' });
    expect(s?.deactivated_at).not.toBeNull();
    const [delivery] = await deliveriesOf(db, sub.id);
    expect(delivery).toMatchObject({ status: 'failed', attempt_count: 6 });
    const attempts = await attemptsOf(db, sub.id);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.response_status, a.error])).toEqual(
      [1, 2, 3, 4, 5, 6].map((n) => [n, 'failure', 500, 'HTTP 500']),
    );
    // Deactivated: a new event creates nothing.
    await bus.publish(violationEvent(facility));
    // Published after that event, the sentinel is fanned out after it.
    await fannedOutSoFar();
    expect(await deliveriesOf(db, sub.id)).toHaveLength(1);
  });

  it('a 2xx at retry 3 ends the retries and keeps the subscription active', async () => {
    const facility = randomUUID();
    const p = path();
    receiver.behaviours.set(p, (_r, n) => (n <= 3 ? 503 : 200));
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    await bus.publish(violationEvent(facility));
    const [delivery] = await eventually(
      () => deliveriesOf(db, sub.id),
      (d) => d[0]?.status === 'succeeded',
    );
    expect(delivery?.attempt_count).toBe(4);
    await sleep(SCHEDULE[3] as number);
    expect(receiver.at(p)).toHaveLength(4);
    expect((await db.subscriptions.get('acct_test', sub.id))?.is_active).toBe(true);
  });

  it('pending retries stop when the subscription is deactivated or deleted; reactivation delivers from the next event', async () => {
    const facility = randomUUID();
    const [pOff, pDel] = [path(), path()];
    receiver.behaviours.set(pOff, () => 500);
    receiver.behaviours.set(pDel, () => 500);
    const off = await subscribe(db, { url: receiver.url(pOff), facility_ids: [facility] });
    const del = await subscribe(db, { url: receiver.url(pDel), facility_ids: [facility] });
    await bus.publish(violationEvent(facility));
    await eventually(
      async () => [receiver.at(pOff).length, receiver.at(pDel).length],
      ([a, b]) => a === 1 && b === 1,
    );
    await db.subscriptions.update('acct_test', off.id, { is_active: false }, Date.now());
    await db.subscriptions.delete('acct_test', del.id);
    await sleep(600 + 300);
    expect(receiver.at(pOff)).toHaveLength(1);
    expect(receiver.at(pDel)).toHaveLength(1);
    expect((await deliveriesOf(db, off.id)).map((d) => d.status)).toEqual(['cancelled']);

    receiver.behaviours.set(pOff, () => 200);
    await db.subscriptions.update('acct_test', off.id, { is_active: true }, Date.now());
    const next = violationEvent(facility);
    await bus.publish(next);
    const got = await eventually(
      async () => receiver.at(pOff),
      (r) => r.length === 2,
    );
    expect(JSON.parse(got[1]?.body ?? '{}').id).toBe(next.id);
  });
});

describe('timeouts, destinations, secrets, manual deliveries', () => {
  it('a hanging receiver fails at the timeout while others keep being delivered', async () => {
    const facility = randomUUID();
    const [pHang, pOk] = [path(), path()];
    receiver.behaviours.set(pHang, () => 'hang');
    const hang = await subscribe(db, { url: receiver.url(pHang), facility_ids: [facility] });
    const ok = await subscribe(db, { url: receiver.url(pOk), facility_ids: [facility] });
    const started = Date.now();
    await bus.publish(violationEvent(facility));
    await bus.publish(violationEvent(facility));
    await eventually(
      async () => receiver.at(pOk),
      (r) => r.length === 2,
    );
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    const attempts = await eventually(
      () => attemptsOf(db, hang.id),
      (a) => a.length >= 2,
    );
    for (const a of attempts.slice(0, 2)) {
      expect(a).toMatchObject({ outcome: 'failure', response_status: null, error: 'timed out waiting for the response' });
      expect(a.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
      expect(a.duration_ms).toBeLessThan(TIMEOUT_MS + 500);
    }
    expect((await deliveriesOf(db, ok.id)).map((d) => d.status)).toEqual(['succeeded', 'succeeded']);
    await db.subscriptions.delete('acct_test', hang.id);
  });

  it('never contacts a host that resolves to 127.0.0.1 when private URLs are disallowed (checked at connect time)', async () => {
    let contacted = 0;
    const server = createServer({ cert: cert.cert, key: cert.key }, (_req, res) => {
      contacted++;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const sender = new Sender({
      connectTimeoutMs: 1000,
      timeoutMs: 1000,
      allowPrivate: false,
      resolver: async () => [{ address: '127.0.0.1', family: 4 }],
      tls: { ca: cert.cert },
    });
    const result = await sender.send(`https://rebound.example.com:${port}/hook`, '{}', { 'content-type': 'application/json' });
    expect(result).toMatchObject({ success: false, status: null, kind: 'blocked' });
    expect(result.error).toContain('loopback');
    const literal = await sender.send(`https://127.0.0.1:${port}/hook`, '{}', {});
    expect(literal).toMatchObject({ success: false, kind: 'invalid_url' });
    expect(contacted).toBe(0);
    await sender.close();
    await new Promise((r) => server.close(r));
  });

  it('after a secret rotation the next delivery verifies with the new secret only', async () => {
    const facility = randomUUID();
    const p = path();
    const sub = await subscribe(db, { url: receiver.url(p), facility_ids: [facility] });
    const fresh = `whsec_${randomUUID().replaceAll('-', '')}abcdefgh`;
    await db.subscriptions.rotateSecret('acct_test', sub.id, fresh, Date.now());
    await bus.publish(violationEvent(facility));
    const [got] = await eventually(
      async () => receiver.at(p),
      (r) => r.length === 1,
    );
    const signature = got?.headers['x-service-signature'];
    expect(verifySignature(fresh, got?.body ?? '', signature)).toBe(true);
    expect(verifySignature(sub.secret, got?.body ?? '', signature)).toBe(false);
  });

  it('a test event and a manual retry are each attempted once, signed', async () => {
    const p = path();
    receiver.behaviours.set(p, () => 500);
    const sub = await subscribe(db, { url: receiver.url(p) });
    const store = new DeliveryStore(db.pool);
    const body = JSON.stringify({
      id: `evt_${randomUUID()}`,
      type: 'webhook.test',
      created_at: new Date().toISOString(),
      data: { webhook_id: sub.id },
    });
    const created = await store.createManual({
      id: `dlv_${randomUUID()}`,
      subscriptionId: sub.id,
      eventId: JSON.parse(body).id,
      eventType: 'webhook.test',
      body,
      now: Date.now(),
    });
    if (!created) throw new Error('the test delivery was not created');
    dispatcher.worker.nudge();
    await eventually(
      () => store.get(sub.id, created.id),
      (d) => d?.status === 'failed',
    );
    await sleep(400);
    expect(receiver.at(p)).toHaveLength(1);
    expect(receiver.at(p)[0]?.headers['x-service-event-type']).toBe('webhook.test');
    expect(verifySignature(sub.secret, receiver.at(p)[0]?.body ?? '', receiver.at(p)[0]?.headers['x-service-signature'])).toBe(true);

    receiver.behaviours.set(p, () => 200);
    await store.retry(sub.id, created.id, Date.now());
    dispatcher.worker.nudge();
    const done = await eventually(
      () => store.get(sub.id, created.id),
      (d) => d?.status === 'succeeded',
    );
    expect(done?.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'failure'],
      [2, 'success'],
    ]);
    expect(receiver.at(p)[1]?.headers['x-service-delivery-attempt']).toBe('2');
    expect((await db.subscriptions.get('acct_test', sub.id))?.is_active).toBe(true);
  });
});
