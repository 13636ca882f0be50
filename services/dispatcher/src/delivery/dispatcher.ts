import {
  type Clock,
  type Logger,
  loopWorker,
  natsOptions,
  type Pool,
  PRO_TIER_RANK,
  periodicWorker,
  Supervisor,
  systemClock,
  traceContextColumn,
  type Worker,
} from '@fcd/service-kit';
import {
  type ClaimedDelivery,
  DAY_MS,
  DeliveryStore,
  deactivateAccountSubscriptions,
  EventLog,
  type FanOutEvent,
  type LoggedEvent,
  parseAllowedPorts,
  type Resolver,
  type SecretBox,
} from '@fcd/webhooks';
import type { DispatcherConfig } from '../config';
import { type AccountDirectory, Entitlements } from '../domain/entitlements';
import { parseEvent } from '../domain/envelope';
import { parseRetrySchedule } from '../domain/retry';
import type { DispatcherMetrics } from '../metrics';
import { EventConsumer, type Verdict } from '../store/event-consumer';
import { Batcher } from './batcher';
import { Sender } from './sender';
import { DeliveryWorker } from './worker';

export interface DispatcherDeps {
  config: DispatcherConfig;
  pool: Pool;
  secretBox: SecretBox;
  logger: Logger;
  metrics?: DispatcherMetrics;
  clock?: Clock;
  /** node:dns unless injected (tests). */
  resolver?: Resolver;
  /** Extra TLS options for the sender (tests); processes use NODE_EXTRA_CA_CERTS. */
  tls?: { ca?: string | Buffer };
  /** The usage service's tiers; without it, entitlement is not checked (docs/dispatcher.md). */
  accounts?: AccountDirectory;
}

/** The deactivation reason a client sees after a downgrade below Pro. */
const TIER_DEACTIVATION_REASON = 'tier_downgraded';
/** When deactivating a refused account's subscriptions fails, its claimed deliveries come back after this. */
const ENTITLEMENT_RETRY_MS = 30_000;

/**
 * The dispatcher's two halves: the event consumer (JetStream → one delivery
 * per matching subscription, committed before the ack) and the delivery
 * worker (due deliveries → signed POSTs → attempts, retries, deactivation).
 */
export class Dispatcher {
  readonly consumer: EventConsumer;
  readonly worker: DeliveryWorker;
  readonly sender: Sender;
  readonly deliveries: DeliveryStore;
  private readonly clock: Clock;
  /** The events in hand logged and fanned out together: one transaction for all of them (`record`). */
  private readonly fanOuts: Batcher<FanOutEvent & LoggedEvent, string[]>;
  private readonly entitlements: Entitlements | undefined;
  readonly eventLog: EventLog;
  /** The workers under their own supervisor, when started alone (start()). */
  private alone: Supervisor | undefined;

  constructor(private readonly deps: DispatcherDeps) {
    const { config, logger, metrics } = deps;
    this.clock = deps.clock ?? systemClock;
    this.deliveries = new DeliveryStore(
      deps.pool,
      deps.secretBox,
      {
        onSecretUnreadable: (subscriptionId, deliveryIds) => {
          metrics?.secretUnreadable.inc(deliveryIds.length);
          logger.error(
            { subscription_id: subscriptionId, deliveries: deliveryIds.length },
            'signing secret does not decrypt (check WEBHOOK_SECRET_KEY and WEBHOOK_SECRET_KEY_PREVIOUS); deliveries put back for 5 minutes',
          );
        },
      },
      {
        defaultRatePerSecond: config.WEBHOOK_DEFAULT_RATE_LIMIT_PER_SECOND || null,
        breakerThreshold: config.WEBHOOK_BREAKER_THRESHOLD,
        breakerCooldownMs: config.WEBHOOK_BREAKER_COOLDOWN_MS,
      },
    );
    this.eventLog = new EventLog(deps.pool);
    this.fanOuts = new Batcher({
      run: (events) => this.record(events),
      delayMs: 0,
      maxBatch: config.DISPATCHER_FETCH_BATCH,
      retryOneByOne: true,
    });
    this.sender = new Sender({
      connectTimeoutMs: config.WEBHOOK_CONNECT_TIMEOUT_MS,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS,
      allowedPorts: parseAllowedPorts(config.WEBHOOK_ALLOWED_PORTS ?? '443'),
      resolver: deps.resolver,
      tls: deps.tls,
    });
    this.entitlements = deps.accounts
      ? new Entitlements({
          directory: deps.accounts,
          clock: this.clock,
          logger,
          ttlMs: config.ENTITLEMENT_CACHE_TTL_MS,
          minRank: PRO_TIER_RANK,
          onUnavailable: () => metrics?.entitlementUnavailable.inc(),
        })
      : undefined;
    this.worker = new DeliveryWorker({
      store: this.deliveries,
      sender: this.sender,
      clock: this.clock,
      logger,
      metrics,
      schedule: parseRetrySchedule(config.WEBHOOK_RETRY_SCHEDULE),
      retry: { jitter: config.WEBHOOK_RETRY_JITTER_PERCENT / 100, random: Math.random },
      concurrency: config.DISPATCHER_CONCURRENCY,
      pollMs: config.DISPATCHER_POLL_MS,
      leaseMs: config.WEBHOOK_CONNECT_TIMEOUT_MS + config.WEBHOOK_TIMEOUT_MS + 15_000,
      userAgent: config.USER_AGENT,
      ...(this.entitlements ? { admit: (claimed: ClaimedDelivery[], now: number) => this.admit(claimed, now) } : {}),
    });
    this.consumer = new EventConsumer({
      url: config.NATS_URL,
      auth: natsOptions(config, config.NATS_URL),
      stream: config.EVENTS_STREAM,
      subjectPrefix: config.EVENTS_SUBJECT_PREFIX,
      replicas: config.NATS_STREAM_REPLICAS,
      consumer: config.DISPATCHER_CONSUMER,
      deliverPolicy: config.DISPATCHER_DELIVER_POLICY,
      batch: config.DISPATCHER_FETCH_BATCH,
      logger,
      handle: (body) => this.handleEvent(body),
      onPending: (n) => metrics?.consumerPending.set(n),
    });
  }

  /**
   * The fan-out of a batch of events and their entries in the event log, in one statement (one
   * round trip): an event is in the log exactly when its fan-out is committed (recovery relies on
   * it).
   */
  private record(events: Array<FanOutEvent & LoggedEvent>): Promise<string[][]> {
    return this.deliveries.fanOutAndLog(events, this.clock.now());
  }

  /** Fan-out of one event: invalid → term, Postgres failing → nak with a delay, else ack. */
  async handleEvent(body: string): Promise<Verdict> {
    const parsed = parseEvent(body);
    if (!parsed.ok) {
      this.deps.metrics?.events.inc({ result: 'invalid' });
      return { term: parsed.reason };
    }
    let created: string[];
    try {
      // The deliveries remember the trace of this handling: each attempt's span continues it.
      // An envelope without a readable created_at is logged at the time it is consumed.
      created = await this.fanOuts.add({
        ...parsed.event,
        createdAt: parsed.createdAt || this.clock.now(),
        traceContext: traceContextColumn(),
      });
    } catch (err) {
      this.deps.metrics?.events.inc({ result: 'error' });
      this.deps.logger.warn(
        { event_id: parsed.event.id, err: { message: (err as Error).message } },
        'fan-out failed; event will be redelivered',
      );
      return { ack: false, retryInMs: 2000 };
    }
    this.deps.metrics?.events.inc({ result: created.length > 0 ? 'matched' : 'unmatched' });
    if (created.length > 0) {
      this.deps.metrics?.deliveriesCreated.inc(created.length);
      this.worker.nudge();
    }
    return { ack: true };
  }

  /**
   * The entitlement check of a claim: the accounts the usage service reports
   * below Pro have every subscription deactivated (reason "tier_downgraded",
   * pending deliveries cancelled, these included); the rest is sent. Fails
   * open (Entitlements); a failure to deactivate leaves those deliveries
   * leased and unsent, so the next claim after the lease tries again.
   */
  private async admit(claimed: ClaimedDelivery[], now: number): Promise<ClaimedDelivery[]> {
    const entitlements = this.entitlements as Entitlements;
    const refused = await entitlements.notEntitled(claimed.map((c) => c.accountId));
    if (refused.size === 0) return claimed;
    for (const accountId of refused) {
      // Asked afresh next time: a re-upgrade, or a retry after a failure below, sees the current tier.
      entitlements.forget(accountId);
      try {
        const ids = await deactivateAccountSubscriptions(this.deps.pool, accountId, TIER_DEACTIVATION_REASON, now);
        this.deps.metrics?.tierDeactivations.inc(ids.length);
        this.deps.logger.info(
          { account_id: accountId, subscriptions: ids },
          'account below Pro: its webhook subscriptions deactivated, pending deliveries cancelled',
        );
      } catch (err) {
        // Not sent and not cancelled: give the attempts back and look again shortly.
        const mine = claimed.filter((c) => c.accountId === accountId).map((c) => c.claim);
        await this.deliveries.releaseClaims(mine, now, now + ENTITLEMENT_RETRY_MS).catch(() => 0);
        this.deps.logger.warn({ account_id: accountId, err: { message: (err as Error).message } }, 'deactivating subscriptions failed');
      }
    }
    return claimed.filter((c) => !refused.has(c.accountId));
  }

  /**
   * Deletes the events past EVENT_RETENTION_DAYS from the log (in batches). Replicas may run it at
   * once: each batch skips the rows another one is deleting. A failure is logged and the next
   * run tries again.
   */
  async pruneEventLog(): Promise<number> {
    const before = this.clock.now() - this.deps.config.EVENT_RETENTION_DAYS * DAY_MS;
    const deleted = await this.eventLog.prune(before);
    this.deps.metrics?.eventsPruned.inc(deleted);
    if (deleted > 0) this.deps.logger.info({ deleted, before: new Date(before).toISOString() }, 'event log pruned');
    return deleted;
  }

  /**
   * The dispatcher's background work, in start order (a supervisor stops them in reverse): the
   * delivery worker, the event consumer, and the pruning of the event log (a failure is logged
   * and the next run tries again).
   */
  workers(): Worker[] {
    return [
      loopWorker('delivery worker', this.worker),
      loopWorker('event consumer', this.consumer),
      periodicWorker('event log pruning', this.deps.config.EVENT_PRUNE_INTERVAL_MS, () =>
        this.pruneEventLog().catch((err: unknown) =>
          this.deps.logger.warn({ err: { message: (err as Error).message } }, 'event log pruning failed'),
        ),
      ),
    ];
  }

  /** Closes the HTTP pool of the sends, once the workers have stopped. */
  close(): Promise<void> {
    return this.sender.close();
  }

  /** Runs the workers on their own, outside a service's supervisor (tests). */
  start(): void {
    this.alone ??= new Supervisor(this.workers(), { logger: this.deps.logger });
    this.alone.start();
  }

  /** Stop pruning and consuming, finish the sends in flight, close the HTTP pool. */
  async stop(): Promise<void> {
    await this.alone?.stop();
    await this.close();
  }
}
