/** The event types a subscription can list (docs/webhooks.md). */
export const EVENT_TYPES = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * The event envelope (docs/webhooks.md) as far as matching needs it. The
 * records inside `data` carry more fields; only the facility references are read.
 */
export interface EventEnvelope {
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
