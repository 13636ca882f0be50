import { type Effect, effect, getOrAdd, iso, type Run } from './checker-common';
import type { SubscriptionRecord } from './history';

/** A deactivation or deletion: committed at some time in [t0, t1] when `definite`, perhaps (or not at all) otherwise. */
export interface Stop {
  t0: number;
  t1: number;
  definite: boolean;
  delete: boolean;
  label: string;
}

/** A filter a subscription had (create or patch): from some time in [t0, t1]; `maybe` when the patch's outcome is unknown. */
export interface Config {
  t0: number;
  t1: number;
  effect: Effect;
  events: string[];
  states: string[] | null;
}

/** One subscription as the history and the snapshot tell it. */
export interface Timeline {
  id: string;
  /** The answered (2xx) create; undefined when the subscription is only known by its receipts. */
  created: SubscriptionRecord | undefined;
  /** Every lifecycle operation of it (create included), in the order they were sent. */
  ops: SubscriptionRecord[];
  stops: Stop[];
  /** Reactivations that took effect or may have (4xx left out). */
  reactivations: Array<{ t0: number; t1: number; definite: boolean }>;
  configs: Config[];
}

function emptyTimeline(id: string): Timeline {
  return { id, created: undefined, ops: [], stops: [], reactivations: [], configs: [] };
}

/** The lifecycle operations' part of a timeline. */
function addOp(tl: Timeline, op: SubscriptionRecord, boundMs: number): void {
  const e = effect(op.status);
  tl.ops.push(op);
  if (e === 'not') return;
  const definite = e === 'done';
  if (op.op === 'create' && definite) tl.created = op;
  if ((op.op === 'create' && definite) || op.op === 'patch') {
    tl.configs.push({ t0: op.t0, t1: op.t1, effect: e, events: op.events ?? [], states: op.states ?? null });
  }
  if (op.op === 'deactivate' || op.op === 'delete') {
    // An unanswered request may still be carried out after the client gave up (a paused gateway): up to the bound later.
    tl.stops.push({
      t0: op.t0,
      t1: definite ? op.t1 : op.t1 + boundMs,
      definite,
      delete: op.op === 'delete',
      label: `${definite ? '' : 'unanswered '}${op.op} at ${iso(op.t0)} (answered ${op.status ?? 'never'})`,
    });
  }
  if (op.op === 'reactivate') tl.reactivations.push({ t0: op.t0, t1: op.t1, definite });
}

/**
 * Every subscription's timeline: its operations from the history; the dispatcher's own
 * deactivations from the snapshot (definite, at `deactivatedAt`); and, as possible deactivations,
 * each delivery that failed after the whole retry schedule (docs/dispatcher.md §4: the dispatcher
 * deactivates then, which a later reactivation hides from the snapshot).
 */
export function timelines(run: Run): Map<string, Timeline> {
  const { meta, snapshot } = run;
  const bound = meta.inFlightBoundMs;
  const map = new Map<string, Timeline>();
  const get = (id: string): Timeline => getOrAdd(map, id, () => emptyTimeline(id));
  for (const op of [...run.subs].sort((a, b) => a.t0 - b.t0)) if (op.sub) addOp(get(op.sub), op, bound);
  for (const s of snapshot.subscriptions) {
    if (s.active || s.deactivatedAt === null) continue;
    const label = `deactivated by the system at ${iso(s.deactivatedAt)} (${s.reason ?? 'no reason'})`;
    get(s.id).stops.push({ t0: s.deactivatedAt, t1: s.deactivatedAt, definite: true, delete: false, label });
  }
  const attempts = 1 + meta.retryScheduleMs.length;
  for (const u of snapshot.unfinished) {
    const last = u.attempts.reduce((m, a) => (a.n > m.n ? a : m), { n: 0, startedAt: 0 });
    if (u.status !== 'failed' || last.n < attempts) continue;
    const label = `possible deactivation after the failed delivery of ${u.event} (${iso(last.startedAt)})`;
    get(u.sub).stops.push({ t0: last.startedAt, t1: last.startedAt + bound, definite: false, delete: false, label });
  }
  return map;
}

/**
 * From when the subscription must receive every event it matches (events committed strictly
 * after it), or null when no event is required: it was never surely created, or it was (maybe)
 * deleted. An event followed by a (maybe) deactivation within the bound or at any later time is
 * not required (its fan-out may come after the deactivation), so only events after the last stop's
 * latest commit plus the bound are, and only once a reactivation surely came after that stop.
 */
export function requiredFrom(tl: Timeline, boundMs: number): number | null {
  if (!tl.created) return null;
  if (tl.stops.some((s) => s.delete)) return null;
  let from = tl.created.t1;
  if (tl.stops.length === 0) return from;
  const lastStop = Math.max(...tl.stops.map((s) => s.t1));
  const back = tl.reactivations.filter((r) => r.definite && r.t0 >= lastStop).sort((a, b) => a.t1 - b.t1)[0];
  if (!back) return null;
  from = Math.max(from, lastStop + boundMs, back.t1);
  return from;
}

function passes(c: Config, type: string, states: string[]): boolean {
  if (!c.events.includes(type)) return false;
  return c.states === null || states.some((s) => c.states?.includes(s));
}

/**
 * Whether the subscription matches an event under every filter it may have had from the event's
 * commit on (the fan-out may come later): the last filter surely in force before, every filter
 * set (or maybe set) after, and every filter whose patch has an unknown outcome.
 */
export function matchesThroughout(tl: Timeline, event: { type: string; createdAt: number; states: string[] }): boolean {
  let before: Config | undefined;
  for (const c of tl.configs) {
    if (c.effect === 'done' && c.t1 < event.createdAt) {
      if (!before || c.t1 >= before.t1) before = c;
      continue;
    }
    if (!passes(c, event.type, event.states)) return false;
  }
  return before === undefined || passes(before, event.type, event.states);
}

/** The surely committed stop (deactivation, deletion, the system's deactivation) that a receipt at `t` came too late after, if any. */
export function stoppedBefore(tl: Timeline, t: number, boundMs: number): Stop | undefined {
  for (const s of tl.stops) {
    if (!s.definite || s.t1 > t - boundMs) continue;
    // A reactivation that may have committed after the stop and before the receipt restarts delivery.
    const restarted = tl.reactivations.some((r) => r.t1 > s.t0 && r.t0 < t);
    if (!restarted) return s;
  }
  return undefined;
}
