import { notFound, validationError } from '@fcd/service-kit';
import type { EventLog, StoredEvent } from '@fcd/webhooks';
import { decodePositionCursor, encodePositionCursor } from './cursor';
import { parseDateTime } from './date-time';
import { DEFAULT_PAGE_SIZE } from './webhooks';

/**
 * The events API (GET /v1/events, GET /v1/events/{id}): the envelopes of the event log, exactly
 * as webhooks carry them, oldest first. Events are public data: no account filter, every tier.
 *
 * Responses are built as JSON text around the stored envelopes, so each event is the byte-exact
 * envelope that was published (key order, compact form), as a delivery would carry it.
 *
 * Polling: `next_cursor` is the position of the last event returned whenever the page has any,
 * also on the last page (`has_more: false`), so a client that keeps asking with the last cursor
 * sees every event exactly once, in log order; an empty page returns the cursor it was given.
 */
export interface EventQuery {
  type?: string;
  facility_id?: string;
  since?: string;
  limit?: number;
  cursor?: string;
}

const LIST = 'events';

const EVENT_ID = /^evt_[A-Za-z0-9-]{1,100}$/;

export class EventsService {
  constructor(private readonly log: EventLog) {}

  /** The page as JSON text: `{ "data": [envelope…], "pagination": { limit, next_cursor, has_more } }`. */
  async list(query: EventQuery): Promise<string> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const after = query.cursor === undefined ? undefined : decodePositionCursor(LIST, query.cursor);
    if (query.cursor !== undefined && after === undefined) {
      throw validationError([{ field: 'cursor', message: 'is not a valid cursor for this list' }]);
    }
    const since = query.since === undefined ? undefined : parseDateTime(query.since);
    if (since !== undefined && Number.isNaN(since)) throw validationError([{ field: 'since', message: 'must be an RFC 3339 date-time' }]);
    const page = await this.log.list(
      {
        ...(query.type !== undefined ? { type: query.type } : {}),
        ...(query.facility_id !== undefined ? { facilityId: query.facility_id } : {}),
        ...(since !== undefined ? { since } : {}),
      },
      limit,
      after,
    );
    const last = page.items[page.items.length - 1];
    const next = last ? encodePositionCursor(LIST, last.position) : (query.cursor ?? null);
    return `{"data":[${page.items.map((e) => e.body).join(',')}],"pagination":${JSON.stringify({ limit, next_cursor: next, has_more: page.has_more })}}`;
  }

  /** One event as JSON text `{ "data": envelope }`; 404 for an unknown or malformed id. */
  async get(id: string): Promise<string> {
    const found: StoredEvent | undefined = EVENT_ID.test(id) ? await this.log.get(id) : undefined;
    if (!found) throw notFound('event');
    return `{"data":${found.body}}`;
  }
}
