import { useCallback, useEffect, useState } from 'preact/hooks';
import { call, type Page } from '../api';
import { ErrorNote, Loading, PageTitle, useAction, when } from '../ui';
import { EVENT_TYPES } from './webhook-form';

/** GET /v1/events: the event log, oldest first, filtered by type, facility and time (docs/api.md, "Events API"). */

interface EventEnvelope {
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

interface Filters {
  type: string;
  facility: string;
  since: string;
}

function queryOf(filters: Filters, cursor?: string): string {
  const q = new URLSearchParams({ limit: '25' });
  if (filters.type) q.set('type', filters.type);
  if (filters.facility.trim()) q.set('facility_id', filters.facility.trim());
  if (filters.since) q.set('since', `${filters.since.length === 16 ? `${filters.since}:00` : filters.since}.000Z`);
  if (cursor) q.set('cursor', cursor);
  return q.toString();
}

function FilterForm({ onApply }: { onApply: (f: Filters) => void }) {
  const [filters, setFilters] = useState<Filters>({ type: '', facility: '', since: '' });
  const set = (field: keyof Filters) => (e: { currentTarget: { value: string } }) =>
    setFilters({ ...filters, [field]: e.currentTarget.value });
  const submit = (event: Event) => {
    event.preventDefault();
    onApply(filters);
  };
  return (
    <form onSubmit={submit} class="card filters" aria-label="Filter events">
      <label for="events-type">Type</label>
      <select id="events-type" value={filters.type} onChange={set('type')}>
        <option value="">Every type</option>
        {EVENT_TYPES.map((t) => (
          <option key={t} value={t}>
            {t}
          </option>
        ))}
      </select>
      <label for="events-facility">Facility id (optional)</label>
      <input id="events-facility" value={filters.facility} onInput={set('facility')} />
      <label for="events-since">Since (UTC, optional)</label>
      <input id="events-since" type="datetime-local" value={filters.since} onInput={set('since')} />
      <button type="submit">Show events</button>
    </form>
  );
}

function EventItem({ event }: { event: EventEnvelope }) {
  return (
    <li class="item" data-testid="event">
      <h3>{event.type}</h3>
      <p>
        <code>{event.id}</code> · {when(event.created_at)}
      </p>
      <details>
        <summary>Data of {event.id}</summary>
        <pre>{JSON.stringify(event.data, null, 2)}</pre>
      </details>
    </li>
  );
}

export function EventsPage() {
  const [filters, setFilters] = useState<Filters>({ type: '', facility: '', since: '' });
  const [pages, setPages] = useState<Page<EventEnvelope>[]>([]);
  const action = useAction();
  const load = useCallback(
    async (cursor?: string) => {
      const page = await action.run(() => call<Page<EventEnvelope>>('GET', `/v1/events?${queryOf(filters, cursor)}`));
      if (page) setPages((before) => (cursor ? [...before, page] : [page]));
    },
    [filters, action.run],
  );
  useEffect(() => {
    setPages([]);
    void load();
  }, [load]);
  const events = pages.flatMap((p) => p.data);
  const next = pages[pages.length - 1]?.pagination;
  return (
    <>
      <PageTitle>Events</PageTitle>
      <p>Every event the API has published, oldest first, kept for 30 days by default: the same envelopes webhooks carry.</p>
      <FilterForm onApply={setFilters} />
      <section aria-labelledby="events-title">
        <h2 id="events-title">Events</h2>
        <ErrorNote error={action.error} />
        {pages.length === 0 && !action.error && <Loading what="events" />}
        {pages.length > 0 && events.length === 0 && <p>No events match.</p>}
        <ul class="list">
          {events.map((e) => (
            <EventItem key={e.id} event={e} />
          ))}
        </ul>
        {next?.has_more && next.next_cursor && (
          <button type="button" class="secondary" onClick={() => load(next.next_cursor as string)} disabled={action.busy}>
            More events
          </button>
        )}
      </section>
    </>
  );
}
