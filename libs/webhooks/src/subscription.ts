import { type FieldSpecs, isoTime, isoTimeOrNull, redacted, type ViewOf, viewNames } from './fields';
import type { SubscriptionFilter } from './filter';

/**
 * A webhook subscription, declared once (./fields.ts): the store's columns, its row → record
 * mapping and the public view (SUBSCRIPTION_VIEW, `SubscriptionView`) derive from
 * SUBSCRIPTION_FIELDS. The SQL is in ./store.ts.
 */

export interface Subscription {
  id: string;
  account_id: string;
  url: string;
  events: string[];
  /** null = every facility. */
  facility_ids: string[] | null;
  /** Narrows the events further (./filter.ts, docs/webhooks.md "Filters"); null = no filter. */
  filter: SubscriptionFilter | null;
  /** Always the redacted form (`whsec_********abcd`); the clear secret is only returned by `create`. */
  secret: string;
  /** End of the overlap of the last rotation (both secrets sign until then); null when it had none. */
  secret_rotation_ends_at: string | null;
  is_active: boolean;
  created_at: string;
  updated_at: string;
  deactivated_at: string | null;
  deactivation_reason: string | null;
  consecutive_failures: number;
  last_failure_at: string | null;
  last_success_at: string | null;
  /** Attempts started per second at most, over every replica; null = the dispatcher's default. */
  rate_limit_per_second: number | null;
  /** Attempts in flight at once at most, over every replica. */
  max_in_flight: number;
}

/** A subscription to create; filter defaults to null (none), rate_limit_per_second to null (the dispatcher's default), max_in_flight to DEFAULT_MAX_IN_FLIGHT. */
export type NewSubscription = Pick<Subscription, 'id' | 'account_id' | 'url' | 'events' | 'facility_ids'> &
  Partial<Pick<Subscription, 'filter' | 'rate_limit_per_second' | 'max_in_flight'>> & {
    /** The clear secret; stored encrypted. */
    secret: string;
    /** Epoch ms (from the injected clock). */
    now: number;
  };

/** Any subset of the fields a caller may change. */
export type SubscriptionPatch = Partial<
  Pick<Subscription, 'url' | 'events' | 'facility_ids' | 'filter' | 'is_active' | 'rate_limit_per_second' | 'max_in_flight'>
>;

export interface SubscriptionPage {
  items: Subscription[];
  has_more: boolean;
}

export const MANUAL_DEACTIVATION = 'manual';

/** The subscription's fields once: columns, row mapping and the public view derive from them (fields.ts). */
export const SUBSCRIPTION_FIELDS = {
  id: { view: true },
  account_id: { view: false },
  url: { view: true },
  events: { view: true },
  facility_ids: { sql: 'facility_ids::text[] AS facility_ids', view: true },
  filter: { view: true },
  secret: { sql: 'secret_last4 AS secret', read: redacted, view: true },
  secret_rotation_ends_at: { read: isoTimeOrNull, view: true },
  is_active: { view: true },
  created_at: { read: isoTime, view: true },
  updated_at: { read: isoTime, view: true },
  deactivated_at: { read: isoTimeOrNull, view: true },
  deactivation_reason: { view: true },
  consecutive_failures: { view: false },
  last_failure_at: { read: isoTimeOrNull, view: false },
  last_success_at: { read: isoTimeOrNull, view: false },
  rate_limit_per_second: { view: true },
  max_in_flight: { view: true },
} satisfies FieldSpecs<Subscription>;

/** The public form of a subscription (docs/webhooks.md): the stored one without its bookkeeping. */
export type SubscriptionView = ViewOf<Subscription, typeof SUBSCRIPTION_FIELDS>;

/** The fields of the public form of a subscription, in their order. */
export const SUBSCRIPTION_VIEW = viewNames(SUBSCRIPTION_FIELDS);
