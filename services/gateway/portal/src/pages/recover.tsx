import { useState } from 'preact/hooks';
import { data } from '../api';
import { count, ErrorNote, Notice, useAction, when } from '../ui';

/** POST /v1/webhooks/{id}/recover: re-deliver the events of a window (docs/webhooks.md, "Recovery"). */

interface Recovery {
  events: number;
  since: string;
  until: string;
  next_since: string | null;
}

/** `2026-11-28T07:05` (a datetime-local value, read as UTC) → RFC 3339. */
const utc = (local: string) => `${local.length === 16 ? `${local}:00` : local}.000Z`;

export function Recover({ id, onRecovered }: { id: string; onRecovered: () => void }) {
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [dryRun, setDryRun] = useState(true);
  const [result, setResult] = useState<(Recovery & { dryRun: boolean }) | undefined>(undefined);
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    setResult(undefined);
    const body = { since: utc(since), ...(until ? { until: utc(until) } : {}), dry_run: dryRun };
    const recovered = await action.run(() => data<Recovery>('POST', `/v1/webhooks/${id}/recover`, body));
    if (recovered) {
      setResult({ ...recovered, dryRun });
      if (!dryRun) onRecovered();
    }
  };
  return (
    <section class="card" aria-labelledby="recover-title">
      <h2 id="recover-title">Recover a window</h2>
      <p>Re-deliver the events of a time window that this webhook did not receive. Times are UTC.</p>
      <form onSubmit={submit}>
        <label for="recover-since">From (UTC)</label>
        <input id="recover-since" type="datetime-local" required value={since} onInput={(e) => setSince(e.currentTarget.value)} />
        <label for="recover-until">Until (UTC, optional: now)</label>
        <input id="recover-until" type="datetime-local" value={until} onInput={(e) => setUntil(e.currentTarget.value)} />
        <div class="check">
          <input id="recover-dry-run" type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.currentTarget.checked)} />
          <label for="recover-dry-run">Only count the events (dry run)</label>
        </div>
        <button type="submit" disabled={action.busy}>
          {dryRun ? 'Count events' : 'Recover events'}
        </button>
        <ErrorNote error={action.error} />
      </form>
      {result && (
        <Notice>
          {count(result.events)} {result.events === 1 ? 'event' : 'events'} {result.dryRun ? 'would be' : 'are being'} re-delivered,{' '}
          {when(result.since)} to {when(result.until)}
          {result.next_since && `; the window goes on from ${when(result.next_since)}: recover again from there once these are sent`}.
        </Notice>
      )}
    </section>
  );
}
