import { createLogger, ManualClock } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { type AccountDirectory, Entitlements } from './entitlements';

/** A directory over a mutable table of ranks, recording each call; `down` makes it throw. */
function directory(ranks: Record<string, number>) {
  const calls: string[][] = [];
  const d: AccountDirectory & { down: boolean; calls: string[][] } = {
    down: false,
    calls,
    ranks: async (ids: readonly string[]) => {
      calls.push([...ids]);
      if (d.down) throw new Error('14 UNAVAILABLE: connect ECONNREFUSED');
      return new Map(ids.filter((id) => id in ranks).map((id) => [id, ranks[id] as number]));
    },
  };
  return d;
}

const logger = createLogger({ service: 'test', level: 'silent' });

function setup(ranks: Record<string, number>) {
  const clock = new ManualClock(Date.parse('2026-11-22T08:00:00.000Z'));
  const dir = directory(ranks);
  let unavailable = 0;
  const e = new Entitlements({ directory: dir, clock, logger, ttlMs: 60_000, minRank: 1, onUnavailable: () => unavailable++ });
  return { clock, dir, e, unavailable: () => unavailable };
}

describe('Entitlements', () => {
  it('refuses exactly the accounts below Pro; unknown accounts count as entitled', async () => {
    const { e, dir } = setup({ acct_free: 0, acct_pro: 1, acct_ent: 2 });
    expect(await e.notEntitled(['acct_free', 'acct_pro', 'acct_ent', 'acct_gone', 'acct_free'])).toEqual(new Set(['acct_free']));
    expect(dir.calls).toEqual([['acct_free', 'acct_pro', 'acct_ent', 'acct_gone']]);
  });

  it('asks once per account per TTL, and again after it', async () => {
    const ranks: Record<string, number> = { acct_a: 1 };
    const { e, dir, clock } = setup(ranks);
    expect(await e.notEntitled(['acct_a'])).toEqual(new Set());
    ranks.acct_a = 0; // downgraded
    clock.advance(59_999);
    expect(await e.notEntitled(['acct_a'])).toEqual(new Set());
    expect(dir.calls).toHaveLength(1);
    clock.advance(1);
    expect(await e.notEntitled(['acct_a'])).toEqual(new Set(['acct_a']));
    expect(dir.calls).toHaveLength(2);
  });

  it('fails open when the usage service cannot answer, counts it, and asks again after 5 s (not on every claim)', async () => {
    const { e, dir, clock, unavailable } = setup({ acct_free: 0 });
    dir.down = true;
    expect(await e.notEntitled(['acct_free'])).toEqual(new Set());
    expect(unavailable()).toBe(1);
    dir.down = false;
    clock.advance(4_999);
    expect(await e.notEntitled(['acct_free'])).toEqual(new Set());
    expect(dir.calls).toEqual([['acct_free']]);
    clock.advance(1);
    expect(await e.notEntitled(['acct_free'])).toEqual(new Set(['acct_free']));
    expect(dir.calls).toEqual([['acct_free'], ['acct_free']]);
    expect(unavailable()).toBe(1);
  });

  it('asks in chunks of 1,000 ids', async () => {
    const ids = Array.from({ length: 2500 }, (_, i) => `acct_${i}`);
    const { e, dir } = setup(Object.fromEntries(ids.map((id, i) => [id, i % 2])));
    const refused = await e.notEntitled(ids);
    expect(dir.calls.map((c) => c.length)).toEqual([1000, 1000, 500]);
    expect(refused.size).toBe(1250);
    expect(refused.has('acct_0')).toBe(true);
    expect(refused.has('acct_1')).toBe(false);
  });

  it('forget drops a cached rank, so the next claim asks again', async () => {
    const ranks: Record<string, number> = { acct_a: 0 };
    const { e, dir } = setup(ranks);
    expect(await e.notEntitled(['acct_a'])).toEqual(new Set(['acct_a']));
    e.forget('acct_a');
    ranks.acct_a = 1; // upgraded again
    expect(await e.notEntitled(['acct_a'])).toEqual(new Set());
    expect(dir.calls).toHaveLength(2);
  });
});
