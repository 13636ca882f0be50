import { execFileSync } from 'node:child_process';
import { eventually, PrivateRedis, type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Counting follows the answer: while Redis is stalled past the gateway's authorization deadline,
 * the gateway answers 503 and the batches it gave up on wait in Redis's socket. When Redis
 * resumes, their counting script runs after the batch's count-by time and counts nothing, so the
 * stored count equals exactly the number of 2xx answers.
 *
 * The stall is `CLIENT PAUSE … ALL`: Redis executes no client command until it ends, while the
 * answers of commands it already ran are still sent. A SIGSTOP could also land between a script
 * that counted in time and the sending of its answer, holding that answer past the deadline: the
 * one case docs/metering.md ("Counting follows the answer") names as outside the guarantee (an
 * answer that does not reach the gateway within the margin), which would make the test flaky
 * rather than show the mechanism.
 */

const DEADLINE_MS = 600;
let redis: PrivateRedis;
let stack: Stack;

/** Redis runs no client command for `ms` (they queue); answers to commands it already ran still go out. */
function stallRedis(ms: number): void {
  execFileSync('redis-cli', ['-p', String(redis.port), 'CLIENT', 'PAUSE', String(ms), 'ALL']);
}

beforeAll(async () => {
  redis = await PrivateRedis.start();
  stack = await startStack({ label: 'usage_stall', redisUrl: redis.url, gatewayEnv: { AUTH_DEADLINE_MS: String(DEADLINE_MS) } });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
});

describe('a usage service stalled past the authorization deadline', () => {
  it('stores exactly as many requests as were answered 2xx', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    const url = `${stack.gatewayUrls[0] as string}/v1/account/usage`;
    const statuses: number[] = [];
    let running = true;
    const lanes = Array.from({ length: 6 }, async () => {
      while (running) {
        const res = await fetch(url, { headers: { 'x-api-key': apiKey } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    });
    const answered = (status: number) => statuses.filter((s) => s === status).length;

    // Traffic flows, then Redis stalls for two deadlines, three times (several batches are sent into the
    // stall and given up on), then it resumes and traffic flows again.
    await eventually(
      async () => answered(200),
      (n) => n >= 20,
    );
    for (let stall = 0; stall < 3; stall++) {
      const before = answered(503);
      stallRedis(2 * DEADLINE_MS);
      await eventually(
        async () => answered(503),
        (n) => n >= before + 6,
      );
      // The stall ends by itself, two deadlines after it began.
      await new Promise((r) => setTimeout(r, DEADLINE_MS));
      const ok = answered(200);
      await eventually(
        async () => answered(200),
        (n) => n >= ok + 20,
      );
    }
    running = false;
    await Promise.all(lanes);

    const ok = answered(200);
    expect(answered(503)).toBeGreaterThanOrEqual(18);
    expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
    // Every count reaches Postgres (flushed every 200 ms in this stack) and nothing more arrives.
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === ok,
    );
    // A sentinel request, answered 200 (a 503 counts nothing): the one usage service runs its counting
    // script on its one Redis connection after every script sent before it, so its count includes any
    // late count, and the stored count is exactly one more than the 2xx answers before it.
    let sentinel = 0;
    while (sentinel !== 200) {
      const res = await fetch(url, { headers: { 'x-api-key': apiKey } });
      await res.arrayBuffer();
      sentinel = res.status;
      expect([200, 503]).toContain(sentinel);
    }
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n >= ok + 1,
    );
    expect(await stack.storedCount(accountId)).toBe(ok + 1);
    console.log(`usage stalled past the deadline: ${ok} × 200, ${answered(503)} × 503, stored ${ok}`);
  }, 90_000);
});
