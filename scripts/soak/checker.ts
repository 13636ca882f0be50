import { bump, getOrAdd, iso, type PromiseResult, type Report, type Run, splitHistory, Tally, utcDay } from './checker-common';
import { checkDeactivation, checkDelivery } from './checker-delivery';
import { checkSignatures } from './checker-signatures';
import { timelines } from './checker-timeline';
import type { HistoryRecord, RequestRecord, Snapshot } from './history';

/**
 * The soak's checker (docs/soak.md): the history and the databases' snapshot against the
 * system's promises. Pure: no I/O, no clock; every time it reads is the history's. Conservative:
 * an operation whose outcome is unknown (no answer, a 5xx) is never held against the system.
 */
export type { PromiseName, PromiseResult, Report } from './checker-common';

/** Whether a request is counted: surely, surely not, or either (no answer, a 5xx, an answer that may come from either side). */
export type Counted = 'yes' | 'no' | 'maybe';

/**
 * The counting rule of docs/metering.md ("What counts", "Counting follows the answer"): every
 * authenticated `/v1` request is counted whatever its outcome, except the daily limit's 429
 * (`RATE_LIMIT_EXCEEDED`), a 304, an unauthenticated 401 and a malformed request refused before
 * authentication (400 `BAD_REQUEST`). So: 2xx and any other 4xx (403 tier gate, 404, 409, 400
 * `VALIDATION_ERROR`…) are counted. A 429 is not for a Free account (its daily limit) but may be
 * for Pro (a service's own limit, e.g. recover's, answered after counting). A 503 is counted when a
 * domain service gave it and not when authorization did; no answer or another 5xx may be either.
 */
export function counted(r: RequestRecord): Counted {
  const s = r.status;
  if (!r.path.startsWith('/v1/') && r.path !== '/v1') return 'no';
  if (s === null || s >= 500) return 'maybe';
  if (s >= 200 && s < 300) return 'yes';
  if (s === 304 || s === 401) return 'no';
  if (s === 429) return r.tier === 'free' ? 'no' : 'maybe';
  if (s === 400 && r.code === 'BAD_REQUEST') return 'maybe';
  return s >= 400 && s < 500 ? 'yes' : 'maybe';
}

interface DayCount {
  account: string;
  day: string;
  ok: number;
  other: number;
  maybe: number;
  free: boolean;
}

/** The gateway's answers per account and UTC day; a request spanning midnight may be counted on either day. */
function answersByDay(run: Run): Map<string, DayCount> {
  const days = new Map<string, DayCount>();
  const get = (account: string, day: string): DayCount => {
    const k = `${account} ${day}`;
    return getOrAdd(days, k, () => ({ account, day, ok: 0, other: 0, maybe: 0, free: false }));
  };
  for (const r of run.requests) {
    if (r.via !== 'gateway' || !r.account) continue;
    const c = counted(r);
    const d0 = utcDay(r.t0);
    const d1 = utcDay(r.t1);
    const d = get(r.account, d0);
    if (r.tier === 'free') d.free = true;
    if (c === 'no') continue;
    if (d0 !== d1) {
      d.maybe++;
      get(r.account, d1).maybe++;
    } else if (c === 'maybe') d.maybe++;
    else if (r.status !== null && r.status >= 200 && r.status < 300) d.ok++;
    else d.other++;
  }
  for (const u of run.snapshot.usage) get(u.account, u.day);
  return days;
}

function storedCounts(snapshot: Snapshot): Map<string, number> {
  return new Map(snapshot.usage.map((u) => [`${u.account} ${u.day}`, u.count]));
}

/** Metering: per account and UTC day, the stored count is between the surely counted answers and those plus the ambiguous ones. */
function checkMetering(run: Run, days: Map<string, DayCount>): PromiseResult {
  const tally = new Tally('metering');
  const stored = storedCounts(run.snapshot);
  for (const [k, d] of days) {
    tally.checked++;
    const s = stored.get(k) ?? 0;
    const sure = d.ok + d.other;
    if (s >= sure && s <= sure + d.maybe) continue;
    const other = d.other > 0 ? `, other counted answers ${d.other}` : '';
    tally.fail(`account ${d.account} on ${d.day}: stored ${s}, answers 2xx ${d.ok}${other} (+${d.maybe} ambiguous)`);
  }
  return tally.result();
}

/** Free limit: a Free account's day never stores nor answers 2xx more than the daily limit (docs/metering.md: request 101 gets 429). */
function checkFreeLimit(run: Run, days: Map<string, DayCount>): PromiseResult {
  const tally = new Tally('free-limit');
  const stored = storedCounts(run.snapshot);
  const freeAccounts = new Set([...days.values()].filter((d) => d.free).map((d) => d.account));
  const limit = run.meta.freeDailyLimit;
  for (const [k, d] of days) {
    if (!freeAccounts.has(d.account)) continue;
    tally.checked++;
    const s = stored.get(k) ?? 0;
    if (s > limit || d.ok > limit) tally.fail(`free account ${d.account} on ${d.day}: stored ${s}, answers 2xx ${d.ok}, limit ${limit}`);
  }
  return tally.result();
}

/** The fault windows, each stretched by the recovery time, merged and sorted. */
function faultWindows(run: Run): Array<[number, number]> {
  const spans = run.faults.map((f): [number, number] => [f.start, f.end + run.meta.recoveryMs]).sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const [s, e] of spans) {
    const last = merged.at(-1);
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else merged.push([s, e]);
  }
  return merged;
}

/** Whether [t0, t1] meets a window (sorted, disjoint). */
function meetsWindow(windows: Array<[number, number]>, t0: number, t1: number): boolean {
  let lo = 0;
  let hi = windows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((windows[mid] as [number, number])[1] < t0) lo = mid + 1;
    else hi = mid;
  }
  const w = windows[lo];
  return w !== undefined && w[0] <= t1;
}

/**
 * Errors: no 5xx but a 503 with Retry-After, anywhere; a 503 or no answer only while a fault (or
 * its recovery) was under way — a request whose [t0, t1] meets a window, since a request sent just
 * before a fault may be held by it. Checked: every request.
 */
function checkErrors(run: Run): PromiseResult {
  const tally = new Tally('errors');
  const windows = faultWindows(run);
  for (const r of run.requests) {
    tally.checked++;
    const what = `${r.via} ${r.method} ${r.path} at ${iso(r.t0)}`;
    const s = r.status;
    if (s !== null && s >= 500 && !(s === 503 && r.retryAfter)) {
      tally.fail(`${what} answered ${s}${s === 503 ? ' without Retry-After' : ''}`);
    } else if ((s === null || s === 503) && !meetsWindow(windows, r.t0, r.t1)) {
      tally.fail(`${what} ${s === null ? `got no answer (${r.error ?? 'no error'})` : 'answered 503'} outside any fault window`);
    }
  }
  return tally.result();
}

/**
 * Processes: at the end every replica is alive and its peak RSS within its chart limit (the end
 * record's; when that is 0, the meta's limit of its service, the name without its `-N`).
 */
function checkProcesses(run: Run): PromiseResult {
  const tally = new Tally('processes');
  if (!run.end) {
    tally.checked++;
    tally.fail('the run has no end record');
    return tally.result();
  }
  for (const p of run.end.processes) {
    tally.checked++;
    const mib = (b: number) => `${(b / 1024 ** 2).toFixed(1)} MiB`;
    const limit = p.limitBytes > 0 ? p.limitBytes : run.meta.rssLimits[p.name.replace(/-\d+$/, '')];
    if (!p.alive) tally.fail(`${p.name} is not alive at the end`);
    else if (limit === undefined) tally.fail(`${p.name} has no memory limit to hold its peak RSS of ${mib(p.peakRssBytes)} to`);
    else if (p.peakRssBytes > limit) tally.fail(`${p.name} peaked at ${mib(p.peakRssBytes)} RSS, over its limit of ${mib(limit)}`);
    else if ((p.crashes ?? 0) > 0) tally.fail(`${p.name} exited ${p.crashes} time(s) with no fault to cause it`);
  }
  return tally.result();
}

function counts(run: Run): Pick<Report, 'faults' | 'operations'> {
  const faults: Record<string, number> = {};
  const operations: Record<string, number> = {};
  for (const f of run.faults) bump(faults, f.kind);
  for (const r of run.requests) bump(operations, `${r.via} ${r.method}`);
  for (const s of run.subs) bump(operations, `sub ${s.op}`);
  return { faults, operations };
}

/** Checks a run's history and the snapshot taken after it against every promise. */
export function check(history: HistoryRecord[], snapshot: Snapshot): Report {
  const run = splitHistory(history, snapshot);
  const days = answersByDay(run);
  const tls = timelines(run);
  const delivery = checkDelivery(run, tls);
  const promises = [
    checkMetering(run, days),
    checkFreeLimit(run, days),
    delivery.result,
    checkDeactivation(run, tls),
    checkSignatures(run, tls),
    checkErrors(run),
    checkProcesses(run),
  ];
  return {
    promises,
    ...counts(run),
    duplicates: delivery.duplicates,
    violations: promises.reduce((n, p) => n + p.violations, 0),
  };
}
