import { eventIdOf, JetStreamSession, subjectFor } from '@fcd/events';
import {
  contextFromColumn,
  errMessage,
  injectTraceContext,
  type Logger,
  type NatsAuthOptions,
  context as otelContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@fcd/service-kit';
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
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

const tracer = trace.getTracer('@fcd/facility');

/**
 * The NATS side of the outbox: one JetStream session (@fcd/events) made in the background (the
 * service starts and serves while NATS is down) that reconnects forever, the stream ensured
 * before publishing, and publishes with Nats-Msg-Id = event id so a republish after a crash is
 * dropped by JetStream's duplicate window.
 */
export class EventBus {
  private readonly session: JetStreamSession;
  private connecting: Promise<void> | undefined;

  constructor(private readonly s: EventBusSettings) {
    this.session = new JetStreamSession({ ...s, name: 'facility-relay', timeoutMs: s.publishTimeoutMs ?? 5000 });
  }

  /** Starts connecting; returns at once. */
  start(): void {
    this.connecting ??= this.session
      .open()
      .then(() => undefined)
      .catch((err: unknown) =>
        this.s.logger.error({ err: { message: errMessage(err) } }, 'nats connection failed; events stay in the outbox'),
      );
  }

  get connected(): boolean {
    return this.session.connected;
  }

  /**
   * Publishes the rows in order on one connection (the server stores them in
   * that order) and waits for every ack. Only acknowledged rows are returned as
   * acked; the caller marks exactly those sent.
   */
  async publish(rows: OutboxRow[]): Promise<PublishResult> {
    const js = this.session.js;
    if (!js || !this.connected) return { acked: [], failed: rows.length, error: 'nats not connected' };
    try {
      // Created when missing (@fcd/events: subjects `<prefix>.>`, duplicate window ≥ 2 min).
      await this.session.ensureStream();
    } catch (err) {
      return { acked: [], failed: rows.length, error: errMessage(err) };
    }
    const results = await Promise.allSettled(rows.map((row) => this.publishOne(js, row)));
    const acked: OutboxRow[] = [];
    let error: string | undefined;
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') acked.push(rows[i] as OutboxRow);
      else error ??= errMessage(r.reason);
    });
    if (error) this.session.streamMayBeLost();
    return { acked, failed: rows.length - acked.length, ...(error ? { error } : {}) };
  }

  /**
   * One publish, traced as a PRODUCER span continuing the trace of the
   * transaction that wrote the row; its context travels in the message
   * headers (traceparent/tracestate) to the consumers.
   */
  private async publishOne(js: JetStreamClient, row: OutboxRow) {
    const subject = subjectFor(this.s.subjectPrefix, row.type);
    const msgID = eventIdOf(row.id);
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
      span.setStatus({ code: SpanStatusCode.ERROR, message: errMessage(err) });
      throw err;
    } finally {
      span.end();
    }
  }

  /** Readiness: connected and the server answers a round trip. */
  async check(): Promise<void> {
    await this.session.check();
  }

  async close(): Promise<void> {
    await this.session.close();
    await this.connecting;
  }
}
