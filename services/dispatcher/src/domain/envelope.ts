import { EventId } from '@fcd/service-kit/pure';
import { eventFacets, eventFacilityIds, type FanOutEvent, type MatchableEvent } from '@fcd/webhooks/pure';

export type ParsedEvent = { ok: true; event: FanOutEvent; createdAt: number } | { ok: false; reason: string };

/**
 * A JetStream message body → the event the fan-out needs. The body is kept
 * byte for byte (it is what receivers get and what is signed); a body that is
 * not an envelope is refused with a reason (the consumer terminates it).
 */
export function parseEvent(body: string): ParsedEvent {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, reason: 'not an object' };
  const e = value as Partial<MatchableEvent>;
  if (typeof e.id !== 'string' || !EventId.is(e.id)) return { ok: false, reason: 'missing or malformed id' };
  if (typeof e.type !== 'string' || e.type.length === 0 || e.type.length > 100) return { ok: false, reason: 'missing type' };
  if (typeof e.data !== 'object' || e.data === null) return { ok: false, reason: 'missing data' };
  const createdAt = typeof e.created_at === 'string' ? Date.parse(e.created_at) : Number.NaN;
  return {
    ok: true,
    event: { id: e.id, type: e.type, body, facilityIds: eventFacilityIds(e as MatchableEvent), facets: eventFacets(e as MatchableEvent) },
    createdAt: Number.isNaN(createdAt) ? 0 : createdAt,
  };
}

/**
 * The event's created_at, for the commit-to-attempt metric. The envelope's keys come in the
 * contract's order (id, type, created_at, data), so it is read from the body's start rather than
 * by parsing every body in full; a body in another shape is parsed.
 */
export function eventCreatedAt(body: string): number | undefined {
  const head = /^\{"id":"[^"]*","type":"[^"]*","created_at":"([^"]{1,40})"/.exec(body);
  try {
    const t = Date.parse(head?.[1] ?? (JSON.parse(body) as { created_at?: string }).created_at ?? '');
    return Number.isNaN(t) ? undefined : t;
  } catch {
    return undefined;
  }
}
