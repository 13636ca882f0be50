import { DeliveryId, EventId, Nullable, PageQuery, Pagination, SubscriptionId, UUID_PATTERN } from '@fcd/service-kit';
import {
  DEFAULT_MAX_IN_FLIGHT,
  EVENT_TYPES,
  FILTER_CODES,
  MAX_FILTER_LIST,
  MAX_IN_FLIGHT_RANGE,
  RATE_LIMIT_RANGE,
  TEST_EVENT_TYPE,
} from '@fcd/webhooks';
import { type TSchema, Type } from '@sinclair/typebox';

/**
 * Request and response schemas of /v1/webhooks: the contract (docs/api.md "Conventions", docs/webhooks.md),
 * with the enums, formats and patterns of every field; the OpenAPI document is
 * generated from them.
 *
 * Request bodies are validated against their shape only (types, unknown
 * fields, numeric ranges: see `shapeOnly`); the content rules (URL, event
 * types, facility ids, duplicates, empty PATCH) are checked by
 * domain/validation.ts, whose messages are readable, so one problem is never
 * reported twice. Responses are serialised by these schemas (fast-json-stringify).
 */

/** ISO 8601 UTC with milliseconds and Z. */
export const TIMESTAMP_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$';
/** Every type a delivery can carry: the four subscribable event types and the test event. */
const DELIVERY_EVENT_TYPES = [...EVENT_TYPES, TEST_EVENT_TYPE] as const;
const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'cancelled'] as const;
const ATTEMPT_OUTCOMES = ['success', 'failure'] as const;

const Timestamp = (description?: string) =>
  Type.String({ format: 'date-time', pattern: TIMESTAMP_PATTERN, ...(description ? { description } : {}) });
const Uuid = Type.String({ format: 'uuid', pattern: `^${UUID_PATTERN}$` });
const EventType = Type.Union(
  EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: 'An event type a subscription can list.' },
);
const Url = (description: string) => Type.String({ format: 'uri', maxLength: 2048, pattern: '^https://', description });
const EventList = Type.Array(EventType, { minItems: 1, uniqueItems: true, description: 'Event types, at least one, no duplicates.' });

const nullable = <T extends TSchema>(schema: T) => Type.Unsafe<T['static'] | null>({ ...schema, nullable: true });

const FacilityIds = Type.Array(Uuid, {
  minItems: 1,
  maxItems: 1000,
  uniqueItems: true,
  description: 'Facilities to watch (UUIDs of existing facilities, 1–1000, no duplicates); null or omitted watches every facility.',
});
const codeList = (codes: readonly string[], description: string) =>
  Type.Array(
    Type.Union(
      codes.map((c) => Type.Literal(c)),
      { description },
    ),
    { minItems: 1, maxItems: MAX_FILTER_LIST, uniqueItems: true },
  );
/** docs/webhooks.md "Filters": what each list means for each event type. */
const Filter = Type.Object(
  {
    states: Type.Optional(
      codeList(FILTER_CODES.states, 'USPS code (any case; stored upper-case): the state of a facility the event carries.'),
    ),
    programs: Type.Optional(
      codeList(
        FILTER_CODES.programs,
        "ECHO program: a violation's program; for the other events a program of a facility the event carries.",
      ),
    ),
    severities: Type.Optional(
      codeList(
        FILTER_CODES.severities,
        "A violation's severity. Events without a severity (every type but violation.new) are not filtered by it.",
      ),
    ),
    epa_regions: Type.Optional(codeList(FILTER_CODES.epa_regions, 'EPA region, "01"–"10": the region of a facility the event carries.')),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      'Narrows the events: an event must match every list given (a list matches when the event has one of its values; for a case event, any of its facilities). Combines with facility_ids (AND). null or omitted: no filter; PATCH with null clears it.',
  },
);
const ReceiverUrl = Url(
  'Where deliveries are POSTed: `https://`, at most 2048 characters, no user:password, and a public host (not loopback, private, link-local, multicast or a cloud metadata address), checked again against the resolved address at delivery time.',
);

const RateLimit = Type.Integer({
  minimum: RATE_LIMIT_RANGE.min,
  maximum: RATE_LIMIT_RANGE.max,
  description:
    'Most attempts started per second for this subscription, over every dispatcher replica (1–1000); null or omitted: the service default (none unless the operator set one). Held deliveries wait without using an attempt.',
});
const MaxInFlight = Type.Integer({
  minimum: MAX_IN_FLIGHT_RANGE.min,
  maximum: MAX_IN_FLIGHT_RANGE.max,
  description: `Most requests open at once to this subscription, over every dispatcher replica (1–64); ${DEFAULT_MAX_IN_FLIGHT} when omitted at creation.`,
});

export const CreateBody = Type.Object(
  {
    url: ReceiverUrl,
    events: EventList,
    facility_ids: Type.Optional(nullable(FacilityIds)),
    filter: Type.Optional(nullable(Filter)),
    rate_limit_per_second: Type.Optional(nullable(RateLimit)),
    max_in_flight: Type.Optional(MaxInFlight),
  },
  { additionalProperties: false },
);

export const PatchBody = Type.Object(
  {
    url: Type.Optional(ReceiverUrl),
    events: Type.Optional(EventList),
    facility_ids: Type.Optional(nullable(FacilityIds)),
    filter: Type.Optional(nullable(Filter)),
    is_active: Type.Optional(
      Type.Boolean({ description: '`true` reactivates and resets the failure count; `false` deactivates (reason `manual`).' }),
    ),
    rate_limit_per_second: Type.Optional(nullable(RateLimit)),
    max_in_flight: Type.Optional(MaxInFlight),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** Keywords domain/validation.ts checks with its own messages: left out when a body is validated against its schema. */
const CONTENT_KEYWORDS = new Set([
  'format',
  'pattern',
  'maxLength',
  'minLength',
  'minItems',
  'maxItems',
  'uniqueItems',
  'enum',
  'const',
  'minProperties',
]);

/**
 * A request schema reduced to its shape for the body validator: types, unknown fields and numeric ranges.
 * A union of literals (the event types) becomes a string.
 */
export function shapeOnly(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(shapeOnly);
  if (schema === null || typeof schema !== 'object') return schema;
  const node = schema as Record<string, unknown>;
  if (Array.isArray(node.anyOf) && node.anyOf.every((b) => typeof (b as { const?: unknown }).const === 'string')) {
    return { type: 'string' };
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (CONTENT_KEYWORDS.has(key)) continue;
    out[key] =
      key === 'properties' ? Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, shapeOnly(v)])) : shapeOnly(value);
  }
  return out;
}

/** Most a rotation may keep the previous secret signing: 7 days. */
const MAX_OVERLAP_SECONDS = 604_800;

export const RotateBody = Type.Object(
  { overlap_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_OVERLAP_SECONDS })) },
  { additionalProperties: false },
);

export const ListQuery = Type.Object(PageQuery, { additionalProperties: false });

export const IdParams = Type.Object({ id: Type.String() });
/** Routes without query parameters still refuse unknown ones (VALIDATION_ERROR naming the parameter: docs/api.md "Errors"). */
export const NoQuery = Type.Object({}, { additionalProperties: false });

const SubscriptionSchema = Type.Object({
  id: Type.String({ pattern: SubscriptionId.pattern, description: '`wh_` + UUID.' }),
  url: Type.String({
    format: 'uri',
    maxLength: 2048,
    pattern: '^https?://',
    description: 'The receiver (`https://`; `http://` only where the operator allows private destinations for development).',
  }),
  events: Type.Array(EventType, { minItems: 1, uniqueItems: true }),
  facility_ids: Type.Union([Type.Array(Uuid, { minItems: 1, maxItems: 1000, uniqueItems: true }), Type.Null()], {
    description: 'null: every facility.',
  }),
  filter: Type.Union([Filter, Type.Null()], { description: 'null: no filter.' }),
  secret: Type.String({
    pattern: '^whsec_(\\*{8}[A-Za-z0-9+/=_-]{4}|[A-Za-z0-9+/]{43}=)$',
    description:
      'In clear (`whsec_` + standard base64 of 32 random bytes) only in the responses of create and rotate-secret; elsewhere redacted: `whsec_********` + its last 4 characters.',
  }),
  secret_rotation_ends_at: Nullable(
    Timestamp('Until then the previous secret signs too (rotation with overlap); null when there is no overlap.'),
  ),
  is_active: Type.Boolean(),
  created_at: Timestamp(),
  updated_at: Timestamp(),
  deactivated_at: Nullable(Timestamp()),
  deactivation_reason: Type.Union(
    [Type.String({ pattern: '^[a-z0-9_]{1,64}$', examples: ['consecutive_failures', 'manual', 'tier_downgraded'] }), Type.Null()],
    {
      description:
        'Why it was deactivated (null while active): `consecutive_failures` (the last retry of a delivery failed), `manual` (PATCH is_active false), `tier_downgraded` (the account left the Pro tier), or another snake_case reason an operator gave.',
    },
  ),
  rate_limit_per_second: Type.Union([RateLimit, Type.Null()], {
    description: 'Most attempts started per second, over every dispatcher replica; null: the service default.',
  }),
  max_in_flight: MaxInFlight,
});

export const SubscriptionEnvelope = Type.Object({ data: SubscriptionSchema });

export const SubscriptionList = Type.Object({
  data: Type.Array(SubscriptionSchema),
  pagination: Pagination,
});

export const DeliveryParams = Type.Object({ id: Type.String(), delivery_id: Type.String() });

const Millis = (description: string) => Type.Union([Type.Number({ minimum: 0 }), Type.Null()], { description });
const HeaderMap = Type.Record(Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9a-z-]+$" }), Type.String(), { additionalProperties: false });

const AttemptSchema = Type.Object({
  attempt: Type.Integer({ minimum: 1, description: '1 is the first attempt.' }),
  started_at: Timestamp(),
  latency_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'The whole attempt, in ms.' }),
  response_status: Type.Union([Type.Integer({ minimum: 100, maximum: 999 }), Type.Null()], { description: 'null when no response came.' }),
  error: Type.Union([Type.String({ maxLength: 500 }), Type.Null()], { description: 'Why the attempt failed; null on success.' }),
  outcome: Type.Union(
    ATTEMPT_OUTCOMES.map((o) => Type.Literal(o)),
    { description: 'success: a 2xx within the timeout.' },
  ),
  request_headers: Type.Union([HeaderMap, Type.Null()], {
    description:
      'The headers the attempt was sent with (signatures included), as set by the dispatcher; the HTTP client adds host, connection and content-length. The values of Authorization and Proxy-Authorization are never stored: shown as "[redacted]". null for attempts recorded before this was kept.',
  }),
  response_headers: Type.Union([HeaderMap, Type.Null()], {
    description:
      'The response headers (lower-case names; repeated ones joined with ", "); null when no response came. The values of set-cookie, authorization, proxy-authorization and www-authenticate are never stored: the name is kept and the value shown as "[redacted]".',
  }),
  response_headers_truncated: Type.Boolean({ description: 'Headers beyond 8 KiB (names and values) were left out.' }),
  response_body: Type.Union([Type.String(), Type.Null()], {
    description: 'The first 4 KiB of the response body, as UTF-8 (invalid bytes shown as U+FFFD); null when no response came.',
  }),
  response_body_truncated: Type.Boolean({ description: 'The body was longer than 4 KiB and was cut.' }),
  timings: Type.Object(
    {
      dns_ms: Millis('Resolving the host (0 for an IP address).'),
      connect_ms: Millis('The TCP connection.'),
      tls_ms: Millis('The TLS handshake.'),
      first_byte_ms: Millis('From the request being sent to the first byte of the response.'),
      connection_reused: Type.Union([Type.Boolean(), Type.Null()], {
        description: 'Sent on a kept-alive connection: no DNS, connect or TLS step (those are null). null when not recorded.',
      }),
    },
    { description: 'Phase durations in ms (null: the phase did not happen or did not finish).' },
  ),
  subscription_paused: Type.Union(
    [
      Type.Object(
        {
          until: Timestamp('Nothing is sent to the subscription before then.'),
          reason: Type.Union([Type.Literal('retry_after'), Type.Literal('unreachable')], {
            description:
              '`retry_after`: the receiver answered 429 or 503 with Retry-After (at most one hour); `unreachable`: connection failures or timeouts in a row (deliveries are then sent one at a time until one gets an answer).',
          }),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ],
    { description: 'The pause of the whole subscription this attempt started; null when it started none.' },
  ),
});

const DeliverySchema = Type.Object({
  id: Type.String({ pattern: DeliveryId.pattern, description: '`dlv_` + UUID.' }),
  event_id: Type.String({ pattern: EventId.pattern, description: "The event's id: the same on every attempt (`webhook-id`)." }),
  event_type: Type.Union(DELIVERY_EVENT_TYPES.map((t) => Type.Literal(t))),
  status: Type.Union(
    DELIVERY_STATUSES.map((t) => Type.Literal(t)),
    {
      description:
        'pending (an attempt is due at next_attempt_at), succeeded, failed (no retries left), cancelled (the subscription was deactivated).',
    },
  ),
  attempt_count: Type.Integer({ minimum: 0 }),
  next_attempt_at: Nullable(Timestamp('When the next attempt is due; null unless pending.')),
  created_at: Timestamp(),
  updated_at: Timestamp(),
  attempts: Type.Array(AttemptSchema, { description: 'Every attempt, oldest first.' }),
});

export const DeliveryEnvelope = Type.Object({ data: DeliverySchema });

export const DeliveryList = Type.Object({
  data: Type.Array(DeliverySchema),
  pagination: Pagination,
});

/** POST /v1/webhooks/{id}/recover: the window [since, until) of the events' created_at; until defaults to now. */
export const RecoverBody = Type.Object(
  {
    since: Type.String({
      format: 'date-time',
      description:
        "Start of the window (inclusive), RFC 3339 (real dates only: `2026-02-29` or `T24:00` are refused); within the event retention (EVENT_RETENTION_DAYS, 30 by default). Never earlier than the subscription's `created_at`: an earlier `since` starts there.",
    }),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'End of the window (exclusive), RFC 3339; default now.' })),
    dry_run: Type.Optional(Type.Boolean({ description: 'Count the events that would be re-delivered; send nothing.' })),
  },
  { additionalProperties: false },
);

export const RecoveryEnvelope = Type.Object({
  data: Type.Object(
    {
      events: Type.Integer({
        minimum: 0,
        maximum: 10_000,
        description: 'Events enqueued as new deliveries (for a dry run: that would be); at most 10,000 per call.',
      }),
      since: Type.String({
        format: 'date-time',
        description: "Start of the window as applied: the requested `since`, or the subscription's `created_at` when later.",
      }),
      until: Type.String({ format: 'date-time', description: 'End of the window as applied (exclusive).' }),
      next_since: Nullable(
        Type.String({
          format: 'date-time',
          description:
            'Where the window continues: the window held more than 10,000 events to send, and the next call with `since` = this (same `until`) goes on from there, once this recovery is sent (409 before). Null: the window is done.',
        }),
      ),
    },
    { additionalProperties: false },
  ),
});
