import { Counter, createMetrics, Gauge, Histogram, type ServiceMetrics } from '@fcd/service-kit';

/** The dispatcher's domain metrics, on the service's registry (docs/dispatcher.md). */
export interface DispatcherMetrics extends ServiceMetrics {
  events: Counter<'result'>;
  deliveriesCreated: Counter;
  attempts: Counter<'result'>;
  deliveries: Counter<'result'>;
  attemptDuration: Histogram<'result'>;
  retriesScheduled: Counter;
  deactivations: Counter;
  subscriptionPauses: Counter<'reason'>;
  subscriptionsHeld: Gauge<'limit'>;
  rateLimitedLateStarts: Counter;
  consumerPending: Gauge;
  eventToFirstAttempt: Histogram;
  secretUnreadable: Counter;
  tierDeactivations: Counter;
  entitlementUnavailable: Counter;
  eventsPruned: Counter;
}

type Registers = ServiceMetrics['registry'][];

/** Consuming events: the JetStream consumer, the fan-out and the event log. */
function eventMetrics(registers: Registers): Pick<DispatcherMetrics, 'events' | 'deliveriesCreated' | 'consumerPending' | 'eventsPruned'> {
  return {
    events: new Counter({
      name: 'fcd_dispatcher_events_total',
      help: 'Events consumed from JetStream, by result (matched, unmatched, invalid, error).',
      labelNames: ['result'] as const,
      registers,
    }),
    deliveriesCreated: new Counter({
      name: 'fcd_dispatcher_deliveries_created_total',
      help: 'Deliveries created by the fan-out (one per event and matching subscription).',
      registers,
    }),
    consumerPending: new Gauge({
      name: 'fcd_dispatcher_consumer_pending',
      help: 'Events in the stream not yet acknowledged by the dispatcher consumer (pending + ack pending).',
      registers,
    }),
    eventsPruned: new Counter({
      name: 'fcd_dispatcher_events_pruned_total',
      help: 'Events deleted from the event log (webhook.events) past EVENT_RETENTION_DAYS.',
      registers,
    }),
  };
}

/** Sending: attempts, their outcome and latency, and the retries they schedule. */
function attemptMetrics(
  registers: Registers,
): Pick<
  DispatcherMetrics,
  'attempts' | 'deliveries' | 'attemptDuration' | 'retriesScheduled' | 'eventToFirstAttempt' | 'secretUnreadable'
> {
  return {
    attempts: new Counter({
      name: 'fcd_dispatcher_attempts_total',
      help: 'Delivery attempts by result (success, http_status, timeout, connect_timeout, blocked, dns, tls, connection, invalid_url).',
      labelNames: ['result'] as const,
      registers,
    }),
    deliveries: new Counter({
      name: 'fcd_dispatcher_deliveries_total',
      help: 'Deliveries that reached a final state, by result (succeeded, failed).',
      labelNames: ['result'] as const,
      registers,
    }),
    attemptDuration: new Histogram({
      name: 'fcd_dispatcher_attempt_duration_seconds',
      help: 'Latency of delivery attempts (connect to end of the response), by result.',
      labelNames: ['result'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers,
    }),
    retriesScheduled: new Counter({
      name: 'fcd_dispatcher_retries_scheduled_total',
      help: 'Retries scheduled after a failed attempt.',
      registers,
    }),
    eventToFirstAttempt: new Histogram({
      name: 'fcd_dispatcher_event_to_first_attempt_seconds',
      help: "From the event's created_at to the start of its first delivery attempt.",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    secretUnreadable: new Counter({
      name: 'fcd_dispatcher_secret_unreadable_total',
      help: 'Claimed deliveries put back because their subscription secret did not decrypt (a key misconfiguration).',
      registers,
    }),
  };
}

/** Subscriptions held back, paused or deactivated. */
function subscriptionMetrics(
  registers: Registers,
): Pick<
  DispatcherMetrics,
  'deactivations' | 'subscriptionsHeld' | 'rateLimitedLateStarts' | 'subscriptionPauses' | 'tierDeactivations' | 'entitlementUnavailable'
> {
  return {
    deactivations: new Counter({
      name: 'fcd_dispatcher_deactivations_total',
      help: 'Subscriptions deactivated after their last retry failed.',
      registers,
    }),
    subscriptionsHeld: new Gauge({
      name: 'fcd_dispatcher_subscriptions_held',
      help: "Subscriptions with due deliveries that this replica's last claim held back, by limit (rate, in_flight).",
      labelNames: ['limit'],
      registers,
    }),
    rateLimitedLateStarts: new Counter({
      name: 'fcd_dispatcher_rate_limited_late_starts_total',
      help: 'Rate-limited deliveries given back unsent because their send would have started too long after their claim (MAX_START_DELAY_MS); claimed again at their next pacing slot.',
      registers,
    }),
    subscriptionPauses: new Counter({
      name: 'fcd_dispatcher_subscription_pauses_total',
      help: 'Subscriptions paused by their receiver: a 429/503 Retry-After (retry_after) or connection failures in a row (unreachable).',
      labelNames: ['reason'],
      registers,
    }),
    tierDeactivations: new Counter({
      name: 'fcd_dispatcher_tier_deactivations_total',
      help: 'Subscriptions deactivated because their account is below Pro (reason tier_downgraded).',
      registers,
    }),
    entitlementUnavailable: new Counter({
      name: 'fcd_dispatcher_entitlement_unavailable_total',
      help: 'Tier lookups the usage service could not answer (deliveries were sent unchecked: fail open).',
      registers,
    }),
  };
}

export function createDispatcherMetrics(): DispatcherMetrics {
  const base = createMetrics('dispatcher');
  const registers = [base.registry];
  return { ...base, ...eventMetrics(registers), ...attemptMetrics(registers), ...subscriptionMetrics(registers) };
}
