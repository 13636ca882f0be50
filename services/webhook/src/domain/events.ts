import { type AccountClaims, EventId, notFound, validationError } from '@fcd/service-kit/pure';
import type { StoredEvent } from '@fcd/webhooks';
import { parseDateTime } from './date-time';
import type { EventReader, SubscriptionRepository } from './ports';

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
 *
 * `subscription_id` narrows the list to the events that subscription (the caller's) matches, by
 * the rule the fan-out and recovery evaluate (`subscriptionMatchesSql`, in the log's SQL).
 */
export interface EventQuery {
  type?: string;
  facility_id?: string;
  since?: string;
  subscription_id?: string;
  limit?: number;
  cursor?: string;
}

export class EventsService {
  constructor(
    private readonly log: EventReader,
    private readonly subscriptions: Pick<SubscriptionRepository, 'get'>,
  ) {}

  /** The page as JSON text: `{ "data": [envelope…], "pagination": { limit, next_cursor, has_more } }`. */
  async list(account: AccountClaims, query: EventQuery): Promise<string> {
    const since = query.since === undefined ? undefined : parseDateTime(query.since);
    if (since !== undefined && Number.isNaN(since)) throw validationError([{ field: 'since', message: 'must be an RFC 3339 date-time' }]);
    const subscriptionId = query.subscription_id;
    // The route's schema has checked the id's form; a foreign or unknown one is 404, as on /v1/webhooks/{id}.
    if (subscriptionId !== undefined && !(await this.subscriptions.get(account.account_id, subscriptionId))) {
      throw notFound('webhook subscription');
    }
    const page = await this.log.page(
      {
        ...(query.type !== undefined ? { type: query.type } : {}),
        ...(query.facility_id !== undefined ? { facilityId: query.facility_id } : {}),
        ...(since !== undefined ? { since } : {}),
        ...(subscriptionId !== undefined ? { subscriptionId } : {}),
      },
      { limit: query.limit, cursor: query.cursor },
    );
    const pagination = { limit: page.limit, next_cursor: page.next_cursor, has_more: page.has_more };
    return `{"data":[${page.items.map((e) => e.body).join(',')}],"pagination":${JSON.stringify(pagination)}}`;
  }

  /** One event as JSON text `{ "data": envelope }`; 404 for an unknown or malformed id. */
  async get(id: string): Promise<string> {
    const found: StoredEvent | undefined = EventId.is(id) ? await this.log.get(id) : undefined;
    if (!found) throw notFound('event');
    return `{"data":${found.body}}`;
  }
}
