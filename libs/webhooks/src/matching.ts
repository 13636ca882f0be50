import { eventFacets, filterPasses, type SubscriptionFilter } from './filter';

/**
 * The event envelope (@fcd/events) as far as matching needs it: any type string, and of the
 * records inside `data` only the facility references.
 */
export interface MatchableEvent {
  id: string;
  type: string;
  created_at: string;
  data: {
    violation?: { facility_id?: string | null; [key: string]: unknown };
    case?: { facility_ids?: readonly string[] | null; [key: string]: unknown };
    facility?: { id?: string | null; [key: string]: unknown };
    [key: string]: unknown;
  };
}

/** What matching needs from a subscription. */
export interface MatchableSubscription {
  events: readonly string[];
  /** null = every facility. */
  facility_ids: readonly string[] | null;
  /** Its filter (./filter.ts); null or absent: none. */
  filter?: SubscriptionFilter | null;
}

/**
 * The facilities an event concerns: the violation's facility, every facility of
 * a case, or the facility whose status changed. Lower-cased, so UUIDs compare
 * whatever their case. An event without facility references concerns none.
 */
export function eventFacilityIds(event: MatchableEvent): string[] {
  const data = event.data ?? {};
  const ids: unknown[] = [];
  if (event.type === 'violation.new') ids.push(data.violation?.facility_id);
  else if (event.type === 'case.new' || event.type === 'case.updated') ids.push(...(data.case?.facility_ids ?? []));
  else if (event.type === 'facility.status_changed') ids.push(data.facility?.id);
  return ids.filter((id): id is string => typeof id === 'string' && id.length > 0).map((id) => id.toLowerCase());
}

/**
 * True when the subscription wants the event: its type is one of the
 * subscription's events, and the subscription watches every facility
 * (`facility_ids` null) or at least one of the facilities the event concerns
 * (for a case: any of the case's facilities), and the event passes its
 * filter (`filterPasses` over `eventFacets`). Whether the subscription is
 * active is the caller's concern. This is the rule's TypeScript model, for
 * the unit tests; what the fan-out, recovery and the events API evaluate is
 * `subscriptionMatchesSql` (match-sql.ts), the same rule over the same
 * facility ids and facets, and test/match-sql.int.test.ts checks they agree.
 */
export function matches(subscription: MatchableSubscription, event: MatchableEvent): boolean {
  if (!subscription.events.includes(event.type)) return false;
  const filter = subscription.filter ?? null;
  // Most subscriptions have no filter: the event's facets are read only for one that has.
  if (filter !== null && !filterPasses(filter, eventFacets(event))) return false;
  if (subscription.facility_ids === null) return true;
  const watched = new Set(subscription.facility_ids.map((id) => id.toLowerCase()));
  return eventFacilityIds(event).some((id) => watched.has(id));
}
