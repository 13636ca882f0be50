import { randomUUID } from 'node:crypto';
import {
  type ApiStack,
  eventually,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_USAGE_GRPC_SECRET,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { verifyDeliveryHeaders } from '@fcd/webhook-verify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type Bus,
  caseEvent,
  openBus,
  Receiver,
  SECRET_KEY,
  setupDb,
  type TestDb,
  teardownDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * The event log end to end (ADR 0002, docs/webhooks.md "Recovery"): events published to JetStream, consumed by
 * the dispatcher process (which logs them with their fan-out), read back and recovered through
 * the gateway (usage service for keys, tiers and counting; webhook service for the routes), and
 * re-delivered by the dispatcher to a real HTTPS receiver.
 */
let db: TestDb;
let receiver: Receiver;
let bus: Bus;
let cert: ReturnType<typeof testCertificate>;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
let gateway: string;
const stream = uniqueName('EVLOG_E2E').toUpperCase();

beforeAll(async () => {
  cert = testCertificate();
  db = await setupDb('event_log_e2e');
  receiver = new Receiver(cert);
  await receiver.start();
  // The receiver is on loopback: this stack allows private destinations in the API and the dispatcher.
  stack = await startApiStack({
    label: 'event_log_e2e',
    database: db.database,
    webhookSecretKey: SECRET_KEY,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', EVENT_RETENTION_DAYS: '30' },
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
    DISPATCHER_CONSUMER: 'evlog',
    DISPATCHER_POLL_MS: '100',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    // A failed first attempt waits a minute: long enough for the test to deactivate meanwhile.
    WEBHOOK_RETRY_SCHEDULE: '1m,1m,1m,1m,1m',
    EVENT_RETENTION_DAYS: '30',
    NODE_EXTRA_CA_CERTS: cert.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
  bus = await openBus(stream);
  // The dispatcher creates the stream when missing; wait for it.
  await eventually(
    () =>
      bus.jsm.streams.info(stream).then(
        () => true,
        () => false,
      ),
    (ok) => ok,
  );
}, 180_000);

afterAll(async () => {
  await dispatcher?.stop();
  await stack?.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

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

/** A new facility, ingested into the facility service (subscriptions name existing facilities), and its id. */
async function newFacility(registryId: string): Promise<string> {
  const r = await stack.ingest({
    facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }],
  });
  expect(r.status, r.text).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facility.facilities WHERE registry_id = $1', [registryId]);
  return rows[0]?.id as string;
}

/** Waits until the dispatcher has logged (and so fanned out) every one of these events. */
async function logged(ids: string[]): Promise<void> {
  await eventually(
    async () => (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.events WHERE id = ANY($1)', [ids])).rows[0]?.n,
    (n) => n === ids.length,
    30_000,
  );
}

/** How many times each event id reached a receiver path. */
const receivedCounts = (path: string) => {
  const counts: Record<string, number> = {};
  for (const r of receiver.at(path)) counts[r.headers['webhook-id'] as string] = (counts[r.headers['webhook-id'] as string] ?? 0) + 1;
  return counts;
};

it('Recovery of a subscription that was inactive for a window re-delivers exactly the matching events of that window, once each. A dry run sends nothing. A window past retention → 400.', async () => {
  const { apiKey } = await stack.createAccount('pro');
  const stamp = `${Date.now()}`.slice(-9);
  const [f1, f2] = [await newFacility(`31${stamp}`), await newFacility(`32${stamp}`)];
  const p = `/hook/${randomUUID()}`;
  const created = await call('/v1/webhooks', apiKey, {
    method: 'POST',
    body: { url: receiver.url(p), events: ['violation.new', 'case.new'], facility_ids: [f1] },
  });
  expect(created.status, created.text).toBe(201);
  const sub = created.body.data as { id: string; secret: string };
  const recover = (body: unknown, key = apiKey, id = sub.id) => call(`/v1/webhooks/${id}/recover`, key, { method: 'POST', body });
  const at = () => new Date().toISOString();

  // Active: e1 is delivered; e2's first attempt fails (its retry is a minute away).
  const t0 = at();
  const e1 = violationEvent(f1);
  const e2 = violationEvent(f1);
  receiver.behaviours.set(p, (r) => (r.headers['webhook-id'] === e2.id && receivedCounts(p)[e2.id] === 1 ? 500 : 204));
  await bus.publish(e1);
  await bus.publish(e2);
  await eventually(
    async () => receivedCounts(p),
    (c) => c[e1.id] === 1 && c[e2.id] === 1,
    30_000,
  );
  // Both attempts recorded (e1 succeeded, e2 waiting for its retry) before the deactivation, which
  // cancels what is pending: an attempt received but not yet recorded would be cancelled with it.
  const statusOf = async (eventId: string) =>
    (
      await db.pool.query<{ status: string; attempt_count: number; leased_until: Date | null }>(
        'SELECT status, attempt_count, leased_until FROM webhook.deliveries WHERE subscription_id = $1 AND event_id = $2',
        [sub.id, eventId],
      )
    ).rows[0];
  await eventually(
    async () => [await statusOf(e1.id), await statusOf(e2.id)],
    ([d1, d2]) => d1?.status === 'succeeded' && d2?.status === 'pending' && d2.leased_until === null,
    30_000,
  );

  // Inactive for a window: e2's pending retry is cancelled, and what is published now is not delivered.
  expect((await call(`/v1/webhooks/${sub.id}`, apiKey, { method: 'PATCH', body: { is_active: false } })).status).toBe(200);
  // Refused like retry while inactive.
  const refused = await recover({ since: t0 });
  expect(refused.status, refused.text).toBe(400);
  expect(refused.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { fields: [{ field: 'is_active' }] } });
  const windowStart = at();
  const a = violationEvent(f1);
  const b = caseEvent([f2, f1]);
  const otherFacility = violationEvent(f2);
  const otherType = caseEvent([f1], 'case.updated');
  const statusChange = {
    id: `evt_${randomUUID()}`,
    type: 'facility.status_changed',
    created_at: at(),
    data: { facility: { id: f1, compliance_status: 'violation' }, previous_status: 'no_violation' },
  };
  for (const e of [a, b, otherFacility, otherType, statusChange]) await bus.publish(e);
  await logged([a.id, b.id, otherFacility.id, otherType.id, statusChange.id]);
  const windowEnd = at();

  // Active again: e3 is delivered as usual.
  expect((await call(`/v1/webhooks/${sub.id}`, apiKey, { method: 'PATCH', body: { is_active: true } })).status).toBe(200);
  const e3 = violationEvent(f1);
  await bus.publish(e3);
  await eventually(
    async () => receivedCounts(p),
    (c) => c[e3.id] === 1,
    30_000,
  );
  const deliveryRows = async () =>
    (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook.deliveries WHERE subscription_id = $1', [sub.id])).rows[0]
      ?.n;
  const rowsBefore = await deliveryRows();
  expect(rowsBefore).toBe(3);

  // A dry run counts the window's matching events (a, b) and writes nothing.
  const dry = await recover({ since: windowStart, until: windowEnd, dry_run: true });
  expect(dry.status, dry.text).toBe(202);
  expect(dry.body).toEqual({ data: { events: 2, since: windowStart, until: windowEnd, next_since: null } });
  expect(await deliveryRows()).toBe(rowsBefore);

  // The recovery: a and b, once each, signed like any delivery.
  const done = await recover({ since: windowStart, until: windowEnd });
  expect(done.status, done.text).toBe(202);
  expect(done.body).toEqual({ data: { events: 2, since: windowStart, until: windowEnd, next_since: null } });
  const settled = async () =>
    (await call(`/v1/webhooks/${sub.id}/deliveries?limit=100`, apiKey)).body.data as Array<{ event_id: string; status: string }>;
  await eventually(settled, (d) => d.length === 5 && d.every((x) => x.status !== 'pending'), 30_000);
  expect(receivedCounts(p)).toEqual({ [e1.id]: 1, [e2.id]: 1, [e3.id]: 1, [a.id]: 1, [b.id]: 1 });
  for (const e of [a, b]) {
    const got = receiver.at(p).find((r) => r.headers['webhook-id'] === e.id);
    expect(got?.body).toBe(JSON.stringify(e));
    expect(verifyDeliveryHeaders(sub.secret, got?.body ?? '', (n) => got?.headers[n])).toBe(true);
  }
  expect((await settled()).filter((d) => d.event_id === a.id || d.event_id === b.id).map((d) => d.status)).toEqual([
    'succeeded',
    'succeeded',
  ]);

  // The same window again: everything in it was received, nothing to send.
  expect((await recover({ since: windowStart, until: windowEnd })).body.data.events).toBe(0);
  // From the start: only e2 (its delivery was cancelled, never received) is sent again; until defaults to now.
  const wide = await recover({ since: t0 });
  expect(wide.status, wide.text).toBe(202);
  expect(wide.body.data.events).toBe(1);
  expect(wide.body.data.since).toBe(t0);
  expect(Date.parse(wide.body.data.until)).toBeGreaterThanOrEqual(Date.parse(windowEnd));
  await eventually(
    async () => receivedCounts(p),
    (c) => c[e2.id] === 2,
    30_000,
  );
  await eventually(settled, (d) => d.length === 6 && d.every((x) => x.status !== 'pending'), 30_000);
  expect(receivedCounts(p)).toEqual({ [e1.id]: 1, [e2.id]: 2, [e3.id]: 1, [a.id]: 1, [b.id]: 1 });

  // A window past the retention (30 days), or otherwise malformed: 400, nothing enqueued.
  const day = 86_400_000;
  const past = await recover({ since: new Date(Date.now() - 31 * day).toISOString() });
  expect(past.status, past.text).toBe(400);
  expect(past.body.error.code).toBe('VALIDATION_ERROR');
  expect(past.body.error.details.fields).toEqual([
    { field: 'since', message: expect.stringMatching(/^must be within the event retention of 30 days/) },
  ]);
  for (const [body, field] of [
    [{}, 'since'],
    [{ since: 'yesterday' }, 'since'],
    [{ since: t0, until: t0 }, 'until'],
    [{ since: t0, dry_run: 'yes' }, 'dry_run'],
    [{ since: t0, extra: 1 }, 'extra'],
  ] as const) {
    const bad = await recover(body);
    expect(bad.status, JSON.stringify(body)).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    expect(bad.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual([field]);
  }
  expect(await deliveryRows()).toBe(6);

  // Pro only, and owner only.
  const free = await stack.createAccount('free');
  expect((await recover({ since: t0 }, free.apiKey)).status).toBe(403);
  const other = await stack.createAccount('pro');
  expect((await recover({ since: t0 }, other.apiKey)).status).toBe(404);
  expect((await recover({ since: t0 }, apiKey, `wh_${randomUUID()}`)).status).toBe(404);
}, 180_000);

/** Every event after `cursor` through the API, page after page, until the log has no more. */
async function drain(key: string, query: string, cursor: string | null) {
  const events: Array<{ id: string }> = [];
  let next = cursor;
  for (;;) {
    const r = await call(`/v1/events?limit=100${query}${next ? `&cursor=${next}` : ''}`, key);
    expect(r.status, r.text).toBe(200);
    events.push(...r.body.data);
    next = r.body.pagination.next_cursor;
    if (!r.body.pagination.has_more) return { events, cursor: next };
  }
}

it('Polling /v1/events while 1,000 events are being published, with cursor after cursor, yields each exactly once and in order.', async () => {
  const { apiKey } = await stack.createAccount('pro');
  // Whatever the log holds already: the poller starts from its end.
  const start = (await drain(apiKey, '', null)).cursor;

  const facility = randomUUID();
  const published = Array.from({ length: 1000 }, (_, i) =>
    i % 4 === 0
      ? caseEvent([randomUUID(), facility])
      : i % 4 === 1
        ? caseEvent([facility], 'case.updated')
        : violationEvent(i % 2 ? facility : randomUUID()),
  );
  let publishing = true;
  const publisher = (async () => {
    for (const e of published) await bus.publish(e);
    publishing = false;
  })();

  const seen: Array<{ id: string }> = [];
  let cursor = start;
  let pollsWhilePublishing = 0;
  const deadline = Date.now() + 90_000;
  while (seen.length < published.length && Date.now() < deadline) {
    if (publishing) pollsWhilePublishing++;
    const r = await call(`/v1/events?limit=100${cursor ? `&cursor=${cursor}` : ''}`, apiKey);
    expect(r.status, r.text).toBe(200);
    seen.push(...r.body.data);
    // An empty page returns the cursor it was given.
    if (r.body.data.length === 0) expect(r.body.pagination.next_cursor).toBe(cursor);
    cursor = r.body.pagination.next_cursor;
    if (r.body.data.length === 0) await new Promise((res) => setTimeout(res, 20));
  }
  await publisher;
  expect(pollsWhilePublishing).toBeGreaterThan(0);
  // Each exactly once, in the order published, each the envelope as published.
  expect(seen.map((e) => e.id)).toEqual(published.map((e) => e.id));
  expect(seen.map((e) => JSON.stringify(e))).toEqual(published.map((e) => JSON.stringify(e)));
  // Nothing more after the last cursor.
  const after = await call(`/v1/events?cursor=${cursor}`, apiKey);
  expect(after.body).toEqual({ data: [], pagination: { limit: 25, next_cursor: cursor, has_more: false } });

  // Filters: the same order, only what matches.
  const since = published[500]?.created_at as string;
  expect((await drain(apiKey, '&type=case.updated', start)).events.map((e) => e.id)).toEqual(
    published.filter((e) => e.type === 'case.updated').map((e) => e.id),
  );
  const concerns = (e: (typeof published)[number]) =>
    'violation' in e.data ? e.data.violation.facility_id === facility : e.data.case.facility_ids.includes(facility);
  expect((await drain(apiKey, `&facility_id=${facility}`, start)).events.map((e) => e.id)).toEqual(
    published.filter(concerns).map((e) => e.id),
  );
  expect((await drain(apiKey, `&type=violation.new&since=${encodeURIComponent(since)}`, start)).events.map((e) => e.id)).toEqual(
    published.filter((e) => e.type === 'violation.new' && e.created_at >= since).map((e) => e.id),
  );

  // One event; unknown and malformed ids are 404.
  const one = published[123] as (typeof published)[number];
  const got = await call(`/v1/events/${one.id}`, apiKey);
  expect(got.status).toBe(200);
  expect(got.text).toBe(`{"data":${JSON.stringify(one)}}`);
  expect((await call(`/v1/events/evt_${randomUUID()}`, apiKey)).body.error.code).toBe('NOT_FOUND');
  expect((await call('/v1/events/nope', apiKey)).status).toBe(404);

  // Bad parameters: the error envelope naming each.
  const foreign = Buffer.from(JSON.stringify(['x', '1'])).toString('base64url');
  for (const [query, field] of [
    ['type=violation.old', 'type'],
    ['facility_id=not-a-uuid', 'facility_id'],
    ['since=yesterday', 'since'],
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=1e2', 'limit'],
    ['cursor=not*base64', 'cursor'],
    [`cursor=${foreign}`, 'cursor'],
    ['tenant=1', 'tenant'],
  ] as const) {
    const r = await call(`/v1/events?${query}`, apiKey);
    expect(r.status, query).toBe(400);
    expect(r.body.error.code, query).toBe('VALIDATION_ERROR');
    expect(
      r.body.error.details.fields.map((f: { field: string }) => f.field),
      query,
    ).toEqual([field]);
  }
  expect((await call('/v1/events', apiKey, { method: 'POST', body: {} })).status).toBe(405);

  // Every tier, counted like any request: a Free account's three calls and its usage call make four.
  const free = await stack.createAccount('free');
  expect((await call('/v1/events?limit=1', free.apiKey)).status).toBe(200);
  expect((await call(`/v1/events/${one.id}`, free.apiKey)).status).toBe(200);
  expect((await call('/v1/events?limit=0', free.apiKey)).status).toBe(400);
  const usage = await call('/v1/account/usage', free.apiKey);
  expect(usage.body.data.today.request_count).toBe(4);
}, 180_000);
