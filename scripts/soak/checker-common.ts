import type {
  EndRecord,
  FaultRecord,
  HistoryRecord,
  ReceiptRecord,
  RequestRecord,
  Snapshot,
  SoakMeta,
  SubscriptionRecord,
} from './history';

/** The promises the checker holds the run to (docs/soak.md). */
export type PromiseName = 'metering' | 'free-limit' | 'delivery' | 'deactivation' | 'signatures' | 'errors' | 'processes';

export interface PromiseResult {
  name: PromiseName;
  held: boolean;
  /** How many items (account-days, required deliveries, receipts, requests, processes) were checked. */
  checked: number;
  violations: number;
  /** The first counter-example, readable. */
  first?: string;
}

export interface Report {
  promises: PromiseResult[];
  /** Faults injected, by kind. */
  faults: Record<string, number>;
  /** Requests by `via method` (`gateway GET`), subscription operations by `sub op` (`sub create`). */
  operations: Record<string, number>;
  /** (subscription, event) pairs received again after the receiver had answered 2xx (at least once: not a violation). */
  duplicates: { count: number; examples: string[] };
  /** The sum of every promise's violations. */
  violations: number;
}

/** The history split by kind, with the snapshot: what every promise's check reads. */
export interface Run {
  meta: SoakMeta;
  requests: RequestRecord[];
  subs: SubscriptionRecord[];
  receipts: ReceiptRecord[];
  faults: FaultRecord[];
  end: EndRecord | undefined;
  snapshot: Snapshot;
}

export function splitHistory(history: HistoryRecord[], snapshot: Snapshot): Run {
  let meta: SoakMeta | undefined;
  const run: Omit<Run, 'meta'> = { requests: [], subs: [], receipts: [], faults: [], end: undefined, snapshot };
  for (const r of history) {
    if (r.k === 'meta') meta = r;
    else if (r.k === 'req') run.requests.push(r);
    else if (r.k === 'sub') run.subs.push(r);
    else if (r.k === 'recv') run.receipts.push(r);
    else if (r.k === 'fault') run.faults.push(r);
    else if (r.k === 'end') run.end = r;
  }
  if (!meta) throw new Error('the history has no meta record');
  run.receipts.sort((a, b) => a.t - b.t);
  return { meta, ...run };
}

/**
 * What an operation's answer says about its effect: a 2xx took effect (`done`); no answer or a 5xx
 * may or may not have (`maybe`); any other answer (4xx) did not (`not`).
 */
export type Effect = 'done' | 'maybe' | 'not';

export function effect(status: number | null): Effect {
  if (status === null || status >= 500) return 'maybe';
  return status >= 200 && status < 300 ? 'done' : 'not';
}

/** Counts one promise's checks and violations and keeps the first counter-example. */
export class Tally {
  checked = 0;
  violations = 0;
  first: string | undefined;

  constructor(readonly name: PromiseName) {}

  /** One violation; the message may be made lazily (only the first is kept). */
  fail(message: string | (() => string)): void {
    this.violations++;
    if (this.first === undefined) this.first = typeof message === 'string' ? message : message();
  }

  result(): PromiseResult {
    return {
      name: this.name,
      held: this.violations === 0,
      checked: this.checked,
      violations: this.violations,
      ...(this.first === undefined ? {} : { first: this.first }),
    };
  }
}

export const iso = (ms: number): string => new Date(ms).toISOString();

/** The UTC day (YYYY-MM-DD) of a time. */
export const utcDay = (ms: number): string => iso(ms).slice(0, 10);

/** Adds one to a counter of a record. */
export function bump(counts: Record<string, number>, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}

/** The map's value for a key, made and stored first if missing. */
export function getOrAdd<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  const found = map.get(key);
  if (found !== undefined) return found;
  const made = make();
  map.set(key, made);
  return made;
}
