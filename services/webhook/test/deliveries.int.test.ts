import { randomUUID } from 'node:crypto';
import { DeliveryLog, DeliveryStore, EventLog, SubscriptionStore, verify } from '@fcd/webhooks';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FacilityDirectory } from '../src/clients/facility';
import { WebhookService } from '../src/subscriptions/webhooks';
import { asAccount, createContext, newAccount, PUBLIC_HOST, type TestContext, target, testApp } from './helpers';

/**
 * The delivery tools of the webhook API (docs/webhooks.md, "Deliveries"): the log,
 * a manual retry, the test event and the secret rotation, with app.inject on a
 * real database. The dispatcher's sending is its own test; here the attempts
 * are recorded through the same DeliveryStore the dispatcher uses.
 */
let ctx: TestContext;
let app: FastifyInstance;
let deliveries: DeliveryStore;
let subscriptions: SubscriptionStore;
const account = newAccount();

beforeAll(async () => {
  ctx = await createContext('webhook_deliveries');
  ({ app } = await testApp(ctx, {}));
  deliveries = new DeliveryStore(ctx.pool, ctx.secretBox);
  subscriptions = new SubscriptionStore(ctx.pool, ctx.secretBox);
});

afterAll(async () => {
  await app?.close();
  await ctx?.close();
});

function call(options: InjectOptions, who = account) {
  return app.inject({ ...options, headers: { ...asAccount(who, target(options)), ...(options.headers ?? {}) } });
}

async function create(): Promise<{ id: string; secret: string }> {
  const res = await call({
    method: 'POST',
    url: '/v1/webhooks',
    payload: { url: `https://${PUBLIC_HOST}/hook`, events: ['violation.new'] },
  });
  expect(res.statusCode).toBe(201);
  return res.json().data;
}

let lastCreated = 0;
/**
 * Date.now(), strictly increasing: deliveries listed newest first are ordered by created_at (the
 * fan-out's `now`), and two made in the same millisecond would fall back to their random ids.
 */
function creationTime(): number {
  lastCreated = Math.max(Date.now(), lastCreated + 1);
  return lastCreated;
}

/** A delivery with `failures` failed attempts and optionally a final success, as the dispatcher records them. */
async function deliveryWithAttempts(subscriptionId: string, failures: number, succeed: boolean): Promise<string> {
  const facility = randomUUID();
  const event = {
    id: `evt_${randomUUID()}`,
    type: 'violation.new',
    created_at: new Date().toISOString(),
    data: { violation: { facility_id: facility } },
  };
  // Every subscription of this file watches all facilities: pick this subscription's delivery.
  await deliveries.fanOut({ id: event.id, type: event.type, body: JSON.stringify(event), facilityIds: [facility] }, creationTime());
  const found = await ctx.pool.query<{ id: string }>('SELECT id FROM webhook.deliveries WHERE subscription_id = $1 AND event_id = $2', [
    subscriptionId,
    event.id,
  ]);
  const id = found.rows[0]?.id;
  if (!id) throw new Error('no delivery created');
  let t = Date.now();
  for (let i = 1; i <= failures + (succeed ? 1 : 0); i++) {
    // Only this delivery is due (the other subscriptions' deliveries of this file are parked).
    await ctx.pool.query("UPDATE webhook.deliveries SET next_attempt_at = '2100-01-01T00:00:00Z' WHERE status = 'pending' AND id <> $1", [
      id,
    ]);
    await ctx.pool.query('UPDATE webhook.deliveries SET next_attempt_at = $2 WHERE id = $1', [id, new Date(t)]);
    const [claimed] = await deliveries.claimDue(t, 100, t + 60_000);
    if (claimed?.id !== id) throw new Error('not claimed');
    const success = succeed && i === failures + 1;
    await deliveries.recordAttempt(
      claimed,
      {
        startedAt: t,
        finishedAt: t + 12,
        durationMs: 12,
        responseStatus: success ? 200 : 500,
        error: success ? null : 'HTTP 500',
        success,
      },
      (input) =>
        input.success
          ? { status: 'succeeded' }
          : input.attempt < 3
            ? { status: 'pending', nextAttemptAt: t + 60_000 }
            : { status: 'failed', deactivate: false },
    );
    t += 1000;
  }
  return id;
}

describe('GET /v1/webhooks/{id}/deliveries', () => {
  it('lists deliveries newest first with every attempt: time, response status, latency, error, next retry', async () => {
    const sub = await create();
    const failed = await deliveryWithAttempts(sub.id, 3, false);
    const ok = await deliveryWithAttempts(sub.id, 1, true);
    const retrying = await deliveryWithAttempts(sub.id, 1, false);
    const res = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries` });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.pagination).toEqual({ limit: 25, next_cursor: null, has_more: false });
    expect(body.data.map((d: { id: string }) => d.id)).toEqual([retrying, ok, failed]);
    const [dRetrying, dOk, dFailed] = body.data;
    expect(dOk).toMatchObject({ status: 'succeeded', event_type: 'violation.new', attempt_count: 2, next_attempt_at: null });
    expect(dOk.event_id).toMatch(/^evt_/);
    // Recorded without the debugging record (as attempts made before it was kept): those fields are empty.
    const noDebug = {
      request_headers: null,
      response_headers: null,
      response_headers_truncated: false,
      response_body: null,
      response_body_truncated: false,
      timings: { dns_ms: null, connect_ms: null, tls_ms: null, first_byte_ms: null, connection_reused: null },
      subscription_paused: null,
    };
    expect(dOk.attempts).toEqual([
      {
        attempt: 1,
        started_at: expect.any(String),
        latency_ms: 12,
        response_status: 500,
        error: 'HTTP 500',
        outcome: 'failure',
        ...noDebug,
      },
      { attempt: 2, started_at: expect.any(String), latency_ms: 12, response_status: 200, error: null, outcome: 'success', ...noDebug },
    ]);
    expect(dRetrying.status).toBe('pending');
    expect(Date.parse(dRetrying.next_attempt_at)).toBe(Date.parse(dRetrying.attempts[0].started_at) + 60_000);
    expect(dFailed).toMatchObject({ status: 'failed', attempt_count: 3, next_attempt_at: null });
  });

  it('paginates with an opaque cursor', async () => {
    const sub = await create();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await deliveryWithAttempts(sub.id, 0, false));
    const first = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries?limit=2` });
    expect(first.json().data.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[1]]);
    expect(first.json().pagination.has_more).toBe(true);
    const cursor = first.json().pagination.next_cursor;
    const second = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries?limit=2&cursor=${cursor}` });
    expect(second.json().data.map((d: { id: string }) => d.id)).toEqual([ids[0]]);
    expect(second.json().pagination).toEqual({ limit: 2, next_cursor: null, has_more: false });
    const bad = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries?cursor=nope` });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('VALIDATION_ERROR');
  });

  it("refuses another subscription's delivery cursor and the subscription list's cursor with 400 VALIDATION_ERROR", async () => {
    const sub = await create();
    const other = await create();
    for (let i = 0; i < 2; i++) await deliveryWithAttempts(sub.id, 0, false);
    const cursor = (await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries?limit=1` })).json().pagination.next_cursor;
    const listCursor = (await call({ method: 'GET', url: '/v1/webhooks?limit=1' })).json().pagination.next_cursor;
    expect(typeof listCursor).toBe('string');
    for (const url of [`/v1/webhooks/${other.id}/deliveries?cursor=${cursor}`, `/v1/webhooks/${sub.id}/deliveries?cursor=${listCursor}`]) {
      const res = await call({ method: 'GET', url });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toEqual({
        code: 'VALIDATION_ERROR',
        message: 'Invalid request: cursor: is not a valid cursor for this list',
        details: { fields: [{ field: 'cursor', message: 'is not a valid cursor for this list' }] },
      });
    }
  });

  it("another account's subscription is a 404", async () => {
    const sub = await create();
    const res = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}/deliveries` }, newAccount());
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });
});

describe('POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry', () => {
  it('schedules one more attempt of a failed delivery now (202); unknown deliveries are 404', async () => {
    const sub = await create();
    const failed = await deliveryWithAttempts(sub.id, 3, false);
    const res = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/deliveries/${failed}/retry` });
    expect(res.statusCode).toBe(202);
    expect(res.json().data).toMatchObject({ id: failed, status: 'pending', attempt_count: 3 });
    expect(res.json().data.next_attempt_at).not.toBeNull();
    const { rows } = await ctx.pool.query('SELECT manual FROM webhook.deliveries WHERE id = $1', [failed]);
    expect(rows[0].manual).toBe(true);
    const unknown = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/deliveries/dlv_${randomUUID()}/retry` });
    expect(unknown.statusCode).toBe(404);
    const other = await create();
    const foreign = await call({ method: 'POST', url: `/v1/webhooks/${other.id}/deliveries/${failed}/retry` });
    expect(foreign.statusCode).toBe(404);
  });
});

describe('POST /v1/webhooks/{id}/test', () => {
  it('queues a webhook.test delivery (202) that the dispatcher sends once', async () => {
    const sub = await create();
    const res = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/test` });
    expect(res.statusCode).toBe(202);
    const d = res.json().data;
    expect(d).toMatchObject({ event_type: 'webhook.test', status: 'pending', attempt_count: 0, attempts: [] });
    expect(d.id).toMatch(/^dlv_/);
    const claimed = (await deliveries.claimDue(Date.now() + 1, 100, Date.now() + 60_000)).find((c) => c.id === d.id);
    expect(claimed?.manual).toBe(true);
    expect(JSON.parse(claimed?.body ?? '{}')).toMatchObject({ id: d.event_id, type: 'webhook.test', data: { webhook_id: sub.id } });
  });

  it('refuses an inactive subscription with a VALIDATION_ERROR', async () => {
    const sub = await create();
    await call({ method: 'PATCH', url: `/v1/webhooks/${sub.id}`, payload: { is_active: false } });
    const res = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/test` });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.fields[0].field).toBe('is_active');
  });

  it('writes nothing, and does not fail, for a subscription deleted or deactivated after it was read (a concurrent request)', async () => {
    // sendTest reads the subscription, then writes the delivery: these are the writes a concurrent
    // DELETE or PATCH lets through between the two (the fuzz test once got a 500 there).
    const gone = await create();
    const paused = await create();
    await call({ method: 'DELETE', url: `/v1/webhooks/${gone.id}` });
    await call({ method: 'PATCH', url: `/v1/webhooks/${paused.id}`, payload: { is_active: false } });
    for (const sub of [gone, paused]) {
      const manual = {
        id: `dlv_${randomUUID()}`,
        subscriptionId: sub.id,
        eventId: `evt_${randomUUID()}`,
        eventType: 'webhook.test',
        body: '{}',
      };
      expect(await deliveries.createManual({ ...manual, now: Date.now() })).toBeUndefined();
      const { rows } = await ctx.pool.query('SELECT id FROM webhook.deliveries WHERE id = $1', [manual.id]);
      expect(rows).toEqual([]);
    }
  });

  it('answers a test event raced by a delete with 404 and by a deactivation with 400, as if they had come first', async () => {
    const claims = { account_id: account, tier: 'pro', tier_rank: 1 };
    for (const [race, code] of [
      ['delete', 'NOT_FOUND'],
      ['deactivate', 'VALIDATION_ERROR'],
    ] as const) {
      const sub = await create();
      // The concurrent request lands between sendTest's read of the subscription and its write.
      class Raced extends DeliveryLog {
        override async createManual(input: Parameters<DeliveryLog['createManual']>[0]) {
          if (race === 'delete') await subscriptions.delete(account, sub.id);
          else await subscriptions.update(account, sub.id, { is_active: false }, Date.now());
          return super.createManual(input);
        }
      }
      const service = new WebhookService({
        store: subscriptions,
        deliveries: new Raced(ctx.pool),
        events: new EventLog(ctx.pool),
        facilities: {} as FacilityDirectory,
        allowPrivateUrls: true,
        maxSubscriptions: 100,
      });
      await expect(service.sendTest(claims, sub.id)).rejects.toMatchObject({ code });
      const { rows } = await ctx.pool.query('SELECT id FROM webhook.deliveries WHERE subscription_id = $1', [sub.id]);
      expect(rows).toEqual([]);
    }
  });
});

describe('POST /v1/webhooks/{id}/rotate-secret', () => {
  it('returns the new secret once; reads stay redacted; the dispatcher signs with the new one only', async () => {
    const sub = await create();
    const res = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/rotate-secret` });
    expect(res.statusCode).toBe(200);
    const fresh = res.json().data.secret as string;
    expect(fresh).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(fresh).not.toBe(sub.secret);
    const read = await call({ method: 'GET', url: `/v1/webhooks/${sub.id}` });
    expect(read.json().data.secret).toBe(`whsec_********${fresh.slice(-4)}`);
    expect(await subscriptions.signingSecret(sub.id)).toBe(fresh);
    const body = '{"id":"evt_x"}';
    const signature = `sha256=${(await import('node:crypto')).createHmac('sha256', fresh).update(body).digest('hex')}`;
    expect(verify(fresh, body, signature)).toBe(true);
    expect(verify(sub.secret, body, signature)).toBe(false);
    const foreign = await call({ method: 'POST', url: `/v1/webhooks/${sub.id}/rotate-secret` }, newAccount());
    expect(foreign.statusCode).toBe(404);
  });
});
