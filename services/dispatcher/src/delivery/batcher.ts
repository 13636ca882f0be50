export interface BatcherOptions<I, O> {
  /** Handles a batch; returns one result per item, in order. */
  run: (items: I[]) => Promise<O[]>;
  /** How long the first item waits for company (0: until the end of the current turn of the event loop). */
  delayMs: number;
  /** Items per batch at most (a full batch is started at once). */
  maxBatch: number;
  /** When a batch fails, run its items one by one, so one bad item does not fail the others. */
  retryOneByOne?: boolean;
}

interface Queued<I, O> {
  item: I;
  resolve: (out: O) => void;
  reject: (err: unknown) => void;
}

/**
 * Groups calls made close together into one `run`: the items queued within
 * `delayMs`, or while the previous batch runs, go together. One batch runs at
 * a time. `add` settles when its batch has (each caller gets its own result).
 */
export class Batcher<I, O> {
  private queue: Queued<I, O>[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly o: BatcherOptions<I, O>) {}

  add(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.running) return; // the running loop takes the queue when its batch is done
    if (this.queue.length >= this.o.maxBatch) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.running = this.loop();
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.running ??= this.loop();
      }, this.o.delayMs);
    }
  }

  private async loop(): Promise<void> {
    try {
      while (this.queue.length > 0) await this.runBatch(this.queue.splice(0, this.o.maxBatch));
    } finally {
      this.running = undefined;
    }
  }

  private async runBatch(batch: Queued<I, O>[]): Promise<void> {
    try {
      const out = await this.o.run(batch.map((q) => q.item));
      for (const [i, q] of batch.entries()) q.resolve(out[i] as O);
    } catch (err) {
      if (!this.o.retryOneByOne || batch.length === 1) {
        for (const q of batch) q.reject(err);
        return;
      }
      for (const q of batch) {
        try {
          const [out] = await this.o.run([q.item]);
          q.resolve(out as O);
        } catch (e) {
          q.reject(e);
        }
      }
    }
  }

  /** Runs everything queued now (shutdown). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.running || this.queue.length > 0) {
      this.running ??= this.loop();
      await this.running;
    }
  }
}
