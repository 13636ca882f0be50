import { type Stack, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;

beforeAll(async () => {
  // A long flush interval and no periodic reconciliation: only the shutdown flush can persist the counts.
  stack = await startStack({
    label: 'usage_shutdown_inflight',
    usageEnv: { USAGE_FLUSH_INTERVAL_MS: '60000', USAGE_RECONCILE_INTERVAL_MS: '3600000' },
  });
});

afterAll(async () => {
  await stack?.stop();
});

const CONCURRENCY = 16;

describe('usage service SIGTERM under load', () => {
  it('persists exactly the requests answered 2xx when SIGTERM arrives with metered requests in flight; the others get 503, never 500', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    const url = `${stack.gatewayUrls[0]}/v1/account/usage`;

    const statuses: number[] = [];
    const failures: Array<{ status: number; retryAfter: string | null; body: unknown }> = [];
    let successes = 0;
    let onSuccess: (() => void) | undefined;
    let usageExited = false;

    // Each worker keeps one metered request in flight until the usage service has exited and it got a failure after that.
    const worker = async () => {
      for (;;) {
        const res = await fetch(url, { headers: { 'x-api-key': apiKey } });
        const body = (await res.json()) as unknown;
        statuses.push(res.status);
        if (res.status >= 200 && res.status < 300) {
          successes++;
          onSuccess?.();
        } else {
          failures.push({ status: res.status, retryAfter: res.headers.get('retry-after'), body });
          if (usageExited) return;
        }
      }
    };
    const workers = Array.from({ length: CONCURRENCY }, () => worker());

    // SIGTERM once the load runs (100 successes): CONCURRENCY requests are in flight at that moment.
    await new Promise<void>((resolve) => {
      onSuccess = () => {
        if (successes >= 100) resolve();
      };
    });
    onSuccess = undefined;
    const atSigterm = successes;
    const usage = stack.usage;
    const exitCode = await usage.stop('SIGTERM');
    usageExited = true;
    await Promise.all(workers);

    expect(exitCode).toBe(0);
    // The gateway's long-lived authorization stream was ended by the drain, not cut by the forced shutdown.
    expect(usage.logs().map((l) => l.msg)).not.toContain('gRPC calls still open 5 s after shutdown began; forcing them closed');
    expect(atSigterm).toBeGreaterThanOrEqual(100);
    expect(new Set(statuses)).toEqual(new Set([200, 503]));
    expect(failures.length).toBeGreaterThanOrEqual(CONCURRENCY); // at least the one each worker ended on
    for (const f of failures) {
      expect(f).toEqual({
        status: 503,
        retryAfter: '1',
        body: {
          error: {
            code: 'SERVICE_UNAVAILABLE',
            message: 'The service is temporarily unavailable (usage). Retry after 1 s.',
            details: { dependency: 'usage' },
          },
        },
      });
    }
    // The shutdown flush wrote every counted request, and only those: the 2xx answers, exactly.
    expect(await stack.storedCount(accountId)).toBe(successes);
  });
});
