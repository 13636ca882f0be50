import { eventually, PrivateTlsRedis, type Stack, startService, startStack, TestCertificates } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The usage service against a Redis that requires a password and TLS (its own private server):
 * authorization and exact counting work through it, and a wrong password or an untrusted
 * certificate leaves the service running, not ready (naming redis), with no secret in its logs.
 */
const PASSWORD = 'redis-tls-test-password-0123456789';
let certs: TestCertificates;
let redis: PrivateTlsRedis;
let stack: Stack;

beforeAll(async () => {
  certs = new TestCertificates();
  redis = await PrivateTlsRedis.start(certs, PASSWORD);
  stack = await startStack({
    label: 'redis_tls',
    redisUrl: redis.url,
    usageEnv: { REDIS_PASSWORD: PASSWORD, REDIS_TLS_CA_FILE: certs.caFile },
  });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
  certs?.remove();
});

const readyOf = (svc: { logs(): Array<Record<string, unknown>> }) => `http://127.0.0.1:${svc.logs().find((l) => l.msg === 'ready')?.port}`;

describe('usage with an authenticated, TLS Redis', () => {
  it('authorizes and counts exactly through it', async () => {
    const { apiKey, accountId } = await stack.createAccount('free');
    const base = stack.gatewayUrls[0] as string;
    const remaining: Array<string | null> = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/v1/account/usage`, { headers: { 'x-api-key': apiKey } });
      expect(res.status).toBe(200);
      remaining.push(res.headers.get('x-ratelimit-remaining'));
    }
    expect(remaining).toEqual(['99', '98', '97']);
    await eventually(
      () => stack.storedCount(accountId),
      (n) => n === 3,
    );
    const ready = await fetch(`${readyOf(stack.usage)}/readyz`);
    expect(ready.status).toBe(200);
  });

  it.each([
    ['a wrong password', (): Record<string, string> => ({ REDIS_PASSWORD: 'not-the-password-0123456789abcdef' })],
    ['an untrusted certificate', (): Record<string, string> => ({ REDIS_TLS_CA_FILE: certs.otherCaFile })],
  ])('with %s: running, not ready (redis down), and no secret in its logs', async (_, override) => {
    const usage = await startService('usage', { ...stack.usageEnv, GRPC_PORT: '0', ...override() });
    try {
      const ready = await eventually(
        async () => {
          const res = await fetch(`${readyOf(usage)}/readyz`);
          return {
            status: res.status,
            body: (await res.json()) as { error?: { details?: { checks?: Record<string, { status: string }> } } },
          };
        },
        (r) => r.body.error?.details?.checks?.redis?.status === 'down',
      );
      expect(ready.status).toBe(503);
      const output = JSON.stringify(usage.logs());
      expect(output).not.toContain(PASSWORD);
      expect(output).not.toContain('not-the-password');
    } finally {
      await usage.stop();
    }
  });
});
