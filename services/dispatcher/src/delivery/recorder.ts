import type { AttemptDecision, AttemptRecord, DecisionInput, DeliveryStore, RecordOutcome } from '@fcd/webhooks';
import { Batcher } from './batcher';

export interface RecorderOptions {
  store: DeliveryStore;
  decide: (input: DecisionInput) => AttemptDecision;
  /** How long a completed attempt may wait for others to share its transaction. */
  flushMs: number;
  /** Attempts per transaction at most. */
  maxBatch: number;
}

/**
 * A small write-behind for attempt outcomes: attempts completed within
 * `flushMs` of each other (or while the previous batch is being written) are
 * recorded in one transaction (`DeliveryStore.recordAttempts`), with the same
 * result as recording them one by one in completion order. `record` resolves
 * once its attempt is committed; when a batch fails, its attempts are recorded
 * one at a time.
 *
 * Crash safety: an attempt only ever waits in memory for a few ms after its
 * send. A crash in that window loses the attempt row, and the delivery — still
 * leased, still `pending` — is sent again when the lease ends (at least once;
 * the duplicate carries the same event id). Nothing depends on an outcome
 * before its commit, so none is lost silently.
 */
export class AttemptRecorder {
  private readonly batcher: Batcher<AttemptRecord, RecordOutcome>;

  constructor(o: RecorderOptions) {
    this.batcher = new Batcher({
      run: (items) => o.store.recordAttempts(items, o.decide),
      delayMs: o.flushMs,
      maxBatch: o.maxBatch,
      retryOneByOne: true,
    });
  }

  record(item: AttemptRecord): Promise<RecordOutcome> {
    return this.batcher.add(item);
  }

  /** Writes everything queued now (shutdown). */
  flush(): Promise<void> {
    return this.batcher.flush();
  }
}
