import { type AccountClaims, AppError, ManualClock, serviceUnavailable } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { InMemoryDeliveries, InMemoryFacilities, InMemorySubscriptions, ScriptedRecovery } from '../domain/fakes';
import { RecoveryGate } from '../domain/recovery';
import { WebhookService, type WebhookServiceOptions } from './webhooks';

const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const F1 = '11111111-1111-4111-8111-111111111111';
const F2 = '22222222-2222-4222-8222-222222222222';
const alice: AccountClaims = { account_id: 'acct_alice', tier: 'pro', tier_rank: 1 };
const bob: AccountClaims = { account_id: 'acct_bob', tier: 'pro', tier_rank: 1 };
const url = 'https://hooks.example.com/fcd';

function setup(options: Partial<WebhookServiceOptions> = {}) {
  const clock = new ManualClock(T0);
  let n = 0;
  let s = 0;
  const store = new InMemorySubscriptions();
  const deliveries = new InMemoryDeliveries(store);
  const events = new ScriptedRecovery();
  const facilities = new InMemoryFacilities([F1]);
  const service = new WebhookService({
    store,
    deliveries,
    events,
    facilities,
    allowPrivateUrls: false,
    maxSubscriptions: 3,
    // A public address for every host: the URL rules, no DNS.
    resolver: async () => [{ address: '93.184.216.34', family: 4 }],
    clock,
    ids: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`,
    secrets: () => `whsec_secret${++s}`,
    ...options,
  });
  return { service, store, deliveries, events, facilities, clock };
}

/** The error a call is refused with, as code, status and problem fields. */
async function refusal(call: Promise<unknown>) {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const fields = (err.details?.fields as Array<{ field: string }> | undefined)?.map((p) => p.field);
    return {
      code: err.code,
      status: err.status,
      ...(fields ? { fields } : {}),
      ...(err.retryAfterSeconds ? { retryAfter: err.retryAfterSeconds } : {}),
    };
  }
  throw new Error('not refused');
}

describe('WebhookService on the in-memory ports', () => {
  it('creates a subscription: the clear secret once, facility ids lower-cased, stored redacted', async () => {
    const { service, store } = setup();
    const created = await service.create(alice, { url, events: ['case.new'], facility_ids: [F1.toUpperCase()] }, []);
    expect(created).toMatchObject({ id: 'wh_00000000-0000-4000-8000-000000000001', secret: 'whsec_secret1', facility_ids: [F1] });
    expect(created).not.toHaveProperty('account_id');
    expect(await service.get(alice, created.id)).toMatchObject({ secret: 'whsec_********ret1', created_at: '2026-11-22T08:00:00.000Z' });
    expect(store.secrets.get(created.id)).toBe('whsec_secret1');
  });

  it('refuses a private URL, an unknown event type and an unknown facility in one VALIDATION_ERROR, writing nothing', async () => {
    const { service, store } = setup({ resolver: async () => [{ address: '10.0.0.1', family: 4 }] });
    const body = { url: 'https://internal.example.com/', events: ['case.closed'], facility_ids: [F2] };
    expect(await refusal(service.create(alice, body, []))).toEqual({
      code: 'VALIDATION_ERROR',
      status: 400,
      fields: ['url', 'events[0]', 'facility_ids[0]'],
    });
    expect(store.rows.size).toBe(0);
  });

  it('answers 503 when the facility service cannot say which facilities exist', async () => {
    const { service, facilities } = setup();
    facilities.down = serviceUnavailable('facility', 2);
    expect(await refusal(service.create(alice, { url, events: ['case.new'], facility_ids: [F1] }, []))).toEqual({
      code: 'SERVICE_UNAVAILABLE',
      status: 503,
      retryAfter: 2,
    });
  });

  it("lists the account's own subscriptions newest first, in pages, and refuses another account's cursor", async () => {
    const { service, clock } = setup();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await service.create(alice, { url, events: ['case.new'] }, [])).id);
      clock.advance(1000);
    }
    await service.create(bob, { url, events: ['case.new'] }, []);
    const first = await service.list(alice, 2, undefined);
    expect([first.data.map((s) => s.id), first.pagination.has_more]).toEqual([[ids[2], ids[1]], true]);
    const rest = await service.list(alice, 2, first.pagination.next_cursor as string);
    expect(rest).toEqual({ data: [expect.objectContaining({ id: ids[0] })], pagination: { limit: 2, next_cursor: null, has_more: false } });
    expect(await refusal(service.list(bob, 2, first.pagination.next_cursor as string))).toEqual({
      code: 'VALIDATION_ERROR',
      status: 400,
      fields: ['cursor'],
    });
  });

  it('refuses a subscription beyond the limit with LIMIT_REACHED', async () => {
    const { service } = setup({ maxSubscriptions: 1 });
    await service.create(alice, { url, events: ['case.new'] }, []);
    expect(await refusal(service.create(alice, { url, events: ['case.new'] }, []))).toEqual({ code: 'LIMIT_REACHED', status: 409 });
  });

  it("answers NOT_FOUND for a malformed id and for another account's subscription, on every use case", async () => {
    const { service } = setup();
    const { id } = await service.create(alice, { url, events: ['case.new'] }, []);
    for (const [account, target] of [
      [alice, 'wh_nope'],
      [bob, id],
    ] as const) {
      expect(await refusal(service.get(account, target))).toEqual({ code: 'NOT_FOUND', status: 404 });
      expect(await refusal(service.update(account, target, { is_active: false }, []))).toEqual({ code: 'NOT_FOUND', status: 404 });
      expect(await refusal(service.delete(account, target))).toEqual({ code: 'NOT_FOUND', status: 404 });
      expect(await refusal(service.sendTest(account, target))).toEqual({ code: 'NOT_FOUND', status: 404 });
      expect(await refusal(service.rotateSecret(account, target, undefined))).toEqual({ code: 'NOT_FOUND', status: 404 });
    }
    expect(await refusal(service.retryDelivery(alice, id, 'dlv_nope'))).toEqual({ code: 'NOT_FOUND', status: 404 });
  });

  it('sends a test event to an active subscription only, and lists it in the delivery log', async () => {
    const { service } = setup();
    const { id } = await service.create(alice, { url, events: ['case.new'] }, []);
    const delivery = await service.sendTest(alice, id);
    expect(delivery).toMatchObject({ event_type: 'webhook.test', status: 'pending', event_id: 'evt_00000000-0000-4000-8000-000000000002' });
    expect((await service.listDeliveries(alice, id, undefined, undefined)).data.map((d) => d.id)).toEqual([delivery.id]);
    await service.update(alice, id, { is_active: false }, []);
    expect(await service.get(alice, id)).toMatchObject({ is_active: false, deactivation_reason: 'manual' });
    expect(await refusal(service.sendTest(alice, id))).toEqual({ code: 'VALIDATION_ERROR', status: 400, fields: ['is_active'] });
  });

  it('rotates the secret: the new one in clear once, with the overlap given', async () => {
    const { service, clock } = setup();
    const { id } = await service.create(alice, { url, events: ['case.new'] }, []);
    clock.advance(5000);
    const rotated = await service.rotateSecret(alice, id, { overlap_seconds: 60 });
    expect(rotated).toMatchObject({ secret: 'whsec_secret2', secret_rotation_ends_at: '2026-11-22T08:01:05.000Z' });
  });

  it('recovers through the port: the window passed on, the rate, a busy recovery and an inactive subscription refused', async () => {
    let allowed = true;
    const { service, events, clock } = setup({
      recoverRate: async () => (allowed ? { allowed: true } : { allowed: false, retryAfterSeconds: 7 }),
      recoveryGate: new RecoveryGate(1),
    });
    const { id } = await service.create(alice, { url, events: ['case.new'] }, []);
    clock.advance(3_600_000);
    events.result = { status: 'done', events: 4, since: T0, nextSince: null };
    const since = '2026-11-22T08:00:00.000Z';
    expect(await service.recover(alice, id, { since, dry_run: true }, [])).toEqual({
      events: 4,
      since,
      until: '2026-11-22T09:00:00.000Z',
      next_since: null,
    });
    expect(events.requests).toEqual([{ subscriptionId: id, since: T0, until: T0 + 3_600_000, dryRun: true, now: T0 + 3_600_000 }]);
    events.result = { status: 'busy' };
    expect(await refusal(service.recover(alice, id, { since }, []))).toEqual({ code: 'LIMIT_REACHED', status: 409, retryAfter: 1 });
    allowed = false;
    expect(await refusal(service.recover(alice, id, { since }, []))).toEqual({ code: 'RATE_LIMIT_EXCEEDED', status: 429, retryAfter: 7 });
    allowed = true;
    await service.update(alice, id, { is_active: false }, []);
    expect(await refusal(service.recover(alice, id, { since }, []))).toEqual({
      code: 'VALIDATION_ERROR',
      status: 400,
      fields: ['is_active'],
    });
  });
});
