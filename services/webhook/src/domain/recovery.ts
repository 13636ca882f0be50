import { AppError, type FieldProblem, serviceUnavailable } from '@fcd/service-kit/pure';
import { DAY_MS, RECOVER_RATE } from '@fcd/webhooks/pure';
import { parseDateTime } from './date-time';

/**
 * The window of a recovery (POST /v1/webhooks/{id}/recover): `since` and the optional `until`
 * are RFC 3339 date-times (checked here, by the parser of GET /v1/events: the body validator checks shapes only), read as the half-open window
 * [since, until) on the events' created_at; `until` defaults to now. The window must start
 * within the event retention (the log holds nothing older) and end after it starts.
 */
export interface RecoveryWindow {
  since: number;
  until: number;
}

export function recoveryWindow(
  raw: Record<string, unknown>,
  now: number,
  retentionDays: number,
): { problems: FieldProblem[]; window?: RecoveryWindow } {
  const problems: FieldProblem[] = [];
  const since = typeof raw.since === 'string' ? parseDateTime(raw.since) : Number.NaN;
  const until = typeof raw.until === 'string' ? parseDateTime(raw.until) : raw.until === undefined ? now : Number.NaN;
  const oldest = now - retentionDays * DAY_MS;
  if (typeof raw.since === 'string' && Number.isNaN(since)) problems.push({ field: 'since', message: 'must be an RFC 3339 date-time' });
  if (typeof raw.until === 'string' && Number.isNaN(until)) problems.push({ field: 'until', message: 'must be an RFC 3339 date-time' });
  if (!Number.isNaN(since) && since < oldest) {
    problems.push({
      field: 'since',
      message: `must be within the event retention of ${retentionDays} days: on or after ${new Date(oldest).toISOString()}`,
    });
  }
  if (!Number.isNaN(since) && !Number.isNaN(until) && until <= since) {
    problems.push(
      raw.until === undefined
        ? { field: 'since', message: 'must be in the past (until defaults to now)' }
        : { field: 'until', message: 'must be later than since' },
    );
  }
  if (problems.length > 0 || Number.isNaN(since) || Number.isNaN(until)) return { problems };
  return { problems, window: { since, until } };
}

/** 409 LIMIT_REACHED: a recovery of this subscription is in progress (running, or its deliveries still pending until `lastDueAt`). */
export function recoveryInProgress(now: number, lastDueAt?: number): AppError {
  const retryAfterSeconds = lastDueAt === undefined ? 1 : Math.max(1, Math.ceil((lastDueAt - now) / 1000));
  return new AppError(
    'LIMIT_REACHED',
    `A recovery of this subscription is in progress: one at a time. Retry after ${retryAfterSeconds} s, when its deliveries are sent.`,
    {
      retryAfterSeconds,
      details: { limit: 'recovery_in_progress', ...(lastDueAt === undefined ? {} : { last_due_at: new Date(lastDueAt).toISOString() }) },
    },
  );
}

/** 429 RATE_LIMIT_EXCEEDED: the account's recover rate (RECOVER_RATE) is used up. */
export function recoverRateExceeded(retryAfterSeconds: number): AppError {
  const { limit, windowMs } = RECOVER_RATE;
  return new AppError(
    'RATE_LIMIT_EXCEEDED',
    `At most ${limit} recover calls per ${windowMs / 1000} s per account. Retry after ${retryAfterSeconds} s.`,
    { retryAfterSeconds, details: { limit, window_seconds: windowMs / 1000, retry_after_seconds: retryAfterSeconds } },
  );
}

/**
 * At most `limit` recoveries at once in this process: the others wait here, in memory, not on a
 * pooled connection, so recoveries never take more than `limit` of the pool (docs/webhooks.md).
 * At most `maxWaiting` wait: the next is refused with 503 and Retry-After, so a burst of
 * recoveries from many accounts cannot pile up open requests without bound.
 */
/** Retry-After of a recovery refused because too many already wait on this replica. */
const RECOVERY_BUSY_RETRY_SECONDS = 5;

export class RecoveryGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly limit: number,
    private readonly maxWaiting = 100,
  ) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) {
      if (this.waiting.length >= this.maxWaiting) throw serviceUnavailable('recovery', RECOVERY_BUSY_RETRY_SECONDS);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.running += 1;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter; `running` counts it still.
      if (next) next();
      else this.running -= 1;
    }
  }
}
