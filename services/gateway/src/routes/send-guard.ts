import { Readable } from 'node:stream';

export interface SendGuardOptions {
  /** The reader took nothing for this long while a chunk waited: the body is cut. */
  sendTimeoutMs: number;
  /**
   * Called once at the cut, the source stopped: what to queue before the end (the rest of what is
   * in memory and a closing line), or null to end in error (no clean end: the connection is cut).
   */
  onStall(): Array<Buffer | string> | null;
  /** Timers (tests pass fake ones). */
  timers?: { setTimeout: typeof setTimeout; clearTimeout: typeof clearTimeout };
}

/**
 * A response body over an async source that cuts a stalled reader (docs/api.md, "Bulk export").
 * Chunks are taken from the source only as the reader takes them (one chunk past the stream's
 * buffer). When a chunk has waited `sendTimeoutMs` for the reader to want more, the source is
 * stopped (no further page is fetched) and `onStall` says what to queue before the end, or that the
 * body ends in error. A reader that comes back gets what was queued and a clean end; one that does
 * not is the caller's to close (the queued bytes cannot be delivered to a socket nobody reads).
 */
export class SendGuard extends Readable {
  private pulling = false;
  private stopped = false;
  private stalled = false;
  private stallTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly timers: NonNullable<SendGuardOptions['timers']>;

  constructor(
    private readonly source: AsyncGenerator<Buffer | string, void>,
    private readonly options: SendGuardOptions,
  ) {
    super();
    this.timers = options.timers ?? { setTimeout, clearTimeout };
  }

  /** True once the reader was cut for stalling. */
  get cut(): boolean {
    return this.stalled;
  }

  override _read(): void {
    this.clearStall();
    if (!this.pulling && !this.stopped) void this.pull();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.clearStall();
    this.stopped = true;
    // Ends the source (a pending page fetch finishes first; nothing after it is fetched).
    this.source.return(undefined).catch(() => undefined);
    callback(err);
  }

  private async pull(): Promise<void> {
    this.pulling = true;
    try {
      for (;;) {
        const { value, done } = await this.source.next();
        if (this.stopped || this.destroyed) break;
        if (done) {
          this.push(null);
          break;
        }
        if (!this.push(value)) {
          this.stallTimer = this.timers.setTimeout(() => this.stall(), this.options.sendTimeoutMs);
          break;
        }
      }
      this.pulling = false;
    } catch (err) {
      this.pulling = false;
      this.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private clearStall(): void {
    if (this.stallTimer === undefined) return;
    this.timers.clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
  }

  private stall(): void {
    this.stallTimer = undefined;
    if (this.stopped || this.destroyed) return;
    this.stopped = true;
    this.stalled = true;
    this.source.return(undefined).catch(() => undefined);
    const rest = this.options.onStall();
    if (rest === null) {
      this.destroy(new Error('The reader took nothing within the send timeout.'));
      return;
    }
    for (const chunk of rest) this.push(chunk);
    this.push(null);
  }
}
