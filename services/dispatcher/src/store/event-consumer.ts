import { isConsumerNotFound, JetStreamSession, subjectsOf } from '@fcd/events';
import {
  Backoff,
  context,
  errMessage,
  extractTraceContext,
  type Logger,
  type NatsAuthOptions,
  SpanKind,
  SpanStatusCode,
  type TraceCarrier,
  trace,
  WakeableSleep,
  waitAtMost,
} from '@fcd/service-kit';
import { AckPolicy, DeliverPolicy, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';

export type Verdict = { ack: true } | { ack: false; retryInMs: number } | { term: string };

export interface EventConsumerSettings {
  /** One NATS URL, or several comma-separated (a cluster): the client reconnects through them. */
  url: string;
  /** Credentials and TLS (`natsOptions(config)`). */
  auth?: NatsAuthOptions;
  stream: string;
  subjectPrefix: string;
  /** Replicas of the stream when this service creates it (default 1); the consumer inherits them. */
  replicas?: number;
  consumer: string;
  deliverPolicy: 'all' | 'new';
  batch: number;
  logger: Logger;
  /** Handles one event body; the verdict becomes ack, nak(delay) or term. */
  handle: (body: string) => Promise<Verdict>;
  /** Events not yet acknowledged by the consumer (metrics). */
  onPending?: (pending: number) => void;
}

const tracer = trace.getTracer('@fcd/dispatcher');

/** The W3C trace context the publisher put in the message headers. */
function traceCarrier(m: JsMsg): TraceCarrier | undefined {
  const traceparent = m.headers?.get('traceparent');
  if (!traceparent) return undefined;
  const tracestate = m.headers?.get('tracestate');
  return tracestate ? { traceparent, tracestate } : { traceparent };
}
const ACK_WAIT_MS = 30_000;
/** How long stop() lets the consume loop nak what it pulled but did not handle: a stuck NATS must not hang shutdown. */
const STOP_DRAIN_MS = 3000;

/**
 * The durable pull consumer of EVENTS, shared by every dispatcher replica
 * (each message goes to one of them). Connects in the background and retries
 * forever (the service starts and serves while NATS is down), creates the
 * stream (same settings as the facility relay) and the consumer when missing,
 * and handles up to `batch` messages at a time. A message is acknowledged
 * only after its deliveries are committed, so a crash redelivers it (and the
 * fan-out is idempotent).
 */
export class EventConsumer {
  private readonly session: JetStreamSession;
  private ready = false;
  private stopping = false;
  private loop: Promise<void> | undefined;
  /** The current consume pass; stop() waits for it to nak what it holds before closing the connection. */
  private consuming: Promise<void> | undefined;
  private stopCurrent: (() => void) | undefined;
  private pendingTimer: NodeJS.Timeout | undefined;
  private readonly handling = new Set<Promise<void>>();
  /** The wait between tries; woken at stop. */
  private readonly sleep = new WakeableSleep();
  /** Ends the wait for a free handler (`waitForSlot`); called at stop. */
  private wakeSlotWait: (() => void) | undefined;

  constructor(private readonly s: EventConsumerSettings) {
    this.session = new JetStreamSession({ ...s, name: `dispatcher-${s.consumer}`, pingIntervalMs: 5000, sleep: this.sleep });
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** The stream (@fcd/events, as the facility relay creates it) and the durable consumer, created when missing. */
  private async ensure(): Promise<void> {
    await this.session.ensureStream();
    const jsm = this.session.jsm;
    if (!jsm) throw new Error('nats not connected');
    try {
      await jsm.consumers.info(this.s.stream, this.s.consumer);
    } catch (err) {
      if (!isConsumerNotFound(err)) throw err;
      await jsm.consumers.add(this.s.stream, {
        durable_name: this.s.consumer,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: this.s.deliverPolicy === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
        filter_subject: subjectsOf(this.s.subjectPrefix),
        ack_wait: nanos(ACK_WAIT_MS),
        max_ack_pending: Math.max(1000, this.s.batch * 4),
      });
      this.s.logger.info({ stream: this.s.stream, consumer: this.s.consumer }, 'consumer created');
    }
  }

  private async run(): Promise<void> {
    const backoff = new Backoff({ initialMs: 200, maxMs: 2000, jitter: 0.2 });
    let warned = false;
    while (!this.stopping) {
      try {
        if (!(await this.session.open())) break;
        await this.ensure();
        this.ready = true;
        backoff.reset();
        warned = false;
        this.pollPending();
        this.consuming = this.consume();
        await this.consuming;
      } catch (err) {
        this.ready = false;
        // Ensured again before the next consume: the consumer may be gone with its stream.
        this.session.streamMayBeLost();
        if (!warned) this.s.logger.warn({ err: { message: errMessage(err) } }, 'event consumer unavailable; retrying');
        warned = true;
      }
      if (this.stopping) break;
      await this.sleep.sleep(backoff.next());
    }
  }

  private async consume(): Promise<void> {
    const js = this.session.js;
    if (!js) throw new Error('nats not connected');
    const consumer = await js.consumers.get(this.s.stream, this.s.consumer);
    const messages = await consumer.consume({ max_messages: this.s.batch, expires: 5000, idle_heartbeat: 2000 });
    this.stopCurrent = () => messages.stop();
    // Stopped while the consume call was in flight: the iterator still ends after what it holds.
    if (this.stopping) messages.stop();
    void (async () => {
      for await (const st of messages.status()) {
        if (st.type === 'consumer_not_found' || st.type === 'consumer_deleted' || st.type === 'stream_not_found') {
          this.s.logger.warn({ status: st.type }, 'consumer lost; re-creating');
          this.ready = false;
          messages.stop();
        }
      }
    })().catch(() => undefined);
    // After stop the iterator still yields what it had pulled, then ends (messages.stop() queues its
    // end behind them). Those are naked without delay so another replica takes them now, not after
    // the ack wait.
    for await (const m of messages) {
      if (!this.stopping && this.handling.size >= this.s.batch) await this.waitForSlot();
      if (this.stopping) {
        m.nak();
        continue;
      }
      const p: Promise<void> = this.handleOne(m).finally(() => this.handling.delete(p));
      this.handling.add(p);
    }
    await Promise.allSettled([...this.handling]);
    if (!this.stopping) throw new Error('consume ended');
  }

  /** Until a handler finishes, or stop (then the message waiting for it is naked, not handled). */
  private waitForSlot(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.wakeSlotWait = resolve;
      Promise.race(this.handling).then(resolve, reject);
    });
  }

  /** One message, traced as a CONSUMER span, child of the publisher's span carried in the headers. */
  private async handleOne(m: JsMsg): Promise<void> {
    const span = tracer.startSpan(
      `process ${m.subject}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.system': 'nats',
          'messaging.operation.type': 'process',
          'messaging.destination.name': m.subject,
          'messaging.consumer.group.name': this.s.consumer,
          'fcd.nats.stream_sequence': m.seq,
          'fcd.nats.redelivery_count': m.info.deliveryCount,
        },
      },
      extractTraceContext(traceCarrier(m), context.active()),
    );
    let verdict: Verdict;
    try {
      verdict = await context.with(trace.setSpan(context.active(), span), () => this.s.handle(m.string()));
    } catch (err) {
      this.s.logger.error({ err: { message: errMessage(err) } }, 'event handler failed');
      verdict = { ack: false, retryInMs: 2000 };
    }
    span.setAttribute('fcd.verdict', 'term' in verdict ? 'term' : verdict.ack ? 'ack' : 'nak');
    if (!('term' in verdict) && !verdict.ack) span.setStatus({ code: SpanStatusCode.ERROR, message: 'redelivery requested' });
    span.end();
    if ('term' in verdict) {
      this.s.logger.warn({ seq: m.seq, subject: m.subject, reason: verdict.term }, 'event refused and terminated');
      m.term(verdict.term);
    } else if (verdict.ack) {
      m.ack();
    } else {
      m.nak(verdict.retryInMs);
    }
  }

  private pollPending(): void {
    if (this.pendingTimer || !this.s.onPending) return;
    const tick = async () => {
      try {
        const info = await this.session.jsm?.consumers.info(this.s.stream, this.s.consumer);
        if (info) this.s.onPending?.(info.num_pending + info.num_ack_pending);
      } catch {
        // NATS away: keep the last value.
      }
    };
    void tick();
    this.pendingTimer = setInterval(() => void tick(), 2000);
    this.pendingTimer.unref();
  }

  /** Readiness: connected, consumer in place, and the server answers a round trip. */
  async check(): Promise<void> {
    if (!this.ready) throw new Error('not connected');
    await this.session.check();
  }

  /**
   * Stops fetching, finishes the messages in hand (acked), naks those pulled but not handed to a
   * handler, closes the connection. No handler starts after `stopping` is set, so the set is whole.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeSlotWait?.();
    this.sleep.wake();
    clearInterval(this.pendingTimer);
    this.stopCurrent?.();
    await Promise.allSettled([...this.handling]);
    // The naks are sent before the close, whose drain flushes them to the server.
    const consuming = this.consuming?.catch(() => undefined) ?? Promise.resolve();
    await waitAtMost(consuming, STOP_DRAIN_MS);
    await this.session.close();
    await this.loop?.catch(() => undefined);
  }
}
