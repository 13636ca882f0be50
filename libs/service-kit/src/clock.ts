import { randomUUID } from 'node:crypto';
import type { IdPrefix } from './ids';

/** Injected time source: production uses systemClock, tests a fixed or manual clock. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests can set and advance without sleeping. */
export class ManualClock implements Clock {
  constructor(private ms: number) {}
  now(): number {
    return this.ms;
  }
  set(ms: number | string | Date): void {
    this.ms = typeof ms === 'number' ? ms : new Date(ms).getTime();
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** Injected id source. */
export type IdSource = () => string;
export const uuidSource: IdSource = () => randomUUID();

export function prefixedId(prefix: IdPrefix, ids: IdSource = uuidSource): string {
  return `${prefix}_${ids()}`;
}

const DAY_MS = 86_400_000;

/** UTC calendar day of an instant, as YYYY-MM-DD. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Start of the next UTC day (the daily reset) in epoch ms. */
export function nextUtcMidnight(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS + DAY_MS;
}

/** ISO 8601 UTC with milliseconds and Z. */
export function isoTimestamp(ms: number | Date): string {
  return (typeof ms === 'number' ? new Date(ms) : ms).toISOString();
}
