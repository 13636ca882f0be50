import { type TSchema, Type } from '@sinclair/typebox';

/**
 * Request and response schemas of /v1/webhooks. Request schemas check shape
 * and types only (no coercion: a number is not a URL); the content rules with
 * readable messages live in domain/validation.ts.
 */

const nullable = <T extends TSchema>(schema: T) => Type.Unsafe<T['static'] | null>({ ...schema, nullable: true });

export const CreateBody = Type.Object(
  {
    url: Type.String(),
    events: Type.Array(Type.String()),
    facility_ids: Type.Optional(nullable(Type.Array(Type.String()))),
  },
  { additionalProperties: false },
);

export const PatchBody = Type.Object(
  {
    url: Type.Optional(Type.String()),
    events: Type.Optional(Type.Array(Type.String())),
    facility_ids: Type.Optional(nullable(Type.Array(Type.String()))),
    is_active: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** Most a rotation may keep the previous secret signing: 7 days. */
export const MAX_OVERLAP_SECONDS = 604_800;

export const RotateBody = Type.Object(
  { overlap_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_OVERLAP_SECONDS })) },
  { additionalProperties: false },
);

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  },
  { additionalProperties: false },
);

export const IdParams = Type.Object({ id: Type.String() });
/** Routes without query parameters still refuse unknown ones (SPEC §2: VALIDATION_ERROR naming the parameter). */
export const NoQuery = Type.Object({}, { additionalProperties: false });

const Timestamp = Type.String();

export const SubscriptionSchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  facility_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
  secret: Type.String(),
  secret_rotation_ends_at: Type.Union([Timestamp, Type.Null()]),
  is_active: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
  deactivated_at: Type.Union([Timestamp, Type.Null()]),
  deactivation_reason: Type.Union([Type.String(), Type.Null()]),
});

export const SubscriptionEnvelope = Type.Object({ data: SubscriptionSchema });

export const SubscriptionList = Type.Object({
  data: Type.Array(SubscriptionSchema),
  pagination: Type.Object({
    limit: Type.Integer(),
    next_cursor: Type.Union([Type.String(), Type.Null()]),
    has_more: Type.Boolean(),
  }),
});

export const DeliveryParams = Type.Object({ id: Type.String(), delivery_id: Type.String() });

export const AttemptSchema = Type.Object({
  attempt: Type.Integer(),
  started_at: Timestamp,
  latency_ms: Type.Union([Type.Integer(), Type.Null()]),
  response_status: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  outcome: Type.String(),
});

export const DeliverySchema = Type.Object({
  id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  status: Type.String(),
  attempt_count: Type.Integer(),
  next_attempt_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
  attempts: Type.Array(AttemptSchema),
});

export const DeliveryEnvelope = Type.Object({ data: DeliverySchema });

export const DeliveryList = Type.Object({
  data: Type.Array(DeliverySchema),
  pagination: Type.Object({
    limit: Type.Integer(),
    next_cursor: Type.Union([Type.String(), Type.Null()]),
    has_more: Type.Boolean(),
  }),
});
