import { EVENT_TYPES, EventEnvelopeSchema } from '@fcd/events';
import { PageQuery, Pagination, StringEnum, SubscriptionId } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

/** Request and response schemas of /v1/events (the event log, every tier): the contract's envelope and the shared list shapes. */

/** The envelope exactly as webhooks carry it (docs/webhooks.md), keys in the order id, type, created_at, data. */
const EventEnvelope = Type.Object(
  EventEnvelopeSchema(
    Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          '`violation.new`: `{ violation }`; `case.new`: `{ case }`; `case.updated`: `{ case, previous_status }`; `facility.status_changed`: `{ facility, previous_status }`.',
      },
    ),
  ).properties,
  { additionalProperties: false },
);

export const EventsQuery = Type.Object(
  {
    type: Type.Optional(StringEnum(EVENT_TYPES)),
    facility_id: Type.Optional(Type.String({ format: 'uuid' })),
    since: Type.Optional(Type.String({ format: 'date-time' })),
    subscription_id: Type.Optional(
      Type.String({
        pattern: SubscriptionId.pattern,
        description:
          "Only the events this subscription of the caller's matches (its `events`, `facility_ids` and `filter`, as they are now): what the fan-out would send it. 404 for another account's or an unknown subscription.",
      }),
    ),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const EventList = Type.Object({ data: Type.Array(EventEnvelope), pagination: Pagination });

export const EventEnvelopeResponse = Type.Object({ data: EventEnvelope });
