import { eventually, PrivateRedisCluster, type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Exact counting on a Redis Cluster (3 primaries, 3 replicas) through 2 gateways, and through the
 * loss of the primary that holds a Free account's counter (SIGKILL; its replica takes over).
 */
let cluster: PrivateRedisCluster;
let stack: Stack;

beforeAll(async () => {
  cluster = await PrivateRedisCluster.start();
  stack = await startStack({ label: 'redis_cluster', gateways: 2, redisClusterNodes: cluster.addresses });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await cluster?.stop();
});

const today = () => new Date().toISOString().slice(0, 10);

async function call(base: string, apiKey: string): Promise<number> {
  const res = await fetch(`${base}/v1/account/usage`, { headers: { 'x-api-key': apiKey } });
  await res.arrayBuffer();
  return res.status;
}

/**
 * One client request: a 503 (Retry-After; an authorization deadline missed on a busy machine, or
 * a slot's primary lost) is not counted and is sent again, as a client would, until it gets an answer.
 */
async function request(base: string, apiKey: string, tally: { unavailable: number }): Promise<number> {
  for (;;) {
    const status = await call(base, apiKey);
    if (status !== 503) return status;
    tally.unavailable++;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('Metering on a Redis Cluster', () => {
  it('gives a Free key exactly 100 successes of 300 concurrent requests through 2 gateways', async () => {
    const { apiKey, accountId } = await stack.createAccount('free');
    const tally = { unavailable: 0 };
    const statuses = await Promise.all(Array.from({ length: 300 }, (_, i) => request(stack.gatewayUrls[i % 2] as string, apiKey, tally)));
    expect(statuses.filter((s) => s === 200).length).toBe(100);
    expect(statuses.filter((s) => s === 429).length).toBe(200);
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === 100,
    );
  });

  it('still gives exactly 100 when the primary holding the counter is killed mid-run (its replica takes over)', async () => {
    const { apiKey, accountId } = await stack.createAccount('free');
    const counterKey = `${stack.redisPrefix}usage:{${accountId}}:${today()}`;
    const primary = await cluster.primaryOf(counterKey);
    const answered = { ok: 0, limited: 0, unavailable: 0 };
    let next = 0;
    let killed: Promise<void> | undefined;
    // 10 clients share 300 requests (a 503 while the failover is under way is sent again). The
    // primary is killed after 40 successes.
    const client = async (lane: number) => {
      for (;;) {
        const i = next++;
        if (i >= 300) return;
        const status = await request(stack.gatewayUrls[(i + lane) % 2] as string, apiKey, answered);
        if (status === 200) answered.ok++;
        else if (status === 429) answered.limited++;
        else throw new Error(`unexpected status ${status}`);
        if (answered.ok === 40 && !killed) killed = cluster.kill(primary);
      }
    };
    await Promise.all(Array.from({ length: 10 }, (_, lane) => client(lane)));
    await killed;
    expect(killed).toBeDefined();
    expect(answered.ok).toBe(100);
    expect(answered.limited).toBe(200);
    // The replica that took over holds the exact count; Postgres gets it too.
    const newPrimary = await cluster.primaryOf(counterKey);
    expect(newPrimary).not.toBe(primary);
    expect(await cluster.cli(newPrimary, 'GET', counterKey)).toBe('100');
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === 100,
    );
  }, 90_000);
});
