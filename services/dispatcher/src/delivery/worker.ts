import {
  type Clock,
  context,
  contextFromColumn,
  errMessage,
  type Logger,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  WakeableSleep,
} from '@fcd/service-kit';
import { type ClaimedDelivery, type ClaimRef, type DeliveryStore, startsTooLate } from '@fcd/webhooks';
import { eventCreatedAt } from '../domain/envelope';
import { deliveryHeaders } from '../domain/headers';
import { decideAfterAttempt, type RetryOptions } from '../domain/retry';
import type { DispatcherMetrics } from '../metrics';
import { Batcher } from './batcher';
import { AttemptRecorder } from './recorder';
import type { Sender } from './sender';
import { StartGates } from './start-gate';

export interface WorkerOptions {
  store: DeliveryStore;
  sender: Sender;
  clock: Clock;
  logger: Logger;
  metrics?: DispatcherMetrics;
  schedule: readonly number[];
  /** Jitter and random source of retry delays (default: none). */
  retry?: RetryOptions;
  concurrency: number;
  pollMs: number;
  /** How long a claimed delivery stays leased (longer than one attempt can take). */
  leaseMs: number;
  userAgent: string;
  /** How long a finished attempt waits for others to be recorded in the same transaction. */
  recordFlushMs?: number;
  /**
   * Decides which claimed deliveries are sent (the others must have been
   * settled by it, e.g. cancelled): the entitlement check. Default: all.
   */
  admit?: (claimed: ClaimedDelivery[], now: number) => Promise<ClaimedDelivery[]>;
}

/** Failures without an HTTP response: they count towards pausing the subscription (the receiver is unreachable). */
const CONNECTION_FAILURES = new Set(['timeout', 'connect_timeout', 'connection', 'tls', 'dns']);

/** When the worker is full, how long it lets slots free up before claiming (one claim fills them all). */
const CLAIM_GATHER_MS = 2;

const tracer = trace.getTracer('@fcd/dispatcher');

/**
 * The sending loop: claims due deliveries (FOR UPDATE SKIP LOCKED, leased) to
 * fill every free slot in one statement, sends each, records the attempts and
 * their next steps in batches (AttemptRecorder: one transaction for the
 * attempts finished within a few ms), and sleeps until the next due time it
 * knows of, a nudge (new deliveries), or the poll interval (work scheduled by
 * other replicas).
 */
export class DeliveryWorker {
  /** Sends in flight (at most `concurrency`). */
  private readonly inFlight = new Set<Promise<void>>();
  /** Finished sends whose attempt is not committed yet. */
  private readonly recording = new Set<Promise<void>>();
  /**
   * The deliveries of `recording` whose attempt succeeded: answered, so the claim does not count
   * their leases against max_in_flight (the receiver's slot frees up when the response arrives).
   * A failed attempt keeps its place until recorded: its recording may pause the subscription.
   */
  private readonly answered = new Set<string>();
  private readonly recorder: AttemptRecorder;
  /** Claims given back unsent (a rate-limited start too late): those of one turn in one statement. */
  private readonly giveBacks: Batcher<ClaimRef, void>;
  /** The start bound checked again where each rate-limited request is written (./start-gate.ts). */
  private readonly gates = new StartGates();
  private stopping = false;
  private loop: Promise<void> | undefined;
  /**
   * The wait between claims. A nudge that arrives while a claim is in flight is latched, so the
   * next sleep returns at once and the new work is claimed without waiting for the poll.
   */
  private readonly sleeper = new WakeableSleep();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private lastSweep = 0;

  constructor(private readonly o: WorkerOptions) {
    this.recorder = new AttemptRecorder({
      store: o.store,
      decide: (input) => decideAfterAttempt(input, o.schedule, o.retry),
      flushMs: o.recordFlushMs ?? 2,
      maxBatch: Math.max(16, o.concurrency * 2),
    });
    this.giveBacks = new Batcher<ClaimRef, void>({
      run: async (claims) => {
        const now = o.clock.now();
        // Due again at once: the pacing of the next claim decides when it starts.
        await o.store.releaseClaims(claims, now, now);
        return claims.map(() => undefined);
      },
      delayMs: 0,
      maxBatch: Math.max(16, o.concurrency),
      retryOneByOne: true,
    });
  }

  /** Free slots: sends in flight stay under `concurrency`, sends plus uncommitted records under twice that. */
  private free(): number {
    const c = this.o.concurrency;
    return Math.min(c - this.inFlight.size, 2 * c - this.inFlight.size - this.recording.size);
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** New work may be due now. */
  nudge(): void {
    this.sleeper.wake();
  }

  /** Wakes the loop at `at` (epoch ms of the injected clock), unless an earlier wake is set. */
  private wakeAt(at: number): void {
    if (at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timerAt = Number.POSITIVE_INFINITY;
        this.nudge();
      },
      Math.max(0, at - this.o.clock.now()),
    );
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      const free = this.free();
      if (free <= 0) {
        // Every slot busy (or too many attempts still to record): nothing to claim or look up yet.
        await Promise.race([...this.inFlight, ...this.recording]);
        continue;
      }
      // `due`: what the claim took; `claimed`: what is sent (all of it unless `admit` settled some).
      let due: ClaimedDelivery[] = [];
      let claimed: ClaimedDelivery[] = [];
      const now = this.o.clock.now();
      try {
        if (now - this.lastSweep >= this.o.pollMs) {
          this.lastSweep = now;
          const cancelled = await this.o.store.cancelInactiveDue(now);
          if (cancelled > 0) this.o.logger.info({ cancelled }, 'pending deliveries of inactive subscriptions cancelled');
        }
        // The clock is read again just before the claim's statements: rate-limited starts are bounded from then.
        const result = await this.o.store.claim(now, free, now + this.o.leaseMs, [...this.answered], () => this.o.clock.now());
        due = result.claimed;
        this.o.metrics?.subscriptionsHeld.set({ limit: 'rate' }, result.held.rate);
        this.o.metrics?.subscriptionsHeld.set({ limit: 'in_flight' }, result.held.inFlight);
        // A subscription held back by its rate limit: claim again when it may start its next attempt.
        if (result.wakeAt !== null) this.wakeAt(result.wakeAt);
        // If admitting fails, nothing of the claim is sent: the leases end and the next claim retries.
        claimed = this.o.admit && due.length > 0 ? await this.o.admit(due, now) : due;
      } catch (err) {
        this.o.logger.warn({ err: { message: errMessage(err) } }, 'claiming deliveries failed');
      }
      for (const d of claimed) {
        const p: Promise<void> = this.attempt(d).finally(() => {
          this.inFlight.delete(p);
          this.nudge();
        });
        this.inFlight.add(p);
      }
      if (this.stopping) break;
      // A full batch: there may be more due work right away (once a slot frees up).
      if (due.length > 0 && due.length === free) {
        if (this.free() <= 0) {
          await Promise.race([...this.inFlight, ...this.recording]);
          // Let a few more slots free up, so the next claim fills several at once.
          if (!this.stopping && this.free() < this.o.concurrency / 4) await new Promise((r) => setTimeout(r, CLAIM_GATHER_MS));
        }
        continue;
      }
      if (due.length === 0) {
        // Retries scheduled before a restart or by another replica: wake when the earliest is due.
        const next = await this.o.store.nextDueAt().catch(() => null);
        if (next !== null && next > this.o.clock.now()) this.wakeAt(next);
      }
      await this.sleeper.sleep(this.o.pollMs);
    }
  }

  /**
   * The attempt continues the trace of the event's handling (stored with the
   * delivery): its span is active while sending (the undici instrumentation
   * makes the POST's client span and sends its traceparent to the receiver)
   * and while recording, so the log lines carry its trace id. Resolves when
   * the send is done (the slot is free); the recording is tracked apart.
   */
  private async attempt(d: ClaimedDelivery): Promise<void> {
    const span = tracer.startSpan(
      `deliver ${d.eventType}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          'fcd.delivery.id': d.id,
          'fcd.delivery.attempt': d.attempt,
          'fcd.subscription.id': d.subscriptionId,
          'fcd.event.id': d.eventId,
          'fcd.event.type': d.eventType,
        },
      },
      contextFromColumn(d.traceContext, context.active()),
    );
    let sent: { recorded: Promise<void>; success: boolean } | undefined;
    try {
      // The send holds a slot; the recording that follows holds a place in `recording` until committed.
      sent = await context.with(trace.setSpan(context.active(), span), () => this.attemptTraced(d, span));
    } finally {
      if (!sent) span.end();
    }
    if (sent.success) this.answered.add(d.id);
    const r: Promise<void> = sent.recorded.finally(() => {
      span.end();
      this.answered.delete(d.id);
      this.recording.delete(r);
      this.nudge();
    });
    this.recording.add(r);
  }

  /**
   * Sends; resolves once sent, with the recording of the attempt (which never rejects). A
   * rate-limited delivery whose send would start past its `startBy` — checked before the send,
   * and again by the sender once its connection is up (./start-gate.ts) — is not sent: its claim
   * is given back (`giveBack`), which stands in for the recording (not a success: its lease keeps
   * its place under max_in_flight until given back).
   */
  private async attemptTraced(d: ClaimedDelivery, span: Span): Promise<{ recorded: Promise<void>; success: boolean }> {
    const { clock, metrics } = this.o;
    const startedAt = clock.now();
    const headers = deliveryHeaders({
      secrets: d.secrets,
      body: d.body,
      eventId: d.eventId,
      eventType: d.eventType,
      deliveryId: d.id,
      attempt: d.attempt,
      nowMs: startedAt,
      userAgent: this.o.userAgent,
    });
    // The last moment before the request begins: after the claim, the entitlement check and the signing.
    if (startsTooLate(d.startBy, clock.now())) {
      span.setAttribute('fcd.delivery.result', 'late_start');
      return { recorded: this.giveBack(d), success: false };
    }
    const result = await this.o.sender.send(
      d.url,
      d.body,
      headers,
      this.gates.gate(d.subscriptionId, d.startBy, () => clock.now()),
    );
    this.gates.settled(d.subscriptionId, result.kind === 'late_start');
    if (result.kind === 'late_start') {
      // Its connection took the time (a new one, under load): stopped before anything was written.
      span.setAttribute('fcd.delivery.result', 'late_start');
      return { recorded: this.giveBack(d), success: false };
    }
    if (d.attempt === 1 && !d.manual && metrics) {
      const created = eventCreatedAt(d.body);
      if (created !== undefined) metrics.eventToFirstAttempt.observe(Math.max(0, startedAt - created) / 1000);
    }
    span.setAttribute('fcd.delivery.result', result.kind ?? 'success');
    if (result.status !== null) span.setAttribute('http.response.status_code', result.status);
    if (!result.success) span.setStatus({ code: SpanStatusCode.ERROR, message: result.kind ?? 'failed' });
    const finishedAt = clock.now();
    const label = result.kind ?? 'success';
    metrics?.attempts.inc({ result: label });
    metrics?.attemptDuration.observe({ result: label }, result.durationMs / 1000);
    const log = {
      delivery_id: d.id,
      subscription_id: d.subscriptionId,
      event_id: d.eventId,
      attempt: d.attempt,
      response_status: result.status,
      duration_ms: Math.round(result.durationMs),
      ...(result.error ? { error: result.error } : {}),
      ...(result.retryAfterMs !== null ? { retry_after_ms: result.retryAfterMs } : {}),
      ...(result.permanent ? { permanent: true } : {}),
    };
    const recording = this.recorder.record({
      claimed: d,
      result: {
        startedAt,
        finishedAt,
        durationMs: result.durationMs,
        responseStatus: result.status,
        error: result.error,
        success: result.success,
        retryAfterMs: result.retryAfterMs,
        permanent: result.permanent,
        connectionFailure: result.kind !== null && CONNECTION_FAILURES.has(result.kind),
        // For the owner's delivery log only: the log lines above carry none of it (signatures stay out of logs).
        debug: {
          requestHeaders: result.requestHeaders,
          responseHeaders: result.responseHeaders,
          responseHeadersTruncated: result.responseHeadersTruncated,
          responseBody: result.responseBody,
          responseBodyTruncated: result.responseBodyTruncated,
          timings: result.timings,
        },
      },
    });
    return { recorded: this.report(recording, d, log), success: result.success };
  }

  /**
   * Gives back the claim of a rate-limited delivery whose start came too late (the admission
   * margin would not hold at the receiver): it stays pending and due, its attempt number is
   * restored, nothing is recorded (no attempt used, nothing towards deactivation). Its pacing slot
   * is spent, so the next claim — nudged when this settles — holds the subscription until its next
   * slot: no hot loop. If the give-back fails, the lease runs out and the delivery is claimed again
   * then (its attempt number used up, as for any lease that ends unrecorded). Never rejects.
   */
  private async giveBack(d: ClaimedDelivery): Promise<void> {
    this.o.metrics?.rateLimitedLateStarts.inc();
    try {
      await this.giveBacks.add(d.claim);
      this.o.logger.debug(
        { delivery_id: d.id, subscription_id: d.subscriptionId },
        'rate-limited delivery would start too late; claim given back unsent',
      );
    } catch (err) {
      this.o.logger.warn(
        { delivery_id: d.id, subscription_id: d.subscriptionId, err: { message: errMessage(err) } },
        'giving back a late rate-limited claim failed; it is claimed again when its lease ends',
      );
    }
  }

  private async report(recording: ReturnType<AttemptRecorder['record']>, d: ClaimedDelivery, log: Record<string, unknown>): Promise<void> {
    const { metrics, logger } = this.o;
    try {
      const outcome = await recording;
      if (!outcome.applied) {
        logger.warn(log, 'attempt recorded, but the delivery changed meanwhile');
        return;
      }
      const decision = outcome.decision;
      if (outcome.paused) {
        metrics?.subscriptionPauses.inc({ reason: outcome.paused.reason });
        logger.warn(
          { subscription_id: d.subscriptionId, reason: outcome.paused.reason, paused_until: new Date(outcome.paused.until).toISOString() },
          'subscription paused',
        );
      }
      if (decision.status === 'pending') {
        metrics?.retriesScheduled.inc();
        this.wakeAt(decision.nextAttemptAt);
        logger.info(
          { ...log, next_attempt_at: new Date(decision.nextAttemptAt).toISOString() },
          'delivery attempt failed; retry scheduled',
        );
      } else if (decision.status === 'succeeded') {
        metrics?.deliveries.inc({ result: 'succeeded' });
        logger.info(log, 'delivered');
      } else {
        metrics?.deliveries.inc({ result: 'failed' });
        const permanent = log.permanent === true && !d.manual;
        logger.warn(
          log,
          permanent ? 'delivery failed permanently: the destination is refused; not retried' : 'delivery failed; no retries left',
        );
      }
      if (outcome.deactivated) {
        metrics?.deactivations.inc();
        logger.warn(
          { subscription_id: d.subscriptionId, reason: 'consecutive_failures', cancelled: outcome.cancelled },
          'subscription deactivated',
        );
      }
    } catch (err) {
      // The lease runs out and the delivery is attempted again (at least once).
      logger.error({ ...log, err: { message: errMessage(err) } }, 'recording the attempt failed');
    }
  }

  /** Stops claiming and waits for the sends in flight to finish and be recorded. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.nudge();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
    await this.giveBacks.flush();
    await this.recorder.flush();
    await Promise.allSettled([...this.recording]);
  }
}
