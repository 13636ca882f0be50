import type { FieldProblem } from '@fcd/service-kit';
import { DAY_MS } from '@fcd/webhooks';

/**
 * The window of a recovery (POST /v1/webhooks/{id}/recover): `since` and the optional `until`
 * are RFC 3339 date-times (checked here: the body validator checks shapes only), read as the half-open window
 * [since, until) on the events' created_at; `until` defaults to now. The window must start
 * within the event retention (the log holds nothing older) and end after it starts.
 */
export interface RecoveryWindow {
  since: number;
  until: number;
}

/** RFC 3339 date-time: date, `T`, time with optional fraction, and `Z` or an offset. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

function parseDateTime(value: string): number {
  return RFC3339.test(value) ? Date.parse(value) : Number.NaN;
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
