import {
  contextFromColumn,
  injectTraceContext,
  type Logger,
  type NatsAuthOptions,
  natsServers,
  context as otelContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@fcd/service-kit';
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { connect, headers, type NatsConnection, nanos } from '@nats-io/transport-node';
import type { OutboxRow } from './outbox';

export interface EventBusSettings {
  /** One NATS URL, or several comma-separated (a cluster): the client reconnects through them. */
  url: string;
  /** Credentials and TLS (`natsOptions(config)`). */
  auth?: NatsAuthOptions;
  stream: string;
  subjectPrefix: string;
  /** Replicas of the stream when this service creates it (default 1). */
  replicas?: number;
  logger: Logger;
  /** Wait for each JetStream ack at most this long. */
  publishTimeoutMs?: number;
  /** Duplicate window of the stream when this service creates it (≥ 2 min). */
  duplicateWindowMs?: number;
}

export interface PublishResult {
  /** Outbox ids whose publish JetStream acknowledged (stored now, or a duplicate of a stored one). */
  acked: OutboxRow[];
  failed: number;
  error?: string;
}

const MIN_DUPLICATE_WINDOW_MS = 120_000;
const tracer = trace.getTracer('@fcd/facility');

/**
 * The NATS side of the outbox: one connection made in the background (the
 * service starts and serves while NATS is down) that reconnects forever, the
 * stream ensured before publishing, and publishes with Nats-Msg-Id = event id
 * so a republish after a crash is dropped by JetStream's duplicate window.
 */
export class EventBus {
  private nc: NatsConnection | undefined;
  private js: JetStreamClient | undefined;
  private jsm: JetStreamManager | undefined;
  private streamReady = false;
  private closing = false;
  private connecting: Promise<void> | undefined;

  constructor(private readonly s: EventBusSettings) {}

  /** Starts connecting; returns at once. */
  start(): void {
    this.connecting ??= this.connectLoop();
  }

  get connected(): boolean {
    return this.nc !== undefined && !this.nc.isClosed() && !this.nc.isDraining() && this.isUp;
  }

  private isUp = false;

  private async connectLoop(): Promise<void> {
    let delay = 200;
    let warned = false;
    while (!this.closing) {
      try {
        const nc = await connect({
          ...this.s.auth,
          servers: natsServers(this.s.url),
          name: 'facility-relay',
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500,
          timeout: 2000,
          pingInterval: 10_000,
        });
        if (this.closing) {
          await nc.close();
          return;
        }
        this.nc = nc;
        this.isUp = true;
        this.js = jetstream(nc, { timeout: this.s.publishTimeoutMs ?? 5000 });
        this.jsm = await jetstreamManager(nc, { timeout: this.s.publishTimeoutMs ?? 5000, checkAPI: false });
        this.s.logger.info('nats connected');
        void this.watch(nc);
        return;
      } catch (err) {
        if (!warned) this.s.logger.warn({ err: { message: (err as Error).message } }, 'nats unavailable; retrying in the background');
        warned = true;
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 2000);
      }
    }
  }

  private async watch(nc: NatsConnection): Promise<void> {
    for await (const st of nc.status()) {
      if (st.type === 'disconnect') {
        this.isUp = false;
        this.s.logger.warn('nats disconnected');
      } else if (st.type === 'reconnect') {
        this.isUp = true;
        // The server may have lost the stream (e.g. restarted without storage): check again.
        this.streamReady = false;
        this.s.logger.info('nats reconnected');
      }
    }
  }

  /** Creates the stream when it is missing (subjects `<prefix>.>`, duplicate window ≥ 2 min). */
  async ensureStream(): Promise<void> {
    if (this.streamReady) return;
    const jsm = this.jsm;
    if (!jsm) throw new Error('nats not connected');
    try {
      const info = await jsm.streams.info(this.s.stream);
      const windowMs = info.config.duplicate_window / 1e6;
      if (windowMs < MIN_DUPLICATE_WINDOW_MS) {
        this.s.logger.warn({ stream: this.s.stream, duplicate_window_ms: windowMs }, 'stream duplicate window is below 2 minutes');
      }
      const replicas = this.s.replicas ?? 1;
      if ((info.config.num_replicas ?? 1) !== replicas) {
        this.s.logger.warn(
          { stream: this.s.stream, num_replicas: info.config.num_replicas, configured: replicas },
          'stream replicas differ from NATS_STREAM_REPLICAS (an existing stream is not changed)',
        );
      }
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.StreamNotFound) throw err;
      await jsm.streams.add({
        name: this.s.stream,
        subjects: [`${this.s.subjectPrefix}.>`],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        // Events are kept 7 days: deliveries and their retries live in Postgres, so the stream
        // only needs to outlast a dispatcher outage; without a limit it grows until the disk fills.
        max_age: nanos(7 * 24 * 3600 * 1000),
        duplicate_window: nanos(Math.max(MIN_DUPLICATE_WINDOW_MS, this.s.duplicateWindowMs ?? MIN_DUPLICATE_WINDOW_MS)),
        num_replicas: this.s.replicas ?? 1,
      });
      this.s.logger.info(
        { stream: this.s.stream, subjects: `${this.s.subjectPrefix}.>`, replicas: this.s.replicas ?? 1 },
        'stream created',
      );
    }
    this.streamReady = true;
  }

  /**
   * Publishes the rows in order on one connection (the server stores them in
   * that order) and waits for every ack. Only acknowledged rows are returned as
   * acked; the caller marks exactly those sent.
   */
  async publish(rows: OutboxRow[]): Promise<PublishResult> {
    const js = this.js;
    if (!js || !this.connected) return { acked: [], failed: rows.length, error: 'nats not connected' };
    try {
      await this.ensureStream();
    } catch (err) {
      return { acked: [], failed: rows.length, error: (err as Error).message };
    }
    const results = await Promise.allSettled(rows.map((row) => this.publishOne(js, row)));
    const acked: OutboxRow[] = [];
    let error: string | undefined;
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') acked.push(rows[i] as OutboxRow);
      else error ??= (r.reason as Error).message;
    });
    if (error) this.streamReady = false;
    return { acked, failed: rows.length - acked.length, ...(error ? { error } : {}) };
  }

  /**
   * One publish, traced as a PRODUCER span continuing the trace of the
   * transaction that wrote the row; its context travels in the message
   * headers (traceparent/tracestate) to the consumers.
   */
  private async publishOne(js: JetStreamClient, row: OutboxRow) {
    const subject = `${this.s.subjectPrefix}.${row.type}`;
    const msgID = `evt_${row.id}`;
    const span = tracer.startSpan(
      `publish ${subject}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: {
          'messaging.system': 'nats',
          'messaging.operation.type': 'send',
          'messaging.destination.name': subject,
          'messaging.message.id': msgID,
          'fcd.event.type': row.type,
        },
      },
      contextFromColumn(row.trace_context, otelContext.active()),
    );
    const h = headers();
    for (const [k, v] of Object.entries(injectTraceContext(trace.setSpan(otelContext.active(), span)))) h.set(k, v);
    try {
      const ack = await js.publish(subject, row.payload, {
        msgID,
        headers: h,
        expect: { streamName: this.s.stream },
        timeout: this.s.publishTimeoutMs ?? 5000,
      });
      if (ack.duplicate) span.setAttribute('fcd.nats.duplicate', true);
      return ack;
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  }

  /** Readiness: connected and the server answers a round trip. */
  async check(): Promise<void> {
    if (!this.nc || !this.connected) throw new Error('not connected');
    await this.nc.flush();
  }

  async close(): Promise<void> {
    this.closing = true;
    const nc = this.nc;
    this.nc = undefined;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
    await this.connecting?.catch(() => undefined);
  }
}
