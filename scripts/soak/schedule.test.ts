import { describe, expect, it } from 'vitest';
import { planFaults, type ScheduleOptions, seededRandom } from './schedule';

const REPLICAS = { gateway: 2, usage: 2, facility: 2, webhook: 2, dispatcher: 2 };
const options = (seed: number, extra: Partial<ScheduleOptions> = {}): ScheduleOptions => ({
  seed,
  durationMs: 30 * 60_000,
  redis: 'single',
  replicas: REPLICAS,
  ...extra,
});

/** The group a fault's target belongs to: two faults of one group never overlap. */
function group(target: string): string {
  if (target.startsWith('nats-')) return 'nats';
  if (target === 'link:postgres') return 'postgres';
  if (target === 'link:redis') return 'redis';
  return target;
}

describe('the nemesis schedule', () => {
  it('is the same for the same seed, and differs for another seed', () => {
    expect(planFaults(options(42))).toEqual(planFaults(options(42)));
    expect(planFaults(options(43))).not.toEqual(planFaults(options(42)));
  });

  it('a seeded generator replays its sequence', () => {
    const a = seededRandom(7);
    const b = seededRandom(7);
    const xs = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });

  it('draws every kind of fault in a 30-minute run, each within the run and its target group free', () => {
    for (const seed of [1, 2, 3]) {
      const faults = planFaults(options(seed));
      expect(new Set(faults.map((f) => f.kind))).toEqual(
        new Set([
          'kill',
          'pause',
          'postgres-stop',
          'postgres-terminate',
          'redis-kill',
          'redis-pause',
          'nats-kill',
          'link-latency',
          'link-blackhole',
        ]),
      );
      for (const f of faults) {
        expect(f.at).toBeGreaterThanOrEqual(20_000);
        expect(f.at + f.durationMs).toBeLessThanOrEqual(30 * 60_000 - 30_000);
      }
      for (const [i, f] of faults.entries())
        for (const g of faults.slice(i + 1))
          if (group(f.target) === group(g.target)) expect(g.at >= f.at + f.durationMs || f.at >= g.at + g.durationMs).toBe(true);
      expect(faults.map((f) => f.id)).toEqual(faults.map((_, i) => i + 1));
    }
  });

  it('targets no Redis link with a Redis Cluster, and every replica name exists', () => {
    const faults = planFaults(options(5, { redis: 'cluster' }));
    expect(faults.some((f) => f.target === 'link:redis')).toBe(false);
    const names = new Set(Object.entries(REPLICAS).flatMap(([s, n]) => Array.from({ length: n }, (_, i) => `${s}-${i + 1}`)));
    for (const f of faults.filter((x) => x.kind === 'kill' || x.kind === 'pause')) expect(names.has(f.target)).toBe(true);
  });
});
