import { type Pool, UUID_LOWER_CASE, withTransaction } from '@fcd/service-kit';
import { appendCtes } from '../event-log';
import type { LoggedEvent } from '../event-record';
import { facetsOfBody } from '../filter';
import { DEFAULT_BREAKER_COOLDOWN_MS, DEFAULT_BREAKER_THRESHOLD, type PauseOptions } from '../limits';
import { facetParameters, subscriptionMatchesSql } from '../match-sql';
import { bookkeep, successOutcomes } from './bookkeeping';
import { claimRows, PENDING_SUBSCRIPTIONS_CTE, withSecrets } from './claim';
import { lockForRecord, recordSuccesses, writeBookkeeping } from './record';
import { type SecretDecrypter, withSecretCache } from './secret-cache';
import type {
  AttemptDecision,
  AttemptRecord,
  AttemptResult,
  ClaimedDelivery,
  ClaimRef,
  DecisionInput,
  FanOutEvent,
  RecordOutcome,
} from './types';

/**
 * The dispatcher's side of the deliveries (schema `webhook`): the fan-out,
 * claiming due deliveries, putting claims back, and recording attempt
 * outcomes (what they mean is `bookkeep`'s, pure). Times are epoch ms from
 * the caller's injected clock.
 */

/** A delivery whose signing secret cannot be decrypted is put back this long, without using up an attempt. */
export const SECRET_UNREADABLE_DEFER_MS = 5 * 60_000;

export interface DeliveryStoreHooks {
  /**
   * Deliveries of a subscription whose secret did not decrypt (a wrong
   * WEBHOOK_SECRET_KEY, a corrupted row) were put back for
   * SECRET_UNREADABLE_DEFER_MS. Never given the secret or the ciphertext.
   */
  onSecretUnreadable?(subscriptionId: string, deliveryIds: readonly string[]): void;
}

export interface DeliveryStoreOptions {
  /** The rate limit of subscriptions whose rate_limit_per_second is null (WEBHOOK_DEFAULT_RATE_LIMIT_PER_SECOND); null: none. */
  defaultRatePerSecond?: number | null;
  /** Connection failures in a row that pause a subscription (default DEFAULT_BREAKER_THRESHOLD). */
  breakerThreshold?: number;
  /** How long each of them pauses it (default DEFAULT_BREAKER_COOLDOWN_MS). */
  breakerCooldownMs?: number;
}

/** What a claim took, and when a subscription it held back by its rate limit may send again (null: none held so). */
export interface ClaimResult {
  claimed: ClaimedDelivery[];
  wakeAt: number | null;
  /** Subscriptions with due work this claim held back, by the limit that held them. */
  held: { rate: number; inFlight: number };
}

export class DispatchQueue {
  private readonly pauseOptions: PauseOptions;
  /** The secrets, each decrypted once per ciphertext and reused for a minute (`withSecretCache`). */
  private readonly secrets: SecretDecrypter | undefined;

  constructor(
    protected readonly pool: Pool,
    secrets?: SecretDecrypter,
    private readonly hooks: DeliveryStoreHooks = {},
    private readonly options: DeliveryStoreOptions = {},
  ) {
    this.secrets = secrets ? withSecretCache(secrets) : undefined;
    this.pauseOptions = {
      threshold: options.breakerThreshold ?? DEFAULT_BREAKER_THRESHOLD,
      cooldownMs: options.breakerCooldownMs ?? DEFAULT_BREAKER_COOLDOWN_MS,
    };
  }

  /**
   * One delivery per matching active subscription, in one statement:
   * idempotent, so a redelivered event creates nothing new. Returns the ids
   * of the deliveries created now.
   */
  async fanOut(event: FanOutEvent, now: number): Promise<string[]> {
    return (await this.fanOutMany([event], now))[0] ?? [];
  }

  /**
   * The fan-out of several events in one statement (same rows as `fanOut` of
   * each). Returns, per event in the given order, the ids of the deliveries
   * created now (none for an event already fanned out). `db` is a transaction's
   * client when the caller writes more with it.
   */
  fanOutMany(events: readonly FanOutEvent[], now: number, db: Pick<Pool, 'query'> = this.pool): Promise<string[][]> {
    return this.fanOutStatement(events, now, db, undefined);
  }

  /**
   * `fanOutMany` and the events' append to the event log (`EventLog.append`) in one statement,
   * so one round trip: an event is in the log exactly when its fan-out is committed (recovery
   * relies on it), and the log's append lock is held for that statement only. The matched
   * subscriptions are locked (FOR KEY SHARE, as the deliveries' foreign key would) by the insert,
   * which runs before the append takes its lock: a subscription being deleted holds up this
   * fan-out, not, through the lock, every other one.
   */
  fanOutAndLog(events: ReadonlyArray<FanOutEvent & LoggedEvent>, now: number): Promise<string[][]> {
    return this.fanOutStatement(events, now, this.pool, appendCtes(events, now, 11));
  }

  private async fanOutStatement(
    events: readonly FanOutEvent[],
    now: number,
    db: Pick<Pool, 'query'>,
    append: { ctes: string; params: unknown[] } | undefined,
  ): Promise<string[][]> {
    if (events.length === 0) return [];
    const unique = [...new Map(events.map((e) => [e.id, e])).values()];
    // Lower-case UUIDs only, so the array literal needs no quoting.
    const facilities = unique.map(
      (e) =>
        `{${e.facilityIds
          .map((f) => f.toLowerCase())
          .filter((f) => UUID_LOWER_CASE.test(f))
          .join(',')}}`,
    );
    const facets = facetParameters(unique.map((e) => e.facets ?? facetsOfBody(e.body)));
    // The events as rows typed like webhook.events', matched by the one rule (`subscriptionMatchesSql`).
    const { rows } = await db.query<{ id: string; event_id: string }>(
      `${append ? `WITH ${append.ctes}\n` : ''}INSERT INTO webhook.deliveries (id, subscription_id, event_id, event_type, body, status, attempt_count, next_attempt_at, created_at, updated_at, trace_context)
       SELECT 'dlv_' || gen_random_uuid(), s.id, e.id, e.type, e.body, 'pending', 0, $6, $6, $6, e.trace_context
         FROM (SELECT u.id, u.type, u.body, u.facility_ids::uuid[] AS facility_ids, u.trace_context, u.states::text[] AS states,
                      u.programs::text[] AS programs, u.severities::text[] AS severities, u.epa_regions::text[] AS epa_regions
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $7::text[], $8::text[], $9::text[], $10::text[])
                      AS u(id, type, body, facility_ids, trace_context, states, programs, severities, epa_regions)) e
         JOIN webhook.subscriptions s ON s.is_active AND ${subscriptionMatchesSql('s', 'e')}
          FOR KEY SHARE OF s
       ON CONFLICT (subscription_id, event_id) WHERE NOT recovery DO NOTHING
       RETURNING id, event_id`,
      [
        unique.map((e) => e.id),
        unique.map((e) => e.type),
        unique.map((e) => e.body),
        facilities,
        unique.map((e) => e.traceContext ?? null),
        new Date(now),
        facets.states,
        facets.programs,
        facets.severities,
        facets.epaRegions,
        ...(append?.params ?? []),
      ],
    );
    const created = new Map<string, string[]>();
    for (const r of rows) {
      const list = created.get(r.event_id) ?? [];
      list.push(r.id);
      created.set(r.event_id, list);
    }
    // A second copy of an event in the same call creates nothing (as a second call would).
    const seen = new Set<string>();
    return events.map((e) => {
      if (seen.has(e.id)) return [];
      seen.add(e.id);
      return created.get(e.id) ?? [];
    });
  }

  /**
   * Claims up to `limit` due deliveries (see `claim`); the deliveries only.
   */
  async claimDue(now: number, limit: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    return (await this.claim(now, limit, leaseUntil)).claimed;
  }

  /**
   * Claims up to `limit` due deliveries of active subscriptions and leases them until
   * `leaseUntil` by moving next_attempt_at (a dispatcher that dies mid-send releases them when
   * the lease ends); the attempt number is taken now. Each subscription's limits hold across
   * every replica (docs/adr/0014-per-subscription-delivery-limits.md): one transaction locks the
   * subscriptions with due work (FOR NO KEY UPDATE, in id order, so claims of several replicas
   * take turns per subscription and never deadlock), then — with a snapshot taken after those
   * locks, so every earlier claim is visible — takes from each at most
   * `max_in_flight` − its deliveries still leased and not in `answered` (this replica's successful
   * sends that only wait to be recorded), and, under a rate limit, what its pacing state
   * allows now (`rateAllowance`, on the database clock), advancing that state in the same
   * statement. Deliveries are locked FOR UPDATE SKIP LOCKED. A delivery held back stays pending
   * and due: no attempt is used. `wakeAt` (the caller's clock) is when a rate-limited
   * subscription may start its next attempt.
   *
   * A rate-limited delivery carries `startBy`, the latest its attempt may start: `clock` (the
   * caller's; default: `now`, an earlier reading) is read just before the statement that reads the
   * database clock is sent, and the bound (`maxStartDelayMs`) counts from then.
   */
  async claim(
    now: number,
    limit: number,
    leaseUntil: number,
    answered: readonly string[] = [],
    clock: () => number = () => now,
  ): Promise<ClaimResult> {
    if (!this.secrets) throw new Error('DeliveryStore needs a SecretBox to claim deliveries');
    const { rows, wakeAt, held, startBy } = await claimRows(
      this.pool,
      now,
      leaseUntil,
      {
        limit,
        answered,
        defaultRate: this.options.defaultRatePerSecond ?? null,
        breakerThreshold: this.pauseOptions.threshold,
      },
      clock,
    );
    const { claimed, unreadable } = withSecrets(rows, this.secrets, startBy);
    if (unreadable.size > 0) await this.deferUnreadable(now, unreadable);
    return { claimed, wakeAt, held };
  }

  /**
   * Puts back deliveries that cannot be signed: nothing was sent, so the
   * claim is undone (see `releaseClaims`) and they come due again after
   * SECRET_UNREADABLE_DEFER_MS. If even that fails, their leases end and the
   * next claim meets them again; the rest of the batch goes on either way.
   */
  private async deferUnreadable(now: number, unreadable: Map<string, ClaimRef[]>): Promise<void> {
    await this.releaseClaims([...unreadable.values()].flat(), now, now + SECRET_UNREADABLE_DEFER_MS).catch(() => 0);
    for (const [subscriptionId, claims] of unreadable) {
      this.hooks.onSecretUnreadable?.(
        subscriptionId,
        claims.map((c) => c.id),
      );
    }
  }

  /**
   * Undoes claims whose deliveries were not sent: the attempt number is given
   * back, first_attempt_at and last_attempt_at are restored to what they were
   * before the claim, and the delivery comes due at `dueAt`. Only a claim that
   * is still the latest one is undone (a delivery claimed again meanwhile, or
   * finished, is left alone). Returns how many were released.
   */
  async releaseClaims(claims: readonly ClaimRef[], now: number, dueAt: number): Promise<number> {
    if (claims.length === 0) return 0;
    const { rowCount } = await this.pool.query(
      `UPDATE webhook.deliveries d
          SET attempt_count = d.attempt_count - 1, next_attempt_at = $2, leased_until = NULL, updated_at = $1,
              first_attempt_at = v.prev_first, last_attempt_at = v.prev_last
         FROM unnest($3::text[], $4::int[], $5::timestamptz[], $6::timestamptz[]) AS v(id, attempt, prev_first, prev_last)
        WHERE d.id = v.id AND d.status = 'pending' AND d.attempt_count = v.attempt`,
      [
        new Date(now),
        new Date(dueAt),
        claims.map((c) => c.id),
        claims.map((c) => c.attempt),
        claims.map((c) => c.previousFirstAttemptAt),
        claims.map((c) => c.previousLastAttemptAt),
      ],
    );
    return rowCount ?? 0;
  }

  /**
   * Cancels due pending deliveries of inactive subscriptions (pending retries
   * stop when a subscription is deactivated). Returns how many. Runs every
   * poll, so the common case (none) costs one skip scan of the subscriptions
   * with pending work; the UPDATE runs only for the inactive ones found.
   */
  async cancelInactiveDue(now: number): Promise<number> {
    const { rows } = await this.pool.query<{ id: string }>(
      `WITH RECURSIVE ${PENDING_SUBSCRIPTIONS_CTE}
       SELECT s.id FROM pending p JOIN webhook.subscriptions s ON s.id = p.id WHERE p.due <= $1 AND NOT s.is_active`,
      [new Date(now)],
    );
    if (rows.length === 0) return 0;
    const { rowCount } = await this.pool.query(
      `UPDATE webhook.deliveries d SET status = 'cancelled', next_attempt_at = NULL, updated_at = $1
        WHERE d.subscription_id = ANY ($2::text[]) AND d.status = 'pending' AND d.next_attempt_at <= $1
          AND NOT EXISTS (SELECT 1 FROM webhook.subscriptions s WHERE s.id = d.subscription_id AND s.is_active)`,
      [new Date(now), rows.map((r) => r.id)],
    );
    return rowCount ?? 0;
  }

  /**
   * The earliest next_attempt_at of pending work (the worker sleeps until then); null when none.
   * Read from each subscription's earliest (the skip scan), so no index on next_attempt_at alone
   * is kept up to date on every write for this idle-time question.
   */
  async nextDueAt(): Promise<number | null> {
    const { rows } = await this.pool.query<{ at: Date | null }>(
      `WITH RECURSIVE ${PENDING_SUBSCRIPTIONS_CTE} SELECT min(due) AS at FROM pending`,
    );
    return rows[0]?.at ? rows[0].at.getTime() : null;
  }

  /**
   * Records an attempt and applies the decision in one transaction (see
   * `recordAttempts`, of which this is the one-item case).
   */
  async recordAttempt(
    claimed: ClaimedDelivery,
    result: AttemptResult,
    decide: (input: DecisionInput) => AttemptDecision,
  ): Promise<RecordOutcome> {
    const [outcome] = await this.recordAttempts([{ claimed, result }], decide);
    return outcome as RecordOutcome;
  }

  /**
   * Records a batch of attempts and applies their decisions in one
   * transaction, with the same result as recording them one after the other
   * in the given order: the attempt rows, each delivery's status and next
   * time, the subscriptions' failure bookkeeping, and — when a decision says
   * so — the deactivation of a subscription with its pending deliveries
   * cancelled. Four round trips per batch (BEGIN, lock and read, write,
   * COMMIT; plus two per deactivation); the subscriptions and then the
   * deliveries are locked in id order, so concurrent batches (replicas) do not
   * deadlock. A batch of successes only, the common case, is one autocommit
   * statement (`recordSuccesses`): it needs nothing read first, and holds the
   * subscription's row for that statement only, not across round trips that
   * a claim would wait behind.
   */
  async recordAttempts(items: readonly AttemptRecord[], decide: (input: DecisionInput) => AttemptDecision): Promise<RecordOutcome[]> {
    if (items.length === 0) return [];
    if (items.every((i) => i.result.success)) {
      // The common case, in one autocommit statement (`recordSuccesses`): nothing to read first.
      return successOutcomes(items, await recordSuccesses(this.pool, items), decide);
    }
    return withTransaction(this.pool, async (client) => {
      const subIds = [...new Set(items.map((i) => i.claimed.subscriptionId))];
      const deliveryIds = [...new Set(items.map((i) => i.claimed.id))];
      const before = await lockForRecord(client, subIds, deliveryIds);
      const bookkeeping = bookkeep(items, before, decide, this.pauseOptions);
      await writeBookkeeping(client, bookkeeping);
      return bookkeeping.outcomes;
    });
  }
}
