import { useState } from 'preact/hooks';
import type { ApiError } from '../api';
import { ErrorNote } from '../ui';

/** The fields of a subscription that the portal edits: the URL, events, facilities and limits. */

export const EVENT_TYPES = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'] as const;

export interface Subscription {
  id: string;
  url: string;
  events: string[];
  facility_ids: string[] | null;
  is_active: boolean;
  max_in_flight: number;
  rate_limit_per_second: number | null;
  secret: string;
  secret_rotation_ends_at: string | null;
  deactivation_reason: string | null;
  created_at: string;
}

export interface WebhookBody {
  url: string;
  events: string[];
  facility_ids: string[] | null;
  max_in_flight: number;
  rate_limit_per_second: number | null;
  is_active?: boolean;
}

interface Props {
  id: string;
  initial?: Subscription;
  submitLabel: string;
  busy: boolean;
  error: ApiError | undefined;
  onSubmit: (body: WebhookBody) => void;
}

function EventChoices({ id, events, setEvents }: { id: string; events: string[]; setEvents: (e: string[]) => void }) {
  return (
    <fieldset>
      <legend>Events</legend>
      {EVENT_TYPES.map((type) => (
        <div class="check" key={type}>
          <input
            type="checkbox"
            id={`${id}-event-${type}`}
            checked={events.includes(type)}
            onChange={(e) => setEvents(e.currentTarget.checked ? [...events, type] : events.filter((x) => x !== type))}
          />
          <label for={`${id}-event-${type}`}>{type}</label>
        </div>
      ))}
    </fieldset>
  );
}

export function WebhookForm({ id, initial, submitLabel, busy, error, onSubmit }: Props) {
  const [url, setUrl] = useState(initial?.url ?? '');
  const [events, setEvents] = useState<string[]>(initial?.events ?? ['violation.new']);
  const [facilities, setFacilities] = useState((initial?.facility_ids ?? []).join('\n'));
  const [inFlight, setInFlight] = useState(String(initial?.max_in_flight ?? 16));
  const [rate, setRate] = useState(initial?.rate_limit_per_second == null ? '' : String(initial.rate_limit_per_second));
  const [active, setActive] = useState(initial?.is_active ?? true);
  const submit = (event: Event) => {
    event.preventDefault();
    const ids = facilities.split(/[\s,]+/).filter(Boolean);
    onSubmit({
      url: url.trim(),
      events,
      facility_ids: ids.length > 0 ? ids : null,
      max_in_flight: Number(inFlight),
      rate_limit_per_second: rate.trim() === '' ? null : Number(rate),
      ...(initial ? { is_active: active } : {}),
    });
  };
  return (
    <form onSubmit={submit}>
      <label for={`${id}-url`}>Endpoint URL (https)</label>
      <input id={`${id}-url`} type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      <EventChoices id={id} events={events} setEvents={setEvents} />
      <label for={`${id}-facilities`}>Facility ids (optional, one per line; empty: every facility)</label>
      <textarea id={`${id}-facilities`} rows={3} value={facilities} onInput={(e) => setFacilities(e.currentTarget.value)} />
      <label for={`${id}-in-flight`}>Most requests open at once (1–64)</label>
      <input
        id={`${id}-in-flight`}
        type="number"
        min={1}
        max={64}
        required
        value={inFlight}
        onInput={(e) => setInFlight(e.currentTarget.value)}
      />
      <label for={`${id}-rate`}>Most attempts per second (1–1000; empty: the service default)</label>
      <input id={`${id}-rate`} type="number" min={1} max={1000} value={rate} onInput={(e) => setRate(e.currentTarget.value)} />
      {initial && (
        <div class="check">
          <input id={`${id}-active`} type="checkbox" checked={active} onChange={(e) => setActive(e.currentTarget.checked)} />
          <label for={`${id}-active`}>Active (deliveries are sent)</label>
        </div>
      )}
      <button type="submit" disabled={busy}>
        {submitLabel}
      </button>
      <ErrorNote error={error} />
    </form>
  );
}
