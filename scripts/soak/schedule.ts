import type { FaultKind } from './history';

/**
 * The nemesis's schedule, drawn from the seed alone: the same seed, duration and topology give
 * the same faults at the same offsets, so a violation can be replayed (docs/soak.md).
 */

/** mulberry32: a small, well-known 32-bit generator; uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export interface PlannedFault {
  id: number;
  kind: FaultKind;
  /** A replica (`dispatcher-2`), a backend (`postgres`, `redis`, `nats-n2`) or a link (`link:postgres`). */
  target: string;
  /** Offset from the start of the run (ms). */
  at: number;
  durationMs: number;
  /** link-latency: the delay added to each chunk (ms). */
  latencyMs?: number;
}

export interface ScheduleOptions {
  seed: number;
  durationMs: number;
  redis: 'single' | 'cluster';
  /** Replicas per service, e.g. { gateway: 2, usage: 2, … }. */
  replicas: Record<string, number>;
  /** Mean time between two fault starts (ms); default 12 s. */
  meanGapMs?: number;
  /** No fault starts before this offset, nor ends after durationMs − quietEndMs (defaults 20 s / 30 s). */
  warmupMs?: number;
  quietEndMs?: number;
}

/** Each kind: its weight in the draw and its duration range (ms). */
const KINDS: Record<FaultKind, { weight: number; min: number; max: number }> = {
  kill: { weight: 6, min: 1_000, max: 5_000 },
  pause: { weight: 3, min: 1_000, max: 6_000 },
  'postgres-stop': { weight: 2, min: 2_000, max: 8_000 },
  'postgres-terminate': { weight: 2, min: 0, max: 0 },
  'redis-kill': { weight: 2, min: 1_000, max: 5_000 },
  'redis-pause': { weight: 2, min: 1_000, max: 4_000 },
  'nats-kill': { weight: 2, min: 2_000, max: 10_000 },
  'link-latency': { weight: 2, min: 5_000, max: 15_000 },
  'link-blackhole': { weight: 2, min: 2_000, max: 6_000 },
};

/** Links the fault proxies sit on; the Redis link only with a single Redis (a cluster's clients follow its nodes' own addresses). */
function links(redis: 'single' | 'cluster'): string[] {
  return redis === 'single' ? ['link:postgres', 'link:redis', 'link:usage'] : ['link:postgres', 'link:usage'];
}

/** One of the items, drawn with `random`. */
export function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function drawKind(random: () => number): FaultKind {
  const total = Object.values(KINDS).reduce((s, k) => s + k.weight, 0);
  let r = random() * total;
  for (const [kind, k] of Object.entries(KINDS) as Array<[FaultKind, (typeof KINDS)[FaultKind]]>) {
    r -= k.weight;
    if (r < 0) return kind;
  }
  return 'kill';
}

/**
 * The fault's target, and the group of targets that must not be faulted at the same time: one
 * Postgres fault at a time, one Redis fault, one NATS node (a second would lose the stream's quorum),
 * one fault per link and per replica.
 */
function drawTarget(random: () => number, kind: FaultKind, options: ScheduleOptions): { target: string; group: string } {
  const replicas = Object.entries(options.replicas).flatMap(([name, n]) => Array.from({ length: n }, (_, i) => `${name}-${i + 1}`));
  switch (kind) {
    case 'kill':
    case 'pause': {
      const target = pick(random, replicas);
      return { target, group: target };
    }
    case 'postgres-stop':
    case 'postgres-terminate':
      return { target: 'postgres', group: 'postgres' };
    case 'redis-kill':
    case 'redis-pause':
      return { target: 'redis', group: 'redis' };
    case 'nats-kill':
      return { target: pick(random, ['nats-n1', 'nats-n2', 'nats-n3']), group: 'nats' };
    default: {
      const target = pick(random, links(options.redis));
      // A link fault and a fault of the backend behind it are one group: a black hole on a stopped Postgres tells nothing more.
      return { target, group: target === 'link:usage' ? target : target.slice('link:'.length) };
    }
  }
}

/** The whole schedule: fault starts at exponential gaps from the seed, each drawn a kind, target and duration; a draw whose group is busy is skipped. */
export function planFaults(options: ScheduleOptions): PlannedFault[] {
  const random = seededRandom(options.seed);
  const meanGap = options.meanGapMs ?? 12_000;
  const warmup = options.warmupMs ?? 20_000;
  const lastEnd = options.durationMs - (options.quietEndMs ?? 30_000);
  const busyUntil = new Map<string, number>();
  const faults: PlannedFault[] = [];
  let at = warmup;
  for (;;) {
    at += Math.round(-Math.log(1 - random()) * meanGap);
    const kind = drawKind(random);
    const { target, group } = drawTarget(random, kind, options);
    const k = KINDS[kind];
    const durationMs = k.min + Math.round(random() * (k.max - k.min));
    const latencyMs = kind === 'link-latency' ? 50 + Math.round(random() * 250) : undefined;
    if (at + durationMs > lastEnd) break;
    if ((busyUntil.get(group) ?? 0) > at) continue;
    // A restart takes a few seconds: the group stays busy a little after the fault ends.
    busyUntil.set(group, at + durationMs + 3_000);
    faults.push({ id: faults.length + 1, kind, target, at, durationMs, ...(latencyMs === undefined ? {} : { latencyMs }) });
  }
  return faults;
}
