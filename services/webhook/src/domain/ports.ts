import type { AccountClaims, KeysetPage, PageRequest } from '@fcd/service-kit/pure';
import type {
  DeliveryView,
  EventFilter,
  ManualDelivery,
  NewSubscription,
  RecoveryRequest,
  RecoveryResult,
  StoredEvent,
  Subscription,
  SubscriptionPatch,
} from '@fcd/webhooks';

/**
 * The ports of the webhook API's application services (../subscriptions/webhooks.ts, events.ts): what they need
 * from storage and from other services, as interfaces the domain owns. The adapters are
 * @fcd/webhooks' stores (SQL) and clients/facility.ts (HTTP); the in-memory fakes are in
 * fakes.ts, beside them, for the unit tests of the services.
 */

/** The subscriptions of every account; each method filters on the account, so a foreign id is an unknown one. */
export interface SubscriptionRepository {
  /** LIMIT_REACHED when the account already has `maxPerAccount`. */
  create(input: NewSubscription, maxPerAccount: number): Promise<Subscription>;
  get(accountId: string, id: string): Promise<Subscription | undefined>;
  /** Newest first; 400 VALIDATION_ERROR for a bad limit or cursor. */
  page(accountId: string, request: PageRequest): Promise<KeysetPage<Subscription>>;
  update(accountId: string, id: string, patch: SubscriptionPatch, now: number): Promise<Subscription | undefined>;
  rotateSecret(accountId: string, id: string, secret: string, now: number, overlapSeconds?: number): Promise<Subscription | undefined>;
  delete(accountId: string, id: string): Promise<boolean>;
}

/** The delivery log of a subscription (the caller has checked that it is the account's). */
export interface DeliveryRepository {
  /** Newest first, each with every attempt; 400 VALIDATION_ERROR for a bad limit or cursor. */
  page(subscriptionId: string, request: PageRequest): Promise<KeysetPage<DeliveryView>>;
  /** One manual attempt now of a finished delivery; undefined when there is none. */
  retry(subscriptionId: string, deliveryId: string, now: number): Promise<DeliveryView | undefined>;
  /** undefined when the subscription is gone or inactive by the time it is written. */
  createManual(input: ManualDelivery): Promise<DeliveryView | undefined>;
}

/** Recovery over the event log: re-delivers a window of missed events to one subscription. */
export interface EventRecovery {
  recover(request: RecoveryRequest): Promise<RecoveryResult>;
}

/** The event log as the events API reads it. */
export interface EventReader {
  /** Oldest first, polled; 400 VALIDATION_ERROR for a bad limit or cursor. */
  page(filter: EventFilter, request: PageRequest): Promise<KeysetPage<StoredEvent>>;
  get(id: string): Promise<StoredEvent | undefined>;
}

/** The facility service, as subscriptions need it: which facility ids exist. */
export interface FacilityDirectory {
  /** The subset of `ids` that exist (lower-case). Throws SERVICE_UNAVAILABLE when the facility service cannot answer. */
  existing(ids: readonly string[], account: AccountClaims): Promise<Set<string>>;
}
