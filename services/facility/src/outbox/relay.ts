import type { Clock, Logger, Pool, Worker } from '@fcd/service-kit';
import { Backoff, errMessage, isoTimestamp, WakeableSleep, withTransactionFrom } from '@fcd/service-kit';
import type { Counter } from 'prom-client';
import type { EventBus } from '../store/event-bus';
import { claimBatchSql, deleteSentBefore, markSent, type OutboxRow } from '../store/outbox';

export interface RelaySettings {
  pool: Pool;
  bus: Pick<EventBus, 'publish' | 'connected'>;
  clock: Clock;
  logger: Logger;
  batchSize: number;
  pollMs: number;
  retentionHours: number;
  eventsPublished?: Pick<Counter<'type'>, 'inc'>;
}

/**
 * The outbox relay: claims a batch of unsent rows (FOR UPDATE SKIP LOCKED),
 * publishes them to JetStream, waits for the acks and marks the acknowledged
 * rows sent in the same transaction. A crash between publish and commit leaves
 * the rows unsent; they are published again with the same Nats-Msg-Id and
 * JetStream drops the duplicates.
 */
export class OutboxRelay implements Worker {
  readonly name = 'outbox relay';
  private alone: { controller: AbortController; loop: Promise<void> } | undefined;
  /** The wait between batches; a nudge or the stop ends it. */
  private readonly sleep = new WakeableSleep();
  private lastCleanup = 0;

  constructor(private readonly s: RelaySettings) {}

  /** Runs the relay on its own, outside a supervisor (tests). */
  start(): void {
    if (this.alone) return;
    const controller = new AbortController();
    this.alone = { controller, loop: this.run(controller.signal) };
  }

  /** New outbox rows were committed: publish without waiting for the next poll. */
  nudge(): void {
    this.sleep.wake();
  }

  /** Stops what start() started, after the current batch. */
  async stop(): Promise<void> {
    this.alone?.controller.abort();
    await this.alone?.loop;
  }

  /**
   * One claim–publish–mark cycle. Returns how many rows were marked sent, and
   * whether the batch was full (more may be waiting).
   */
  async relayOnce(): Promise<{ sent: number; full: boolean; failed: number }> {
    // withTransactionFrom holds the client with an 'error' listener: the connection may be cut
    // (failover, terminate) while this batch waits on NATS, idle in its transaction. The claim
    // goes out with the BEGIN, in one round trip.
    const out = await withTransactionFrom(this.s.pool, claimBatchSql(this.s.batchSize), async (client, rows: OutboxRow[]) => {
      if (rows.length === 0) return undefined;
      const result = await this.s.bus.publish(rows);
      await markSent(
        client,
        result.acked.map((r) => r.id),
        isoTimestamp(this.s.clock.now()),
      );
      return { rows, result };
    });
    if (!out) return { sent: 0, full: false, failed: 0 };
    const { rows, result } = out;
    for (const r of result.acked) this.s.eventsPublished?.inc({ type: r.type });
    if (result.failed > 0) this.s.logger.warn({ failed: result.failed, error: result.error }, 'outbox publish failed; will retry');
    return { sent: result.acked.length, full: rows.length === this.s.batchSize && result.failed === 0, failed: result.failed };
  }

  /** Claims and publishes batches until the signal aborts, then returns after the current batch. */
  async run(signal: AbortSignal): Promise<void> {
    // After a failure: pollMs doubling up to 5 s, so a NATS or Postgres outage is not hammered.
    const backoff = new Backoff({ initialMs: this.s.pollMs, maxMs: Math.max(this.s.pollMs, 5000), jitter: 0.2 });
    signal.addEventListener('abort', () => this.sleep.wake(), { once: true });
    while (!signal.aborted) {
      let wait = this.s.pollMs;
      if (this.s.bus.connected) {
        try {
          const r = await this.relayOnce();
          if (r.full) wait = 0;
          if (r.failed > 0) wait = backoff.next();
          else backoff.reset();
          await this.cleanup();
        } catch (err) {
          this.s.logger.warn({ err: { message: errMessage(err) } }, 'outbox relay batch failed; will retry');
          wait = backoff.next();
        }
      }
      // A nudge that arrived during the batch is latched: the sleep returns at once.
      if (wait > 0 && !signal.aborted) await this.sleep.sleep(wait);
    }
  }

  private async cleanup(): Promise<void> {
    if (this.s.retentionHours <= 0) return;
    const now = this.s.clock.now();
    if (now - this.lastCleanup < 60_000) return;
    this.lastCleanup = now;
    const before = isoTimestamp(now - this.s.retentionHours * 3_600_000);
    const deleted = await deleteSentBefore(this.s.pool, before);
    if (deleted > 0) this.s.logger.info({ deleted }, 'deleted old sent outbox rows');
  }
}
