import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, PrivatePostgres } from '../src';

async function tryQuery(url: string, timeoutMs = 2000): Promise<string> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  c.on('error', () => undefined);
  try {
    await c.connect();
    const { rows } = await c.query<{ v: string }>("SELECT 'ok' AS v");
    return rows[0]?.v ?? 'none';
  } catch (err) {
    return `error: ${(err as Error).message}`;
  } finally {
    await c.end().catch(() => undefined);
  }
}

describe('Postgres fault harness', () => {
  let pgs: PrivatePostgres;
  beforeAll(async () => {
    pgs = await PrivatePostgres.start();
    await pgs.createDatabase('faults');
  });
  afterAll(async () => {
    await pgs?.destroy();
  });

  it('stops fast and starts again on the same port', async () => {
    expect(await tryQuery(pgs.url('faults'))).toBe('ok');
    await pgs.stopFast();
    expect(await tryQuery(pgs.url('faults'))).toMatch(/^error: .*ECONNREFUSED/);
    await pgs.start();
    expect(await tryQuery(pgs.url('faults'))).toBe('ok');
  });

  it('terminates every backend of one database, and an idle client sees the error', async () => {
    const c = new pg.Client({ connectionString: pgs.url('faults') });
    const errors: string[] = [];
    c.on('error', (e) => errors.push(e.message));
    await c.connect();
    expect(await pgs.backendCount('faults')).toBe(1);
    expect(await pgs.terminateBackends('faults')).toBe(1);
    await expect.poll(() => errors.length).toBeGreaterThan(0);
    expect(errors[0]).toMatch(/terminating connection due to administrator command/);
    expect(await pgs.backendCount('faults')).toBe(0);
    await c.end().catch(() => undefined);
  });

  it('proxies, adds latency, drops connections and black-holes traffic', async () => {
    const proxy = await FaultProxy.start({ port: pgs.port });
    const url = `postgres://postgres@127.0.0.1:${proxy.port}/faults`;
    try {
      expect(await tryQuery(url)).toBe('ok');

      proxy.setLatency(300);
      const t0 = Date.now();
      expect(await tryQuery(url, 5000)).toBe('ok');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(600);
      proxy.setLatency(0);

      const held = new pg.Client({ connectionString: url });
      const errors: string[] = [];
      held.on('error', (e) => errors.push(e.message));
      await held.connect();
      expect(proxy.connections).toBe(1);
      proxy.dropAll();
      await expect.poll(() => errors.length).toBeGreaterThan(0);
      expect(errors[0]).toMatch(/Connection terminated unexpectedly|ECONNRESET/);
      expect(proxy.connections).toBe(0);

      proxy.blackhole();
      const t1 = Date.now();
      expect(await tryQuery(url, 1000)).toMatch(/^error: .*timeout/i);
      expect(Date.now() - t1).toBeLessThan(3000);
      proxy.heal();
      expect(await tryQuery(url)).toBe('ok');
    } finally {
      await proxy.close();
    }
  });
});
