import type { FieldSpecs } from './fields';
import type { EventFacets } from './filter';

/**
 * The event log's records (table `webhook.events`; the SQL is in ./event-log.ts), declared once:
 * what the dispatcher appends, what the events API reads (EVENT_FIELDS: its columns and row
 * mapping), and the log's retention.
 */

/** Retention of the log, in days: the default, and the least the API promises (docs/webhooks.md). */
export const DEFAULT_EVENT_RETENTION_DAYS = 30;
export const MIN_EVENT_RETENTION_DAYS = 7;
export const MAX_EVENT_RETENTION_DAYS = 3650;
export const DAY_MS = 86_400_000;

/** An event as the dispatcher consumed it. */
export interface LoggedEvent {
  id: string;
  type: string;
  /** The envelope exactly as published. */
  body: string;
  /** The facilities it concerns (lower-case UUIDs; `eventFacilityIds`). */
  facilityIds: readonly string[];
  /** The envelope's created_at, epoch ms. */
  createdAt: number;
  /** Its facets (`eventFacets`), kept for subscription filters; computed from `body` when absent. */
  facets?: EventFacets;
}

/** One row of the log as the events API returns it. */
export interface StoredEvent {
  /** Decimal text of a bigint: the event's place in the log. */
  position: string;
  id: string;
  /** The envelope exactly as published. */
  body: string;
}

export interface EventFilter {
  type?: string;
  facilityId?: string;
  /** Only events created at or after this time (epoch ms). */
  since?: number;
  /** Only the events this subscription matches (`subscriptionMatchesSql`: its types, facilities and filter). */
  subscriptionId?: string;
}

/** A logged event's fields; its public view is its body, the envelope as published. */
export const EVENT_FIELDS = {
  position: { sql: 'position::text AS position', view: false },
  id: { view: false },
  body: { view: true },
} satisfies FieldSpecs<StoredEvent>;
