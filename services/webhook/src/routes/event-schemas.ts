import { EVENT_TYPES } from '@fcd/webhooks';
import { type TSchema, Type } from '@sinclair/typebox';

/** Request and response schemas of /v1/events (the event log, every tier). */

const StringEnum = <T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

const EVENT_ID_PATTERN = '^evt_[A-Za-z0-9-]{1,100}$';

/** The envelope exactly as webhooks carry it (docs/webhooks.md), keys in the order id, type, created_at, data. */
const EventEnvelopeSchema = Type.Object(
  {
    id: Type.String({ pattern: EVENT_ID_PATTERN, description: 'Event id, `evt_<uuid>`: the `webhook-id` of its deliveries.' }),
    type: StringEnum(EVENT_TYPES),
    created_at: Type.String({ format: 'date-time' }),
    data: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          '`violation.new`: `{ violation }`; `case.new`: `{ case }`; `case.updated`: `{ case, previous_status }`; `facility.status_changed`: `{ facility, previous_status }`.',
      },
    ),
  },
  { additionalProperties: false },
);

export const EventsQuery = Type.Object(
  {
    type: Type.Optional(StringEnum(EVENT_TYPES)),
    facility_id: Type.Optional(Type.String({ format: 'uuid' })),
    since: Type.Optional(Type.String({ format: 'date-time' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, pattern: '^[A-Za-z0-9_-]+$' })),
  },
  { additionalProperties: false },
);

export const EventParams = Type.Object({ id: Type.String() });
export const NoQuery = Type.Object({}, { additionalProperties: false });

export const EventList = Type.Object({
  data: Type.Array(EventEnvelopeSchema),
  pagination: Type.Object(
    {
      limit: Type.Integer({ minimum: 1, maximum: 100 }),
      next_cursor: Nullable(Type.String({ pattern: '^[A-Za-z0-9_-]+$' })),
      has_more: Type.Boolean(),
    },
    { additionalProperties: false },
  ),
});

export const EventEnvelopeResponse = Type.Object({ data: EventEnvelopeSchema });
