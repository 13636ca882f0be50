import { useCallback, useEffect, useState } from 'preact/hooks';
import { call, data, type Page } from '../api';
import { ErrorNote, Loading, Notice, useAction, when } from '../ui';

/** A subscription's delivery log (newest first), each attempt's details, retry and a test event. */

interface Attempt {
  attempt: number;
  started_at: string;
  outcome: 'success' | 'failure';
  response_status: number | null;
  latency_ms: number | null;
  error: string | null;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  response_body_truncated: boolean;
  timings: { dns_ms: number | null; connect_ms: number | null; tls_ms: number | null; first_byte_ms: number | null };
}

interface Delivery {
  id: string;
  event_id: string;
  event_type: string;
  status: string;
  attempt_count: number;
  next_attempt_at: string | null;
  created_at: string;
  attempts: Attempt[];
}

const headerLines = (headers: Record<string, string> | null) =>
  headers
    ? Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}`)
        .join('\n')
    : '(none)';

function AttemptDetails({ a }: { a: Attempt }) {
  const t = a.timings;
  const ms = (n: number | null) => (n === null ? '—' : `${n.toFixed(1)} ms`);
  return (
    <li class="attempt" data-testid="attempt">
      <p>
        <strong>Attempt {a.attempt}</strong> · {when(a.started_at)} · {a.outcome} · HTTP {a.response_status ?? 'no answer'} ·{' '}
        {a.latency_ms === null ? '—' : `${a.latency_ms} ms`}
      </p>
      {a.error && <p class="error-text">Error: {a.error}</p>}
      <p class="muted">
        DNS {ms(t.dns_ms)}, connect {ms(t.connect_ms)}, TLS {ms(t.tls_ms)}, first byte {ms(t.first_byte_ms)}
      </p>
      <details>
        <summary>Request and response of attempt {a.attempt}</summary>
        <h5>Request headers</h5>
        <pre>{headerLines(a.request_headers)}</pre>
        <h5>Response headers</h5>
        <pre>{headerLines(a.response_headers)}</pre>
        <h5>Response body{a.response_body_truncated ? ' (first 4 KiB)' : ''}</h5>
        <pre>{a.response_body ?? '(none)'}</pre>
      </details>
    </li>
  );
}

function DeliveryItem({ webhookId, d, onRetried }: { webhookId: string; d: Delivery; onRetried: () => void }) {
  const action = useAction();
  const retry = async () => {
    if (await action.run(() => data('POST', `/v1/webhooks/${webhookId}/deliveries/${d.id}/retry`))) onRetried();
  };
  return (
    <li class="item" data-testid="delivery" data-delivery-id={d.id} data-status={d.status} data-attempts={d.attempt_count}>
      <h3>
        {d.event_type} <span class={`badge ${d.status}`}>{d.status}</span>
      </h3>
      <p>
        <code>{d.event_id}</code> · created {when(d.created_at)} · {d.attempt_count} {d.attempt_count === 1 ? 'attempt' : 'attempts'}
        {d.next_attempt_at && ` · next attempt ${when(d.next_attempt_at)}`}
      </p>
      <details>
        <summary>
          Attempts of {d.event_type} {d.id.slice(-6)}
        </summary>
        <ol class="attempts">
          {d.attempts.map((a) => (
            <AttemptDetails key={a.attempt} a={a} />
          ))}
        </ol>
      </details>
      {d.status !== 'pending' && (
        <button type="button" class="secondary" onClick={retry} disabled={action.busy}>
          Retry delivery {d.id.slice(-6)}
        </button>
      )}
      <ErrorNote error={action.error} />
    </li>
  );
}

function useDeliveries(id: string, version: number) {
  const [pages, setPages] = useState<Page<Delivery>[]>([]);
  const action = useAction();
  const load = useCallback(
    async (cursor?: string) => {
      const query = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
      const page = await action.run(() => call<Page<Delivery>>('GET', `/v1/webhooks/${id}/deliveries?limit=25${query}`));
      if (page) setPages((before) => (cursor ? [...before, page] : [page]));
    },
    [id, action.run],
  );
  useEffect(() => {
    void load();
  }, [load, version]);
  return { pages, load, action };
}

export function DeliveryLog({ id, version, refresh }: { id: string; version: number; refresh: () => void }) {
  const { pages, load, action } = useDeliveries(id, version);
  const test = useAction();
  const [sent, setSent] = useState<Delivery | undefined>(undefined);
  const sendTest = async () => {
    setSent(undefined);
    const delivery = await test.run(() => data<Delivery>('POST', `/v1/webhooks/${id}/test`));
    if (delivery) {
      setSent(delivery);
      refresh();
    }
  };
  const deliveries = pages.flatMap((p) => p.data);
  const next = pages[pages.length - 1]?.pagination;
  return (
    <section class="card" aria-labelledby="log-title">
      <h2 id="log-title">Delivery log</h2>
      <div class="actions">
        <button type="button" onClick={sendTest} disabled={test.busy}>
          Send a test event
        </button>
        <button type="button" class="secondary" onClick={refresh} disabled={action.busy}>
          Refresh the log
        </button>
      </div>
      {sent && <Notice>Test event {sent.event_id} sent.</Notice>}
      <ErrorNote error={test.error ?? action.error} />
      {pages.length === 0 && !action.error && <Loading what="deliveries" />}
      {pages.length > 0 && deliveries.length === 0 && <p>No deliveries yet.</p>}
      <ul class="list">
        {deliveries.map((d) => (
          <DeliveryItem key={d.id} webhookId={id} d={d} onRetried={refresh} />
        ))}
      </ul>
      {next?.has_more && next.next_cursor && (
        <button type="button" class="secondary" onClick={() => load(next.next_cursor as string)} disabled={action.busy}>
          Older deliveries
        </button>
      )}
    </section>
  );
}
