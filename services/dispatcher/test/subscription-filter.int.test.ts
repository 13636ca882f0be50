import { randomBytes, randomUUID } from 'node:crypto';
import { InternalAuth, PRO_TIER_RANK } from '@fcd/service-kit';
import { eventually, freePort, type ServiceProcess, startService, TEST_INTERNAL_AUTH_SECRET, testUrls, uniqueName } from '@fcd/testing';
import type { SubscriptionFilter } from '@fcd/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { Dispatcher } from '../src/delivery/dispatcher';
import {
  type Bus,
  caseEvent,
  deliveriesOf,
  openBus,
  Receiver,
  SECRET_KEY,
  secretBox,
  setupDb,
  silentLogger,
  type TestDb,
  teardownDb,
  testCertificate,
  violationEvent,
} from './helpers';

/**
 * Subscription filters at fan-out (docs/webhooks.md "Filters"): the dispatcher in-process against
 * real Postgres and NATS, an HTTPS receiver, and the built webhook service for the API. A
 * subscription filtered to Ohio gets the events whose facility snapshots are in Ohio while an
 * unfiltered one gets every event; POST /v1/webhooks/{id}/recover over the same window and
 * GET /v1/events?subscription_id= select exactly the same events.
 */
let db: TestDb;
let bus: Bus;
let receiver: Receiver;
let dispatcher: Dispatcher;
let webhook: ServiceProcess | undefined;
let api: string;
const stream = uniqueName('DISP_FILTER').toUpperCase();
const EVENTS = ['violation.new', 'case.new', 'facility.status_changed'];
const ACCOUNT = 'acct_test';
const internalAuth = new InternalAuth(TEST_INTERNAL_AUTH_SECRET);

beforeAll(async () => {
  const cert = testCertificate();
  db = await setupDb('dispatcher_filter');
  receiver = new Receiver(cert);
  await receiver.start();
  bus = await openBus(stream);
  const config = loadConfig({
    DATABASE_URL: db.database.url,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    DISPATCHER_CONSUMER: 'dispatcher_filter',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    DISPATCHER_POLL_MS: '100',
  });
  dispatcher = new Dispatcher({ config, pool: db.pool, secretBox, logger: silentLogger, tls: { ca: cert.cert } });
  dispatcher.start();
  const port = await freePort();
  // The API over the same schema; these subscriptions watch every facility, so the facility service is never asked.
  webhook = await startService('webhook', {
    DATABASE_URL: db.database.url,
    ...db.database.env,
    PORT: String(port),
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    INTERNAL_AUTH_SECRET: TEST_INTERNAL_AUTH_SECRET,
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    FACILITY_URL: 'http://127.0.0.1:9',
  });
  api = `http://127.0.0.1:${port}`;
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
  await webhook?.stop();
  await dispatcher?.stop();
  await receiver?.close();
  await bus?.close();
  await teardownDb(db);
});

/** A call to the webhook service as the gateway makes it: the account in the signed header. */
async function call(method: 'GET' | 'POST', path: string, body?: object): Promise<{ status: number; body: any }> {
  const claims = { account_id: ACCOUNT, tier: 'pro', tier_rank: PRO_TIER_RANK, request_id: `req_${randomUUID()}` };
  const res = await fetch(`${api}${path}`, {
    method,
    headers: {
      'x-fcd-account': internalAuth.sign(claims, { audience: 'webhook', method, path }),
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: await res.json() };
}

/** Every event id GET /v1/events lists for the query, following next_cursor to the end. */
async function listed(query: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (;;) {
    const res = await call('GET', `/v1/events?${query}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(...res.body.data.map((e: { id: string }) => e.id));
    if (!res.body.pagination.has_more) return ids;
    cursor = res.body.pagination.next_cursor;
  }
}

async function subscribe(url: string, filter: SubscriptionFilter | null) {
  return db.subscriptions.create(
    {
      id: `wh_${randomUUID()}`,
      account_id: ACCOUNT,
      url,
      events: EVENTS,
      facility_ids: null,
      filter,
      secret: `whsec_${randomBytes(32).toString('base64')}`,
      now: Date.now(),
    },
    10_000,
  );
}

/**
 * A facility snapshot as the facility service writes it into its events (`data.facility`,
 * `data.facilities[]`): the public facility, every field of GET /v1/facilities/{facility_id}.
 */
const snapshot = (state: string, epa_region: string) => ({
  id: randomUUID(),
  registry_id: '110000350174',
  name: `Plant in ${state}`,
  street: '1 Works Rd',
  city: 'Springfield',
  state,
  zip: '45501',
  county: 'Clark',
  latitude: 39.92,
  longitude: -83.81,
  naics_codes: ['331110'],
  programs: ['CAA'],
  compliance_status: 'violation',
  last_inspection_date: '2026-10-02',
  epa_region,
  sic_codes: ['3312'],
  major: true,
  program_status: { caa: 'Violation Identified', cwa: null, rcra: null },
  compliance: { quarters_with_noncompliance: 2, programs_with_snc: 0, snc: false },
  inspections: { count: 3, last_date: '2026-10-02' },
  enforcement: { informal_actions: 1, formal_actions: 0, last_formal_action_date: null },
  penalties: { count: 0, total_usd: null, last_amount_usd: null, last_date: null },
  data_as_of: '2026-11-20T08:00:00.000Z',
  updated_at: '2026-11-20T08:00:00.000Z',
});

function statusChanged(facility: ReturnType<typeof snapshot>) {
  return {
    id: `evt_${randomUUID()}`,
    type: 'facility.status_changed',
    created_at: new Date().toISOString(),
    data: { facility, previous_status: 'no_violation' },
  };
}

function withFacilities<E extends { data: object }>(
  event: E,
  facilities: Array<ReturnType<typeof snapshot>>,
  key: 'facility' | 'facilities',
) {
  return { ...event, data: { ...event.data, [key]: key === 'facility' ? facilities[0] : facilities } };
}

describe('a subscription filtered to states ["OH"]', () => {
  it('receives only the events about Ohio facilities while the others flow, and recover and /v1/events agree', async () => {
    const since = Date.now() - 1000;
    const [oh, tx, ca] = [snapshot('OH', '05'), snapshot('TX', '06'), snapshot('CA', '09')];
    const ohioUrl = `/ohio-${randomUUID()}`;
    const allUrl = `/all-${randomUUID()}`;
    const ohio = await subscribe(receiver.url(ohioUrl), { states: ['OH'] });
    const unfiltered = await subscribe(receiver.url(allUrl), null);
    // Filtered like `ohio` but inactive while the events flow: recovery has to find them itself.
    const lateUrl = `/late-${randomUUID()}`;
    const late = await subscribe(receiver.url(lateUrl), { states: ['OH'] });
    await db.subscriptions.update(ACCOUNT, late.id, { is_active: false }, Date.now());

    const aboutOhio = [
      statusChanged(oh),
      withFacilities(violationEvent(oh.id), [oh], 'facility'),
      withFacilities(caseEvent([tx.id, oh.id]), [tx, oh], 'facilities'),
    ];
    const elsewhere = [
      statusChanged(tx),
      statusChanged(ca),
      withFacilities(violationEvent(tx.id), [tx], 'facility'),
      withFacilities(caseEvent([ca.id, tx.id]), [ca, tx], 'facilities'),
      // A violation event without a facility snapshot (as written before events carried them) says
      // nothing about a state.
      violationEvent(oh.id),
    ];
    for (const event of [...elsewhere.slice(0, 2), ...aboutOhio, ...elsewhere.slice(2)]) await bus.publish(event);

    const all = [...aboutOhio, ...elsewhere].map((e) => e.id).sort();
    const received = await eventually(
      async () => receiver.at(allUrl),
      (r) => r.length === all.length,
    );
    expect(received.map((r) => JSON.parse(r.body).id).sort()).toEqual(all);
    // Every event was fanned out (one statement per batch, for every subscription) before the
    // unfiltered subscription got it: the Ohio subscription's rows are complete now.
    const ohioIds = aboutOhio.map((e) => e.id).sort();
    expect((await deliveriesOf(db, ohio.id)).map((d) => d.event_id).sort()).toEqual(ohioIds);
    expect(await deliveriesOf(db, late.id)).toEqual([]);
    const got = await eventually(
      async () => receiver.at(ohioUrl),
      (r) => r.length === ohioIds.length,
    );
    expect(got.map((r) => JSON.parse(r.body).id).sort()).toEqual(ohioIds);

    // Recovery through the API, over the window, for the subscription that was inactive: exactly the Ohio events.
    await db.subscriptions.update(ACCOUNT, late.id, { is_active: true }, Date.now());
    const window = { since: new Date(since).toISOString(), until: new Date(Date.now() + 1).toISOString() };
    const recovered = await call('POST', `/v1/webhooks/${late.id}/recover`, window);
    expect(recovered.status, JSON.stringify(recovered.body)).toBe(202);
    expect(recovered.body.data).toMatchObject({ events: ohioIds.length, next_since: null });
    expect((await deliveriesOf(db, late.id)).map((d) => d.event_id).sort()).toEqual(ohioIds);
    const resent = await eventually(
      async () => receiver.at(lateUrl),
      (r) => r.length === ohioIds.length,
    );
    expect(resent.map((r) => JSON.parse(r.body).id).sort()).toEqual(ohioIds);

    // The events API agrees: the Ohio subscriptions' lists are the Ohio events, the unfiltered one's every event.
    const from = `since=${encodeURIComponent(window.since)}`;
    expect((await listed(`subscription_id=${ohio.id}&${from}`)).sort()).toEqual(ohioIds);
    expect((await listed(`subscription_id=${late.id}&${from}`)).sort()).toEqual(ohioIds);
    expect((await listed(`subscription_id=${unfiltered.id}&${from}`)).sort()).toEqual(all);
  });
});
