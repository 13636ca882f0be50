import {
  type AccountClaims,
  type Clock,
  DeliveryId,
  type FieldProblem,
  type IdSource,
  listBody,
  notFound,
  prefixedId,
  SubscriptionId,
  serviceUnavailable,
  systemClock,
  uuidSource,
  validationError,
} from '@fcd/service-kit/pure';
import { checkWebhookUrl } from '@fcd/webhooks';
import {
  DEFAULT_EVENT_RETENTION_DAYS,
  type DeliveryView,
  filterProblems,
  generateSecret,
  normaliseFilter,
  type RecoverRateDecision,
  type Resolver,
  SUBSCRIPTION_VIEW,
  type Subscription,
  type SubscriptionPatch,
  type SubscriptionView,
  TEST_EVENT_TYPE,
  type UrlCheck,
  viewOf,
} from '@fcd/webhooks/pure';
import type { DeliveryRepository, EventRecovery, FacilityDirectory, SubscriptionRepository } from '../domain/ports';
import { type RecoveryGate, recoverRateExceeded, recoveryInProgress, recoveryWindow } from '../domain/recovery';
import { emptyPatchProblems, eventProblems, facilityIdProblems, mergeProblems, unknownFacilityProblems } from '../domain/validation';

export interface SubscriptionListView {
  data: SubscriptionView[];
  pagination: { limit: number; next_cursor: string | null; has_more: boolean };
}

export interface DeliveryListView {
  data: DeliveryView[];
  pagination: { limit: number; next_cursor: string | null; has_more: boolean };
}

/** The answer of a recovery: how many events it enqueued (or would, for a dry run), its window, and where the next call starts. */
export interface RecoveryView {
  events: number;
  since: string;
  until: string;
  next_since: string | null;
}

/** Ports only (./ports.ts): the stores, the facility directory, DNS (`resolver`), the recover rate. */
export interface WebhookServiceOptions {
  store: SubscriptionRepository;
  deliveries: DeliveryRepository;
  /** The event log recovery reads. */
  events: EventRecovery;
  /** EVENT_RETENTION_DAYS: how far back a recovery may reach. */
  retentionDays?: number;
  /** Takes one call of the account's recover rate (`takeRecoverCall`); none: unlimited (unit tests). */
  recoverRate?: (accountId: string, now: number) => Promise<RecoverRateDecision>;
  /** Bounds the recoveries running at once in this process. */
  recoveryGate?: RecoveryGate;
  facilities: FacilityDirectory;
  allowPrivateUrls: boolean;
  /** WEBHOOK_ALLOWED_PORTS (default 443). */
  allowedPorts?: readonly number[];
  maxSubscriptions: number;
  /** DNS for the URL checks; node:dns when absent. */
  resolver?: Resolver;
  clock?: Clock;
  ids?: IdSource;
  secrets?: () => string;
  /** Called with the reason of each refused URL (metrics). */
  onUrlRefused?: (code: string) => void;
}

/** The public form of a stored subscription: the fields SUBSCRIPTION_FIELDS shows. */
const view = (s: Subscription): SubscriptionView => viewOf(SUBSCRIPTION_VIEW, s);

const subscriptionNotFound = () => notFound('webhook subscription');
const deliveryNotFound = () => notFound('delivery');

/** Raw body fields as the schema saw them; the service checks content, not shape. */
type RawBody = Record<string, unknown>;

/**
 * Subscription use cases: validation beyond the schema (URL safety with DNS,
 * event types, facility existence), merged with the schema's problems into
 * one VALIDATION_ERROR; then the store. Nothing is written unless everything
 * checks out. Not in domain/: it resolves webhook hosts with node:dns unless
 * given a resolver; its rules are domain/'s (validation, recovery).
 */
export class WebhookService {
  private readonly clock: Clock;
  private readonly ids: IdSource;
  private readonly secrets: () => string;

  constructor(private readonly options: WebhookServiceOptions) {
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? uuidSource;
    this.secrets = options.secrets ?? (() => generateSecret());
  }

  async create(account: AccountClaims, body: unknown, schemaProblems: FieldProblem[]): Promise<SubscriptionView> {
    const raw = (typeof body === 'object' && body !== null ? body : {}) as RawBody;
    await this.validate(account, raw, schemaProblems);
    const secret = this.secrets();
    const created = await this.options.store.create(
      {
        id: prefixedId('wh', this.ids),
        account_id: account.account_id,
        url: raw.url as string,
        events: raw.events as string[],
        facility_ids: normaliseFacilityIds(raw.facility_ids),
        filter: normaliseFilter(raw.filter),
        secret,
        now: this.clock.now(),
        rate_limit_per_second: typeof raw.rate_limit_per_second === 'number' ? raw.rate_limit_per_second : null,
        ...(typeof raw.max_in_flight === 'number' ? { max_in_flight: raw.max_in_flight } : {}),
      },
      this.options.maxSubscriptions,
    );
    // The one response that carries the secret in clear.
    return { ...view(created), secret };
  }

  async list(account: AccountClaims, limit: number | undefined, cursor: string | undefined): Promise<SubscriptionListView> {
    return listBody(await this.options.store.page(account.account_id, { limit, cursor }), view);
  }

  async get(account: AccountClaims, id: string): Promise<SubscriptionView> {
    if (!SubscriptionId.is(id)) throw subscriptionNotFound();
    const found = await this.options.store.get(account.account_id, id);
    if (!found) throw subscriptionNotFound();
    return view(found);
  }

  async update(account: AccountClaims, id: string, body: unknown, schemaProblems: FieldProblem[]): Promise<SubscriptionView> {
    // An unknown or foreign id is a 404 whatever the body says.
    if (!SubscriptionId.is(id) || !(await this.options.store.get(account.account_id, id))) throw subscriptionNotFound();
    const raw = (typeof body === 'object' && body !== null ? body : {}) as RawBody;
    await this.validate(account, raw, [...schemaProblems, ...emptyPatchProblems(body)]);
    const patch: SubscriptionPatch = {};
    if ('url' in raw) patch.url = raw.url as string;
    if ('events' in raw) patch.events = raw.events as string[];
    if ('facility_ids' in raw) patch.facility_ids = normaliseFacilityIds(raw.facility_ids);
    if ('filter' in raw) patch.filter = normaliseFilter(raw.filter);
    if ('is_active' in raw) patch.is_active = raw.is_active as boolean;
    if ('rate_limit_per_second' in raw) patch.rate_limit_per_second = raw.rate_limit_per_second as number | null;
    if ('max_in_flight' in raw) patch.max_in_flight = raw.max_in_flight as number;
    const updated = await this.options.store.update(account.account_id, id, patch, this.clock.now());
    if (!updated) throw subscriptionNotFound();
    return view(updated);
  }

  async delete(account: AccountClaims, id: string): Promise<void> {
    if (!SubscriptionId.is(id) || !(await this.options.store.delete(account.account_id, id))) throw subscriptionNotFound();
  }

  /** The delivery log of one subscription: newest first, each delivery with every attempt. */
  async listDeliveries(
    account: AccountClaims,
    id: string,
    limit: number | undefined,
    cursor: string | undefined,
  ): Promise<DeliveryListView> {
    await this.get(account, id);
    return listBody(await this.options.deliveries.page(id, { limit, cursor }), (delivery) => delivery);
  }

  /**
   * One more attempt of a finished delivery, now (the dispatcher sends it;
   * no automatic retries follow and it never deactivates). A pending delivery
   * is already scheduled and is returned as it is.
   */
  async retryDelivery(account: AccountClaims, id: string, deliveryId: string): Promise<DeliveryView> {
    const subscription = await this.get(account, id);
    if (!DeliveryId.is(deliveryId)) throw deliveryNotFound();
    if (!subscription.is_active) throw inactiveProblem();
    const delivery = await this.options.deliveries.retry(id, deliveryId, this.clock.now());
    if (!delivery) throw deliveryNotFound();
    return delivery;
  }

  /** Queues a signed `webhook.test` event for the subscription (one attempt, sent by the dispatcher). */
  async sendTest(account: AccountClaims, id: string): Promise<DeliveryView> {
    const subscription = await this.get(account, id);
    if (!subscription.is_active) throw inactiveProblem();
    const now = this.clock.now();
    const eventId = prefixedId('evt', this.ids);
    const body = JSON.stringify({
      id: eventId,
      type: TEST_EVENT_TYPE,
      created_at: new Date(now).toISOString(),
      data: { webhook_id: id, message: 'This is a test event sent from the webhook settings.' },
    });
    const delivery = await this.options.deliveries.createManual({
      id: prefixedId('dlv', this.ids),
      subscriptionId: id,
      eventId,
      eventType: TEST_EVENT_TYPE,
      body,
      now,
    });
    if (!delivery) {
      // Deleted or deactivated by a concurrent request since it was read: answered as if that had
      // come first (get throws the 404 of a deleted one; otherwise it was inactive when written).
      await this.get(account, id);
      throw inactiveProblem();
    }
    return delivery;
  }

  /**
   * Re-delivers the logged events of a window that the subscription matches and has not received
   * (none of its deliveries of the event succeeded, none is pending), as new deliveries that
   * follow the normal retry rules, paced (docs/webhooks.md "Recovery"). The window starts no
   * earlier than the subscription's creation; at most RECOVERY_MAX_EVENTS per call, `next_since`
   * naming where the next call starts. An unknown or foreign id is a 404 whatever the body says;
   * then bad input (400), the account's recover rate (429), an inactive subscription (400, like
   * retry), a recovery in progress (409). A dry run counts and writes nothing.
   */
  async recover(account: AccountClaims, id: string, body: unknown, schemaProblems: FieldProblem[]): Promise<RecoveryView> {
    const subscription = await this.get(account, id);
    const raw = (typeof body === 'object' && body !== null ? body : {}) as RawBody;
    const now = this.clock.now();
    const { problems, window } = recoveryWindow(raw, now, this.options.retentionDays ?? DEFAULT_EVENT_RETENTION_DAYS);
    // A value the schema refused (e.g. not a date-time) is reported once, by the schema.
    const refused = new Set(schemaProblems.map((p) => p.field));
    const all = mergeProblems(
      schemaProblems,
      problems.filter((p) => !refused.has(p.field)),
    );
    if (all.length > 0 || !window) throw validationError(all);
    const rate = await this.options.recoverRate?.(account.account_id, now);
    if (rate && !rate.allowed) throw recoverRateExceeded(rate.retryAfterSeconds);
    if (!subscription.is_active) throw inactiveProblem();
    const run = () =>
      this.options.events.recover({ subscriptionId: id, since: window.since, until: window.until, dryRun: raw.dry_run === true, now });
    const result = await (this.options.recoveryGate ? this.options.recoveryGate.run(run) : run());
    if (result.status === 'not_found') throw subscriptionNotFound();
    if (result.status === 'inactive') throw inactiveProblem();
    if (result.status === 'busy') throw recoveryInProgress(now);
    if (result.status === 'in_progress') throw recoveryInProgress(now, result.lastDueAt);
    const iso = (t: number) => new Date(t).toISOString();
    return {
      events: result.events,
      since: iso(result.since),
      until: iso(window.until),
      next_since: result.nextSince === null ? null : iso(result.nextSince),
    };
  }

  /**
   * A new signing secret, effective for every attempt from now on; returned in clear this once.
   * With `overlap_seconds` (0..604800) the replaced secret keeps signing beside it until then.
   */
  async rotateSecret(
    account: AccountClaims,
    id: string,
    body: RawBody | undefined,
    schemaProblems: FieldProblem[] = [],
  ): Promise<SubscriptionView> {
    if (schemaProblems.length > 0) throw validationError(schemaProblems);
    if (!SubscriptionId.is(id)) throw subscriptionNotFound();
    const overlap = typeof body?.overlap_seconds === 'number' ? body.overlap_seconds : 0;
    const secret = this.secrets();
    const updated = await this.options.store.rotateSecret(account.account_id, id, secret, this.clock.now(), overlap);
    if (!updated) throw subscriptionNotFound();
    return { ...view(updated), secret };
  }

  /**
   * Content checks of whichever of url, events, facility_ids and filter are present
   * (URL resolution and facility existence run in parallel), merged with the
   * schema's problems. A dependency that cannot answer (DNS, facility
   * service) makes the whole request a 503: the list would be incomplete.
   */
  private async validate(account: AccountClaims, raw: RawBody, schemaProblems: FieldProblem[]): Promise<void> {
    const facilities = facilityIdProblems(raw.facility_ids);
    const [urlProblems, unknownFacilities] = await Promise.all([
      typeof raw.url === 'string' ? this.urlProblems(raw.url) : Promise.resolve([]),
      facilities.candidates.size > 0
        ? this.options.facilities
            .existing([...facilities.candidates.keys()], account)
            .then((existing) => unknownFacilityProblems(facilities.candidates, existing))
        : Promise.resolve([]),
    ]);
    const problems = mergeProblems(
      schemaProblems,
      urlProblems,
      eventProblems(raw.events),
      facilities.problems,
      unknownFacilities,
      filterProblems(raw.filter),
    );
    if (problems.length > 0) throw validationError(problems);
  }

  private async urlProblems(url: string): Promise<FieldProblem[]> {
    const result: UrlCheck = await checkWebhookUrl(url, {
      allowPrivate: this.options.allowPrivateUrls,
      allowedPorts: this.options.allowedPorts ?? [443],
      resolver: this.options.resolver,
    });
    if (result.ok) return [];
    this.options.onUrlRefused?.(result.code);
    if (result.retryable) throw serviceUnavailable('dns', 2);
    return [{ field: 'url', message: result.message }];
  }
}

function inactiveProblem() {
  return validationError(
    [{ field: 'is_active', message: 'the subscription is inactive; reactivate it with PATCH {"is_active": true} first' }],
    'The subscription is inactive. Reactivate it before sending deliveries to it.',
  );
}

function normaliseFacilityIds(value: unknown): string[] | null {
  return Array.isArray(value) ? [...new Set((value as string[]).map((id) => id.toLowerCase()))] : null;
}
