import type { AttemptDecision, AttemptRecord, DecisionInput, DeliveryStore, RecordOutcome } from '@fcd/webhooks';

export interface RecorderOptions {
  store: DeliveryStore;
  decide: (input: DecisionInput) => AttemptDecision;
  /** How long a completed attempt may wait for others to share its transaction. */
  flushMs: number;
  /** Attempts per transaction at most (a full batch is flushed at once). */
  maxBatch: number;
}

interface Queued {
  item: AttemptRecord;
  resolve: (outcome: RecordOutcome) => void;
  reject: (err: unknown) => void;
}

/**
 * A small write-behind for attempt outcomes: attempts completed within
 * `flushMs` of each other (or while the previous batch is being written) are
 * recorded in one transaction (`DeliveryStore.recordAttempts`), with the same
 * result as recording them one by one in completion order. `record` resolves
 * once its attempt is committed.
 *
 * Crash safety: an attempt is only ever waiting in memory for a few ms after
 * its send. A crash in that window loses the attempt row, and the delivery —
 * still leased, still `pending` — is sent again when the lease ends (at least
 * once; the duplicate carries the same event id). Nothing is acknowledged to
 * anyone before the commit, so no outcome is ever lost silently.
 */
export class AttemptRecorder {
  private queue: Queued[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(private readonly o: RecorderOptions) {}

  record(item: AttemptRecord): Promise<RecordOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.flushing) return; // the running flush takes the queue when it is done
    if (this.queue.length >= this.o.maxBatch) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.flushing = this.flushLoop();
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.flushing ??= this.flushLoop();
      }, this.o.flushMs);
    }
  }

  /** Writes batches until the queue is empty (what arrived while writing goes in the next batch). */
  private async flushLoop(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.o.maxBatch);
        await this.write(batch);
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async write(batch: Queued[]): Promise<void> {
    try {
      const outcomes = await this.o.store.recordAttempts(
        batch.map((q) => q.item),
        this.o.decide,
      );
      for (const [i, q] of batch.entries()) q.resolve(outcomes[i] as RecordOutcome);
    } catch (err) {
      if (batch.length === 1) {
        batch[0]?.reject(err);
        return;
      }
      // One at a time, so one bad item does not cost the others their record.
      for (const q of batch) {
        try {
          const [outcome] = await this.o.store.recordAttempts([q.item], this.o.decide);
          q.resolve(outcome as RecordOutcome);
        } catch (e) {
          q.reject(e);
        }
      }
    }
  }

  /** Writes everything queued now (shutdown). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.flushing || this.queue.length > 0) {
      this.flushing ??= this.flushLoop();
      await this.flushing;
    }
  }
}
