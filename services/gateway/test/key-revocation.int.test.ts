import { freePort, gatewayEnv, type ServiceProcess, type Stack, startService, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Key changes reach every replica (docs/metering.md, "Keys and their cache"): two gateways, each on
 * its own usage replica, both replicas caching keys for 60 s (far past the 5 s promised), so only
 * the Redis pub/sub invalidation can make a revocation take effect in time.
 */
const CACHE_TTL_MS = 60_000;
const ADMIN_TOKEN = 'key-revocation-admin-token-0123456789abcdef';

let stack: Stack;
let usageB: ServiceProcess;
let gatewayB: ServiceProcess;
let gateways: string[];
/** Usage replica B's admin API (the operator's revoke). */
let adminB: string;

beforeAll(async () => {
  stack = await startStack({
    label: 'key_revocation',
    gateways: 1,
    usageEnv: { KEY_CACHE_TTL_MS: String(CACHE_TTL_MS), KEY_CACHE_NEGATIVE_TTL_MS: '1000' },
  });
  const grpcB = await freePort();
  usageB = await startService('usage', {
    ...stack.usageEnv,
    GRPC_PORT: String(grpcB),
    PORT: '0',
    ADMIN_TOKEN,
    MIGRATE_ON_START: 'false',
  });
  adminB = `http://127.0.0.1:${(await usageB.waitForLog((l) => l.msg === 'ready')).port as number}`;
  gatewayB = await startService('gateway', await gatewayEnv(grpcB, { redisPrefix: stack.redisPrefix }));
  const portB = (await gatewayB.waitForLog((l) => l.msg === 'ready')).port as number;
  gateways = [stack.gatewayUrls[0] as string, `http://127.0.0.1:${portB}`];
}, 90_000);

afterAll(async () => {
  await gatewayB?.stop();
  await usageB?.stop();
  await stack?.stop();
});

async function status(gateway: string, apiKey: string, path = '/v1/account/usage'): Promise<number> {
  const res = await fetch(`${gateway}${path}`, { headers: { 'x-api-key': apiKey } });
  await res.arrayBuffer();
  return res.status;
}

async function send(gateway: string, apiKey: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${gateway}${path}`, {
    method,
    headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Asks every gateway until each answers 401; the time each took from `since`, in ms. */
async function until401(apiKey: string, since: number, boundMs = 15_000): Promise<number[]> {
  return Promise.all(
    gateways.map(async (g) => {
      for (;;) {
        const s = await status(g, apiKey);
        if (s === 401) return Date.now() - since;
        expect(s).toBe(200);
        if (Date.now() - since > boundMs) throw new Error(`${g} still accepts the key after ${boundMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }),
  );
}

describe('key changes on every gateway and usage replica', () => {
  it('a second key works on both gateways; revoked, it gets 401 on both within 5 s', async () => {
    const account = await stack.createAccount('pro');
    const created = await send(gateways[0] as string, account.apiKey, 'POST', '/v1/account/keys', { name: 'second' });
    expect(created.status).toBe(201);
    const second = created.json.data.key as string;
    // Both usage replicas now hold the key in their caches (60 s).
    for (const g of gateways) expect(await status(g, second)).toBe(200);

    const revokedAt = Date.now();
    expect((await send(gateways[1] as string, account.apiKey, 'DELETE', `/v1/account/keys/${created.json.data.id}`)).status).toBe(204);
    const took = await until401(second, revokedAt);
    for (const ms of took) expect(ms).toBeLessThan(5000);
    // The account's other key is unaffected.
    for (const g of gateways) expect(await status(g, account.apiKey)).toBe(200);
  });

  it("the operator's revoke (admin API, on one usage replica) gets 401 on both gateways within 5 s", async () => {
    const account = await stack.createAccount('pro');
    const created = await send(gateways[0] as string, account.apiKey, 'POST', '/v1/account/keys', { name: 'ops' });
    expect(created.status).toBe(201);
    const second = created.json.data.key as string;
    for (const g of gateways) expect(await status(g, second)).toBe(200);

    const revokedAt = Date.now();
    const res = await fetch(`${adminB}/admin/v1/keys/${created.json.data.id}/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { revoked_at: string | null } }).data.revoked_at).not.toBeNull();
    const took = await until401(second, revokedAt);
    for (const ms of took) expect(ms).toBeLessThan(5000);
    for (const g of gateways) expect(await status(g, account.apiKey)).toBe(200);
  });

  it('a rolled key keeps working on both gateways until its expiry, then gets 401; the new key works', async () => {
    const account = await stack.createAccount('pro');
    for (const g of gateways) expect(await status(g, account.apiKey)).toBe(200);
    const rolled = await send(gateways[0] as string, account.apiKey, 'POST', `/v1/account/keys/${account.keyId}/roll`, {
      expires_in_seconds: 2,
    });
    expect(rolled.status).toBe(201);
    const expiresAt = Date.parse(rolled.json.data.previous.expires_at);
    // Before the expiry: both keys work everywhere.
    for (const g of gateways) {
      expect(await status(g, account.apiKey)).toBe(200);
      expect(await status(g, rolled.json.data.key)).toBe(200);
    }
    expect(Date.now()).toBeLessThan(expiresAt);
    // Every 200 of the old key came before its expiry, and 401 follows it on both gateways (the
    // expiry is checked per batch against the cached key, so no cache lifetime is involved).
    const after = await until401(account.apiKey, expiresAt, 10_000);
    for (const ms of after) expect(ms).toBeLessThan(1000);
    for (const g of gateways) expect(await status(g, rolled.json.data.key)).toBe(200);
  });

  it('two keys of a Free account get exactly 100 requests together, across both gateways', async () => {
    const account = await stack.createAccount('free');
    // The operator's CLI makes the second key: no request counted before the load.
    const second = ((await stack.cli(['keys', 'create', '--account', account.accountId])) as { apiKey: string }).apiKey;
    const keys = [account.apiKey, second];
    const statuses = await Promise.all(
      Array.from({ length: 160 }, (_, i) => status(gateways[i % 2] as string, keys[Math.floor(i / 2) % 2] as string)),
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 429)).toHaveLength(60);
    for (const g of gateways) for (const k of keys) expect(await status(g, k)).toBe(429);
  });
});
