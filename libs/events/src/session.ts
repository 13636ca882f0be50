import { Backoff, errMessage, type Logger, type NatsAuthOptions, WakeableSleep } from '@fcd/service-kit';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { connectWithBackoff } from './connect';
import { type EventsStreamSettings, ensureEventsStream } from './stream';

export interface JetStreamSessionSettings extends EventsStreamSettings {
  /** One NATS URL, or several comma-separated (a cluster): the client reconnects through them. */
  url: string;
  /** Credentials and TLS (`natsOptions(config)`). */
  auth?: NatsAuthOptions;
  /** The connection's name (seen in the server's monitoring). */
  name: string;
  /** Ping interval (ms): how fast a dead server is noticed (default 10 s). */
  pingIntervalMs?: number;
  /** Timeout of JetStream API calls and publishes (ms, default 5 s). */
  timeoutMs?: number;
  logger: Pick<Logger, 'info' | 'warn'>;
  /** The wait between tries (default: its own); `close()` wakes it. A caller may share its own loop's sleep. */
  sleep?: WakeableSleep;
  /** The NATS connect (tests inject it). */
  connect?: (options: ConnectionOptions) => Promise<NatsConnection>;
}

interface Open {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * The one NATS JetStream session of the facility relay and the dispatcher: a connection made in
 * the background with backoff (the service serves while NATS is down) that then reconnects
 * forever, its JetStream clients, the EVENTS stream ensured once per connection (again after a
 * reconnect, or when the caller says it may be lost), a ready flag, and the close.
 */
export class JetStreamSession {
  private current: Open | undefined;
  private up = false;
  private streamReady = false;
  private closing = false;
  private opening: Promise<boolean> | undefined;
  private readonly sleep: WakeableSleep;

  constructor(private readonly s: JetStreamSessionSettings) {
    this.sleep = s.sleep ?? new WakeableSleep();
  }

  /**
   * Connects, trying again with backoff until connected (true) or closed first (false). Calls
   * made while connecting share the attempt; an open session answers true at once.
   */
  open(): Promise<boolean> {
    if (this.isOpen) return Promise.resolve(true);
    this.opening ??= this.connectLoop().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async connectLoop(): Promise<boolean> {
    const backoff = new Backoff({ initialMs: 200, maxMs: 2000, jitter: 0.2 });
    while (!this.closing) {
      const nc = await connectWithBackoff({ ...this.s, isClosing: () => this.closing, sleep: this.sleep });
      if (!nc) return false;
      const timeout = this.s.timeoutMs ?? 5000;
      try {
        const jsm = await jetstreamManager(nc, { timeout, checkAPI: false });
        // Published only once every part is ready, so `connected` never reports a half-made session.
        this.current = { nc, js: jetstream(nc, { timeout }), jsm };
      } catch (err) {
        this.s.logger.warn({ err: { message: errMessage(err) } }, 'jetstream unavailable; reconnecting');
        await nc.close().catch(() => undefined);
        await this.sleep.sleep(backoff.next());
        continue;
      }
      this.up = true;
      this.streamReady = false;
      void this.watch(nc);
      return true;
    }
    return false;
  }

  private async watch(nc: NatsConnection): Promise<void> {
    for await (const st of nc.status()) {
      if (st.type === 'disconnect') {
        this.up = false;
        this.s.logger.warn('nats disconnected');
      } else if (st.type === 'reconnect') {
        this.up = true;
        // The server may have lost the stream (e.g. restarted without storage): check again.
        this.streamReady = false;
        this.s.logger.info('nats reconnected');
      }
    }
  }

  /** A connection exists and is not closed (it may be reconnecting). */
  get isOpen(): boolean {
    return this.current !== undefined && !this.current.nc.isClosed();
  }

  /** Ready for traffic: open, not draining, and not between a disconnect and its reconnect. */
  get connected(): boolean {
    const nc = this.current?.nc;
    return nc !== undefined && !nc.isClosed() && !nc.isDraining() && this.up;
  }

  get js(): JetStreamClient | undefined {
    return this.current?.js;
  }

  get jsm(): JetStreamManager | undefined {
    return this.current?.jsm;
  }

  /** Creates the EVENTS stream when it is missing; checked once per connection (`ensureEventsStream`). */
  async ensureStream(): Promise<void> {
    if (this.streamReady) return;
    const jsm = this.current?.jsm;
    if (!jsm) throw new Error('nats not connected');
    await ensureEventsStream(jsm, this.s, this.s.logger);
    this.streamReady = true;
  }

  /** After a failed publish or a lost consumer: the next `ensureStream` checks the server again. */
  streamMayBeLost(): void {
    this.streamReady = false;
  }

  /** Readiness: connected and the server answers a round trip. */
  async check(): Promise<void> {
    const nc = this.current?.nc;
    if (!nc || !this.connected) throw new Error('not connected');
    await nc.flush();
  }

  /** Stops connecting, drains the connection (closes it when draining fails), and waits for both. */
  async close(): Promise<void> {
    this.closing = true;
    this.sleep.wake();
    const nc = this.current?.nc;
    this.up = false;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
    await this.opening?.catch(() => undefined);
  }
}
