import { parseConfig } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from './config';

const REQUIRED = {
  INTERNAL_AUTH_SECRET: 'config-test-internal-secret-0123456789abcdef',
  USAGE_GRPC_SECRET: 'config-test-usage-grpc-secret-0123456789abcdef',
  REDIS_URL: 'redis://127.0.0.1:6379',
};

describe('gateway config, bulk export limits', () => {
  it('defaults to 2 exports at once for Pro, 4 for Enterprise, and a 30 s send timeout with a 5 s grace', () => {
    const c = parseConfig(GatewayConfigSchema, REQUIRED);
    expect({
      pro: c.EXPORT_CONCURRENCY_PRO,
      enterprise: c.EXPORT_CONCURRENCY_ENTERPRISE,
      ttl: c.EXPORT_SLOT_TTL_MS,
      timeout: c.EXPORT_SEND_TIMEOUT_MS,
      grace: c.EXPORT_SEND_GRACE_MS,
    }).toEqual({ pro: 2, enterprise: 4, ttl: 30_000, timeout: 30_000, grace: 5000 });
  });

  it('takes the values set, and refuses a send timeout under 100 ms', () => {
    const c = parseConfig(GatewayConfigSchema, { ...REQUIRED, EXPORT_CONCURRENCY_PRO: '3', EXPORT_SEND_TIMEOUT_MS: '2000' });
    expect([c.EXPORT_CONCURRENCY_PRO, c.EXPORT_SEND_TIMEOUT_MS]).toEqual([3, 2000]);
    expect(() => parseConfig(GatewayConfigSchema, { ...REQUIRED, EXPORT_SEND_TIMEOUT_MS: '50' })).toThrow(/EXPORT_SEND_TIMEOUT_MS/);
  });
});
