import { randomUUID } from 'node:crypto';
import { type Account, call, pick, STATES, type WorkloadContext } from './client';
import type { SubscriptionRecord } from './history';

const EVENT_TYPES = ['violation.new', 'facility.status_changed'] as const;

interface Live {
  id: string;
  account: Account;
  active: boolean;
}

/**
 * The subscriptions' lifecycle, one operation per step through the gateway with a Pro key:
 * created (some with a states filter), patched, deactivated and reactivated, deleted, secrets
 * rotated (with or without overlap) and recoveries. Each is a metered request (`req`) and a
 * lifecycle record (`sub`) that the checker reads the subscriptions' timelines from.
 */
export class SubscriptionOps {
  private readonly live: Live[] = [];

  constructor(
    private readonly ctx: WorkloadContext,
    private readonly owners: Account[],
  ) {}

  async step(): Promise<void> {
    const { random } = this.ctx;
    const n = this.live.length;
    if (n < 4 || (n < 10 && random() < 0.25)) return this.create();
    const s = pick(random, this.live);
    const r = random();
    if (r < 0.2) return this.patch(s);
    if (r < 0.4) return this.setActive(s, !s.active);
    if (r < 0.55 && n > 5) return this.remove(s);
    if (r < 0.8) return this.rotate(s);
    return this.recover(s);
  }

  private async api(
    owner: Account,
    method: string,
    path: string,
    body?: object,
  ): Promise<{ status: number | null; body: unknown; t0: number; t1: number }> {
    const t0 = Date.now();
    const res = await call(
      this.ctx,
      { via: 'gateway', method, path, account: owner.account, tier: owner.tier },
      `${this.ctx.gatewayUrl}${path}`,
      {
        method,
        headers: { 'x-api-key': owner.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      },
    );
    return { ...res, t0, t1: Date.now() };
  }

  private record(r: Omit<SubscriptionRecord, 'k'>): void {
    this.ctx.history.write({ k: 'sub', ...r });
  }

  private filter(): { events: string[]; states: string[] | null } {
    const { random } = this.ctx;
    const events = random() < 0.7 ? [...EVENT_TYPES] : [pick(random, EVENT_TYPES)];
    const states = random() < 0.5 ? null : [pick(random, STATES), pick(random, STATES)].filter((s, i, a) => a.indexOf(s) === i);
    return { events, states };
  }

  private async create(): Promise<void> {
    const owner = pick(this.ctx.random, this.owners);
    const token = randomUUID();
    const { events, states } = this.filter();
    const res = await this.api(owner, 'POST', '/v1/webhooks', {
      url: this.ctx.receivers.url(token),
      events,
      ...(states ? { filter: { states } } : {}),
    });
    const data = (res.body as { data?: { id?: string; secret?: string } } | undefined)?.data;
    if (res.status === 201 && data?.id) {
      this.ctx.receivers.bind(token, data.id);
      this.live.push({ id: data.id, account: owner, active: true });
    }
    this.record({
      op: 'create',
      t0: res.t0,
      t1: res.t1,
      status: res.status,
      account: owner.account,
      events,
      states,
      ...(data?.id ? { sub: data.id, secret: data.secret } : {}),
    });
  }

  private async patch(s: Live): Promise<void> {
    const { events, states } = this.filter();
    const res = await this.api(s.account, 'PATCH', `/v1/webhooks/${s.id}`, { events, filter: states ? { states } : null });
    this.record({ op: 'patch', t0: res.t0, t1: res.t1, status: res.status, sub: s.id, events, states });
  }

  private async setActive(s: Live, active: boolean): Promise<void> {
    const res = await this.api(s.account, 'PATCH', `/v1/webhooks/${s.id}`, { is_active: active });
    if (res.status === 200) s.active = active;
    this.record({ op: active ? 'reactivate' : 'deactivate', t0: res.t0, t1: res.t1, status: res.status, sub: s.id });
  }

  private async remove(s: Live): Promise<void> {
    const res = await this.api(s.account, 'DELETE', `/v1/webhooks/${s.id}`);
    // Gone or maybe gone: never operated on again (an unknown outcome stays unknown).
    this.live.splice(this.live.indexOf(s), 1);
    this.record({ op: 'delete', t0: res.t0, t1: res.t1, status: res.status, sub: s.id });
  }

  private async rotate(s: Live): Promise<void> {
    const overlap = this.ctx.random() < 0.5 ? 0 : 60;
    const res = await this.api(s.account, 'POST', `/v1/webhooks/${s.id}/rotate-secret`, overlap ? { overlap_seconds: overlap } : undefined);
    const secret = (res.body as { data?: { secret?: string } } | undefined)?.data?.secret;
    this.record({
      op: 'rotate',
      t0: res.t0,
      t1: res.t1,
      status: res.status,
      sub: s.id,
      overlapMs: overlap * 1_000,
      ...(secret ? { secret } : {}),
    });
  }

  private async recover(s: Live): Promise<void> {
    const since = Date.now() - 60_000;
    const res = await this.api(s.account, 'POST', `/v1/webhooks/${s.id}/recover`, { since: new Date(since).toISOString() });
    this.record({ op: 'recover', t0: res.t0, t1: res.t1, status: res.status, sub: s.id, since });
  }
}
