import { describe, expect, it } from 'vitest';
import { recoveryWindow } from './recovery';

describe('recovery window', () => {
  const now = Date.parse('2026-11-25T12:00:00.000Z');
  const day = 86_400_000;

  it('reads [since, until) with until defaulting to now', () => {
    expect(recoveryWindow({ since: '2026-11-24T12:00:00Z' }, now, 30)).toEqual({
      problems: [],
      window: { since: now - day, until: now },
    });
    expect(recoveryWindow({ since: '2026-11-24T12:00:00+01:00', until: '2026-11-25T00:00:00.500Z' }, now, 30)).toEqual({
      problems: [],
      window: { since: now - day - 3_600_000, until: Date.parse('2026-11-25T00:00:00.500Z') },
    });
  });

  it('refuses a start before the retention, naming the earliest allowed time; the boundary itself is allowed', () => {
    const oldest = new Date(now - 7 * day).toISOString();
    expect(recoveryWindow({ since: oldest }, now, 7).window).toEqual({ since: now - 7 * day, until: now });
    expect(recoveryWindow({ since: new Date(now - 7 * day - 1).toISOString() }, now, 7)).toEqual({
      problems: [{ field: 'since', message: `must be within the event retention of 7 days: on or after ${oldest}` }],
    });
  });

  it('refuses an empty or inverted window, and a start in the future without until', () => {
    expect(recoveryWindow({ since: '2026-11-25T10:00:00Z', until: '2026-11-25T10:00:00Z' }, now, 30).problems).toEqual([
      { field: 'until', message: 'must be later than since' },
    ]);
    expect(recoveryWindow({ since: '2026-11-25T13:00:00Z' }, now, 30).problems).toEqual([
      { field: 'since', message: 'must be in the past (until defaults to now)' },
    ]);
  });

  it('reports a time that does not parse (a leap second) and leaves other types to the schema', () => {
    expect(recoveryWindow({ since: '2026-11-24T23:59:60Z' }, now, 30).problems).toEqual([
      { field: 'since', message: 'must be an RFC 3339 date-time' },
    ]);
    expect(recoveryWindow({ since: 42 }, now, 30)).toEqual({ problems: [] });
  });

  it('refuses what Date.parse takes but RFC 3339 does not (a date alone, prose, no zone)', () => {
    for (const since of ['2026-11-20', 'Nov 20 2026', '2026-11-20T10:00:00']) {
      expect(recoveryWindow({ since }, now, 30).problems, since).toEqual([{ field: 'since', message: 'must be an RFC 3339 date-time' }]);
    }
    expect(recoveryWindow({ since: '2026-11-20T10:00:00+02:00' }, now, 30).problems).toEqual([]);
    expect(recoveryWindow({}, now, 30)).toEqual({ problems: [] });
  });
});
