import { EventId, StringEnum } from '@fcd/service-kit/pure';
import { type Static, type TSchema, Type } from '@sinclair/typebox';

// The code lists the events carry (states, programs, severities, EPA regions).
export * from './codes';

/** The event types the facility service publishes and a subscription can list (docs/webhooks.md). */
export const EVENT_TYPES = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'] as const;

export const EventTypeSchema = StringEnum(EVENT_TYPES, { description: 'The event type.' });
export type EventType = Static<typeof EventTypeSchema>;

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}

/** Event ids are issued as `evt_` and a uuid (the facility outbox's primary key) and accepted as service-kit's EventId. */
export const EVENT_ID_PREFIX = 'evt_';

/**
 * The JSON schema of the envelope (docs/webhooks.md) around a `data` schema: keys in the order
 * id, type, created_at, data. `type` is one event type when given, any of them otherwise.
 */
export function EventEnvelopeSchema<D extends TSchema, T extends EventType = EventType>(data: D, type?: T) {
  return Type.Object({
    id: Type.String({ pattern: EventId.pattern, description: 'Event id, `evt_<uuid>`: the `webhook-id` of its deliveries.' }),
    type: type === undefined ? EventTypeSchema : Type.Literal(type),
    created_at: Type.String({ format: 'date-time' }),
    data,
  });
}

/** Any envelope, `data` left open: what a consumer reads before it knows the type. */
export const AnyEventEnvelopeSchema = EventEnvelopeSchema(Type.Record(Type.String(), Type.Unknown()));

/** The event envelope, as published on JetStream and delivered to webhooks. */
export interface EventEnvelope<T extends EventType = EventType, D = Record<string, unknown>> {
  id: string;
  type: T;
  created_at: string;
  data: D;
}

/** An envelope: a new event id (`evt_<uuid>`) from `ids`. */
export function envelope<T extends EventType, D>(type: T, data: D, createdAt: string, ids: () => string): EventEnvelope<T, D> {
  return { id: `${EVENT_ID_PREFIX}${ids()}`, type, created_at: createdAt, data };
}

/** The JetStream subject of an event type: `<prefix>.<type>`, e.g. `events.violation.new`. */
export function subjectFor(prefix: string, type: string): string {
  return `${prefix}.${type}`;
}

/** The subjects of every event type under a prefix (the stream's and the consumer's filter). */
export function subjectsOf(prefix: string): string {
  return `${prefix}.>`;
}

/** The uuid part of an event id (the outbox primary key). */
export function eventUuid(eventId: string): string {
  return eventId.startsWith(EVENT_ID_PREFIX) ? eventId.slice(EVENT_ID_PREFIX.length) : eventId;
}

/** The event id of an outbox uuid (also the Nats-Msg-Id JetStream de-duplicates on). */
export function eventIdOf(uuid: string): string {
  return `${EVENT_ID_PREFIX}${uuid}`;
}
