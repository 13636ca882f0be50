import { eventFacets } from '@fcd/webhooks';
import pg from 'pg';
import type { Snapshot } from './history';

/**
 * What the checker reads from the database after the run, straight from Postgres (no proxy):
 * the counted requests, every committed event (the facility outbox: written in the transaction
 * of the change), the subscriptions that still exist and every delivery that did not succeed.
 */
export async function takeSnapshot(url: string): Promise<Snapshot> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const usage = await client.query<{ account: string; day: string; count: string }>(
      `SELECT account_id AS account, to_char(day, 'YYYY-MM-DD') AS day, request_count AS count FROM usage.daily_usage`,
    );
    const outbox = await client.query<{ payload: string; created_at: Date }>(
      'SELECT payload, created_at FROM facility.outbox ORDER BY seq',
    );
    const subs = await client.query<{ id: string; is_active: boolean; deactivated_at: Date | null; deactivation_reason: string | null }>(
      'SELECT id, is_active, deactivated_at, deactivation_reason FROM webhook.subscriptions',
    );
    const unfinished = await client.query<{
      sub: string;
      event: string;
      status: 'pending' | 'failed' | 'cancelled';
      attempts: Array<{ n: number; started_at: string; outcome: string }> | null;
    }>(
      `SELECT d.subscription_id AS sub, d.event_id AS event, d.status,
              (SELECT json_agg(json_build_object('n', a.attempt, 'started_at', a.started_at, 'outcome', a.outcome) ORDER BY a.attempt)
                 FROM webhook.delivery_attempts a WHERE a.delivery_id = d.id) AS attempts
         FROM webhook.deliveries d WHERE d.status <> 'succeeded'`,
    );
    return {
      usage: usage.rows.map((r) => ({ account: r.account, day: r.day, count: Number(r.count) })),
      events: outbox.rows.map((r) => {
        const envelope = JSON.parse(r.payload) as { id: string; type: string; data?: unknown };
        return { id: envelope.id, type: envelope.type, createdAt: r.created_at.getTime(), states: eventFacets(envelope).states ?? [] };
      }),
      subscriptions: subs.rows.map((r) => ({
        id: r.id,
        active: r.is_active,
        deactivatedAt: r.deactivated_at?.getTime() ?? null,
        reason: r.deactivation_reason,
      })),
      unfinished: unfinished.rows.map((r) => ({
        sub: r.sub,
        event: r.event,
        status: r.status,
        attempts: (r.attempts ?? []).map((a) => ({ n: a.n, startedAt: Date.parse(a.started_at), outcome: a.outcome })),
      })),
    };
  } finally {
    await client.end();
  }
}

/** Until no delivery is pending and the outbox has nothing unsent (or the time is up): the system has caught up. */
export async function waitForDrain(url: string, timeoutMs: number): Promise<{ drained: boolean; pending: number; unsent: number }> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    // pending: deliveries not finished; unsent: outbox rows not yet published; lag: published events the dispatchers have not fanned out (the event log records each).
    const client = new pg.Client({ connectionString: url });
    let pending = -1;
    let unsent = -1;
    try {
      await client.connect();
      const r = await client.query<{ pending: number; unsent: number }>(
        `SELECT (SELECT count(*)::int FROM webhook.deliveries WHERE status = 'pending') AS pending,
                (SELECT count(*)::int FROM facility.outbox WHERE sent_at IS NULL)
                  + GREATEST(0, (SELECT count(*)::int FROM facility.outbox) - (SELECT count(*)::int FROM webhook.events)) AS unsent`,
      );
      pending = r.rows[0]?.pending ?? -1;
      unsent = r.rows[0]?.unsent ?? -1;
    } catch {
      // Postgres restarting: try again
    } finally {
      await client.end().catch(() => undefined);
    }
    if (pending === 0 && unsent === 0) return { drained: true, pending, unsent };
    if (Date.now() > until) return { drained: false, pending, unsent };
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
