import { getOrAdd, iso, type PromiseResult, type Report, type Run, Tally } from './checker-common';
import { matchesThroughout, requiredFrom, stoppedBefore, type Timeline } from './checker-timeline';
import type { ReceiptRecord, Snapshot, SoakMeta } from './history';

type Unfinished = Snapshot['unfinished'][number];
type SnapshotEvent = Snapshot['events'][number];

const pairKey = (sub: string, event: string) => `${sub} ${event}`;

/** Receipts by subscription, then by event id, each list in the order they arrived. */
export function receiptsBySub(receipts: ReceiptRecord[]): Map<string, Map<string, ReceiptRecord[]>> {
  const bySub = new Map<string, Map<string, ReceiptRecord[]>>();
  for (const r of receipts) {
    getOrAdd(
      getOrAdd(bySub, r.sub, () => new Map<string, ReceiptRecord[]>()),
      r.event,
      () => [],
    ).push(r);
  }
  return bySub;
}

/** The first index of a sorted list of events committed strictly after `t`. */
function firstAfter(events: SnapshotEvent[], t: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((events[mid] as SnapshotEvent).createdAt <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Why a delivery's attempts break the retry schedule (docs/dispatcher.md §4), or null. Retry n
 * starts at least schedule[n-1] × (1 − jitter) after attempt n ended, so after it started; 5 ms of
 * slack for the clocks' rounding. Only consecutive attempt numbers are compared: an attempt whose
 * lease ended without an outcome has no row, and the next one follows the lease, not the schedule.
 * A `failed` delivery used the whole schedule: its last attempt is number 1 + the schedule's
 * length (a higher number only when an attempt before it left no row).
 */
export function scheduleBreak(u: Unfinished, meta: SoakMeta): string | null {
  const sorted = [...u.attempts].sort((a, b) => a.n - b.n);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1] as Unfinished['attempts'][number];
    const b = sorted[i] as Unfinished['attempts'][number];
    const delay = meta.retryScheduleMs[a.n - 1];
    if (b.n !== a.n + 1 || delay === undefined) continue;
    const min = Math.round(delay * (1 - meta.retryJitter)) - 5;
    const gap = b.startedAt - a.startedAt;
    if (gap < min) return `attempt ${b.n} started ${gap} ms after attempt ${a.n}, the schedule allows no less than ${min} ms`;
  }
  if (u.status !== 'failed') return null;
  const expected = 1 + meta.retryScheduleMs.length;
  const last = sorted.at(-1)?.n ?? 0;
  if (last < expected) return `failed after attempt ${last}, the schedule makes ${expected} attempts`;
  if (last > expected && sorted.length >= last) return `failed after ${last} attempts, the schedule makes ${expected}`;
  return null;
}

/** A required (subscription, event) pair never received: its delivery failed (the schedule is checked apart) or is pending, else it is lost. */
function checkMissing(tally: Tally, sub: string, e: SnapshotEvent, unfinished: Unfinished[]) {
  if (unfinished.some((u) => u.status === 'failed' || u.status === 'pending')) return;
  const why = unfinished.some((u) => u.status === 'cancelled') ? ' (its delivery was cancelled, and no deactivation of it is known)' : '';
  tally.fail(() => `lost: event ${e.id} (${e.type}, committed ${iso(e.createdAt)}) never reached sub ${sub}${why}`);
}

/** The same event to the same subscription always carries the same webhook-id, its event id (docs/webhooks.md, "Signatures"). */
function checkIds(tally: Tally, sub: string, event: string, list: ReceiptRecord[]): void {
  if (event === '') {
    tally.fail(`a receipt of sub ${sub} at ${iso((list[0] as ReceiptRecord).t)} has no event id in its body`);
    return;
  }
  const ids = [...new Set(list.map((r) => r.webhookId))];
  if (ids.length > 1) tally.fail(`event ${event} reached sub ${sub} under ${ids.length} webhook-ids: ${ids.join(', ')}`);
  else if (ids[0] !== event) tally.fail(`event ${event} reached sub ${sub} under webhook-id ${ids[0]}, not its event id`);
}

/** Received again after the receiver answered 2xx: a duplicate of at-least-once (a retry of a failed attempt is not one). */
function isDuplicate(list: ReceiptRecord[]): boolean {
  const firstOk = list.findIndex((r) => typeof r.answer === 'number' && r.answer >= 200 && r.answer < 300);
  return firstOk >= 0 && firstOk < list.length - 1;
}

/**
 * Delivery: every event a subscription must get reached it (a receipt), or its delivery failed
 * after the whole retry schedule (or is still pending at the end); every unfinished delivery kept
 * the schedule; one webhook-id per event. Checked: the required (subscription, event) pairs.
 */
export function checkDelivery(run: Run, tls: Map<string, Timeline>): { result: PromiseResult; duplicates: Report['duplicates'] } {
  const { meta, snapshot } = run;
  const tally = new Tally('delivery');
  const bySub = receiptsBySub(run.receipts);
  const unfinished = new Map<string, Unfinished[]>();
  for (const u of snapshot.unfinished) getOrAdd(unfinished, pairKey(u.sub, u.event), () => []).push(u);
  const events = [...snapshot.events].sort((a, b) => a.createdAt - b.createdAt);
  for (const tl of tls.values()) {
    const from = requiredFrom(tl, meta.inFlightBoundMs);
    if (from === null) continue;
    const received = bySub.get(tl.id);
    for (let i = firstAfter(events, from); i < events.length; i++) {
      const e = events[i] as SnapshotEvent;
      if (!matchesThroughout(tl, e)) continue;
      tally.checked++;
      if (!received?.has(e.id)) checkMissing(tally, tl.id, e, unfinished.get(pairKey(tl.id, e.id)) ?? []);
    }
  }
  const drain = run.end?.drain;
  if (drain && !drain.drained) {
    tally.checked++;
    tally.fail(
      `the system had not caught up after the run: ${drain.pending} deliveries pending, ${drain.unsent} events not yet fanned out`,
    );
  }
  for (const u of snapshot.unfinished) {
    const why = scheduleBreak(u, meta);
    if (why) tally.fail(`the ${u.status} delivery of ${u.event} to sub ${u.sub} broke the retry schedule: ${why}`);
  }
  const duplicates: Report['duplicates'] = { count: 0, examples: [] };
  for (const [sub, byEvent] of bySub) {
    for (const [event, list] of byEvent) {
      checkIds(tally, sub, event, list);
      if (!isDuplicate(list)) continue;
      duplicates.count++;
      if (duplicates.examples.length < 5) duplicates.examples.push(`${event} → ${sub} ×${list.length}`);
    }
  }
  return { result: tally.result(), duplicates };
}

/**
 * Deactivation: no receipt later than the bound after a deactivation or deletion surely committed
 * (or the system's own deactivation), unless a reactivation may have come in between
 * (docs/dispatcher.md §5). Checked: receipts of known subscriptions.
 */
export function checkDeactivation(run: Run, tls: Map<string, Timeline>): PromiseResult {
  const tally = new Tally('deactivation');
  const bound = run.meta.inFlightBoundMs;
  for (const r of run.receipts) {
    const tl = tls.get(r.sub);
    if (!tl) continue;
    tally.checked++;
    const stop = stoppedBefore(tl, r.t, bound);
    if (stop) tally.fail(() => `event ${r.event} reached sub ${r.sub} at ${iso(r.t)}, ${r.t - stop.t1} ms after its ${stop.label}`);
  }
  return tally.result();
}
