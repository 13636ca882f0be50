import { eventually, type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;

async function successes(url: string, key: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const res = await fetch(url, { headers: { 'x-api-key': key } });
    await res.arrayBuffer();
    if (res.status === 200) ok++;
  }
  return ok;
}

async function untilStatus(url: string, key: string, status: number): Promise<void> {
  await eventually(
    async () => (await fetch(url, { method: 'HEAD', headers: { 'x-api-key': key } })).status,
    (s) => s === status,
  );
}

beforeAll(async () => {
  // A long flush interval: only the shutdown flush (or reconciliation) can persist the counts.
  stack = await startStack({
    label: 'usage_shutdown',
    usageEnv: { USAGE_FLUSH_INTERVAL_MS: '60000', USAGE_RECONCILE_INTERVAL_MS: '3600000' },
  });
});

afterAll(async () => {
  await stack?.stop();
});

describe('usage service restarts', () => {
  it('loses no counted request on SIGTERM, and none on SIGKILL once a replica reconciles from Redis', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    const url = `${stack.gatewayUrls[0]}/v1/account/usage`;

    const first = await successes(url, apiKey, 50);
    expect(first).toBe(50);
    expect(await stack.storedCount(accountId)).toBe(0); // still only in Redis and the flush buffer

    expect(await stack.usage.stop('SIGTERM')).toBe(0);
    expect(await stack.storedCount(accountId)).toBe(first); // the shutdown flushed every counted request

    await stack.restartUsage();
    await untilStatus(url, apiKey, 200); // HEAD requests count too
    const usage = (await (await fetch(url, { headers: { 'x-api-key': apiKey } })).json()) as { data: { today: { request_count: number } } };
    const counted = usage.data.today.request_count;
    expect(await successes(url, apiKey, 20)).toBe(20);
    const total = counted + 20;

    await stack.usage.stop('SIGKILL');
    // Documented bound: at most one flush interval of counts is missing from Postgres at this moment...
    const afterKill = await stack.storedCount(accountId);
    expect(afterKill).toBeGreaterThanOrEqual(first);
    expect(afterKill).toBeLessThanOrEqual(total);
    // ...and none is lost: the restarted replica reconciles Redis's counters into Postgres.
    await stack.restartUsage('SIGKILL');
    expect(
      await eventually(
        () => stack.storedCount(accountId),
        (n) => n === total,
      ),
    ).toBe(total);
  });
});
