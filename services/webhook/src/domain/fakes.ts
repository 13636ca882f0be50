import { type AccountClaims, AppError, type KeysetPage, keysetPage, type PageRequest, takeRows } from '@fcd/service-kit/pure';
import type { RecoveryRequest, RecoveryResult } from '@fcd/webhooks';
import {
  DEFAULT_MAX_IN_FLIGHT,
  type DeliveryView,
  deliveryList,
  type ListPosition,
  MANUAL_DEACTIVATION,
  type ManualDelivery,
  type NewSubscription,
  redactSecret,
  type Subscription,
  type SubscriptionPatch,
  subscriptionList,
} from '@fcd/webhooks/pure';
import type { DeliveryRepository, EventRecovery, FacilityDirectory, SubscriptionRepository } from './ports';

/**
 * In-memory fakes of the ports (./ports.ts), for the unit tests of the application services:
 * the same rules as the SQL stores where the services see them (account filter, limits, newest
 * first with keyset cursors, deactivation), nothing else.
 */

const iso = (t: number) => new Date(t).toISOString();

/** Newest first by (created_at, id), strictly after `after`. */
function newestFirst<T extends ListPosition>(items: Iterable<T>, after: ListPosition | undefined): T[] {
  const key = (x: ListPosition) => `${x.created_at}|${x.id}`;
  return [...items].filter((x) => after === undefined || key(x) < key(after)).sort((a, b) => (key(a) < key(b) ? 1 : -1));
}

export class InMemorySubscriptions implements SubscriptionRepository {
  readonly rows = new Map<string, Subscription>();
  /** The clear signing secret of each subscription. */
  readonly secrets = new Map<string, string>();

  async create(input: NewSubscription, maxPerAccount: number): Promise<Subscription> {
    if ([...this.rows.values()].filter((s) => s.account_id === input.account_id).length >= maxPerAccount) {
      throw new AppError('LIMIT_REACHED', `An account can have at most ${maxPerAccount} webhook subscriptions.`);
    }
    const at = iso(input.now);
    const row: Subscription = {
      id: input.id,
      account_id: input.account_id,
      url: input.url,
      events: input.events,
      facility_ids: input.facility_ids,
      filter: input.filter ?? null,
      secret: redactSecret(input.secret),
      secret_rotation_ends_at: null,
      is_active: true,
      created_at: at,
      updated_at: at,
      deactivated_at: null,
      deactivation_reason: null,
      consecutive_failures: 0,
      last_failure_at: null,
      last_success_at: null,
      rate_limit_per_second: input.rate_limit_per_second ?? null,
      max_in_flight: input.max_in_flight ?? DEFAULT_MAX_IN_FLIGHT,
    };
    this.rows.set(row.id, row);
    this.secrets.set(row.id, input.secret);
    return { ...row };
  }

  async get(accountId: string, id: string): Promise<Subscription | undefined> {
    const row = this.rows.get(id);
    return row?.account_id === accountId ? { ...row } : undefined;
  }

  page(accountId: string, request: PageRequest): Promise<KeysetPage<Subscription>> {
    const own = [...this.rows.values()].filter((s) => s.account_id === accountId);
    return keysetPage(subscriptionList<Subscription>(accountId), request, async (limit, after) => takeRows(newestFirst(own, after), limit));
  }

  async update(accountId: string, id: string, patch: SubscriptionPatch, now: number): Promise<Subscription | undefined> {
    const row = this.rows.get(id);
    if (row?.account_id !== accountId) return undefined;
    const { is_active, ...fields } = patch;
    Object.assign(row, fields, { updated_at: iso(now) });
    if (is_active === true) Object.assign(row, { is_active, deactivated_at: null, deactivation_reason: null, consecutive_failures: 0 });
    if (is_active === false && row.is_active) {
      Object.assign(row, { is_active, deactivated_at: iso(now), deactivation_reason: MANUAL_DEACTIVATION });
    }
    return { ...row };
  }

  async rotateSecret(accountId: string, id: string, secret: string, now: number, overlapSeconds = 0): Promise<Subscription | undefined> {
    const row = this.rows.get(id);
    if (row?.account_id !== accountId) return undefined;
    const ends = overlapSeconds > 0 ? iso(now + overlapSeconds * 1000) : null;
    Object.assign(row, { secret: redactSecret(secret), secret_rotation_ends_at: ends, updated_at: iso(now) });
    this.secrets.set(id, secret);
    return { ...row };
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    if (this.rows.get(id)?.account_id !== accountId) return false;
    this.secrets.delete(id);
    return this.rows.delete(id);
  }
}

/** The delivery log of the subscriptions in `subscriptions` (a manual delivery needs an active one). */
export class InMemoryDeliveries implements DeliveryRepository {
  readonly rows = new Map<string, DeliveryView & { subscription_id: string }>();

  constructor(private readonly subscriptions: InMemorySubscriptions) {}

  page(subscriptionId: string, request: PageRequest): Promise<KeysetPage<DeliveryView>> {
    const own = [...this.rows.values()].filter((d) => d.subscription_id === subscriptionId).map(({ subscription_id, ...view }) => view);
    return keysetPage(deliveryList<DeliveryView>(subscriptionId), request, async (limit, after) =>
      takeRows(newestFirst(own, after), limit),
    );
  }

  async retry(subscriptionId: string, deliveryId: string, now: number): Promise<DeliveryView | undefined> {
    const row = this.rows.get(deliveryId);
    if (row?.subscription_id !== subscriptionId) return undefined;
    if (row.status !== 'pending') Object.assign(row, { status: 'pending', next_attempt_at: iso(now), updated_at: iso(now) });
    const { subscription_id, ...view } = row;
    return view;
  }

  async createManual(input: ManualDelivery): Promise<DeliveryView | undefined> {
    if (!this.subscriptions.rows.get(input.subscriptionId)?.is_active) return undefined;
    const at = iso(input.now);
    const view: DeliveryView = {
      id: input.id,
      event_id: input.eventId,
      event_type: input.eventType,
      status: 'pending',
      attempt_count: 0,
      next_attempt_at: at,
      created_at: at,
      updated_at: at,
      attempts: [],
    };
    this.rows.set(input.id, { ...view, subscription_id: input.subscriptionId });
    return view;
  }
}

/** Answers every recovery with `result`, and keeps the requests. */
export class ScriptedRecovery implements EventRecovery {
  readonly requests: RecoveryRequest[] = [];

  constructor(public result: RecoveryResult = { status: 'done', events: 0, since: 0, nextSince: null }) {}

  async recover(request: RecoveryRequest): Promise<RecoveryResult> {
    this.requests.push(request);
    return this.result;
  }
}

/** A facility service whose facilities are `ids` (lower-case); `down` makes it fail like an unreachable one. */
export class InMemoryFacilities implements FacilityDirectory {
  down: AppError | undefined;
  readonly ids: Set<string>;

  constructor(ids: Iterable<string> = []) {
    this.ids = new Set(ids);
  }

  async existing(ids: readonly string[], _account: AccountClaims): Promise<Set<string>> {
    if (this.down) throw this.down;
    return new Set(ids.map((id) => id.toLowerCase()).filter((id) => this.ids.has(id)));
  }
}
