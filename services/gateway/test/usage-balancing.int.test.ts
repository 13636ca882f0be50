import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, hostsPreloadEnv, type ServiceProcess, type Stack, startService, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Balanced gRPC (ADR 0011): usage replicas behind one DNS name, as a headless Service gives them.
 * The name `usage.test` resolves (in the gateway, through the hosts preload) to 127.0.0.1, .2 and
 * .3, each a usage replica bound to its own loopback address on the same port. The gateway's
 * target is `dns:///usage.test:<port>` with round_robin.
 */
const CONNECTION_AGE_MS = 3000;
const DNS_MIN_INTERVAL_MS = 500;
const STREAM_MAX_AGE_MS = 1500;
/**
 * The shortest window a share is measured over: every connection reaches its max age once (its
 * replica leaves the picker until it reconnects) and every stream is placed again. Over a shorter
 * one a share is that of whichever moment the window caught: a fast machine sends 900 requests in
 * under a second, and one replica took 70 % of them.
 */
const SHARE_WINDOW_MS = CONNECTION_AGE_MS * 1.1 + STREAM_MAX_AGE_MS;

let dir: string;
let hostsFile: string;
let stack: Stack;
let grpcPort: number;
const replicas: ServiceProcess[] = [];

async function resolvesTo(addresses: string[]): Promise<void> {
  await writeFile(hostsFile, JSON.stringify({ 'usage.test': addresses }));
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fcd-balancing-'));
  hostsFile = join(dir, 'hosts.json');
  await resolvesTo(['127.0.0.1', '127.0.0.2']);
  grpcPort = await freePort();
  stack = await startStack({
    label: 'usage_balancing',
    usageEnv: {
      GRPC_PORT: String(grpcPort),
      GRPC_MAX_CONNECTION_AGE_MS: String(CONNECTION_AGE_MS),
      GRPC_MAX_CONNECTION_AGE_GRACE_MS: '5000',
    },
    gatewayEnv: {
      USAGE_GRPC_ADDRESS: `dns:///usage.test:${grpcPort}`,
      USAGE_GRPC_DNS_MIN_INTERVAL_MS: String(DNS_MIN_INTERVAL_MS),
      AUTH_STREAMS: '6',
      AUTH_STREAM_MAX_AGE_MS: String(STREAM_MAX_AGE_MS),
      ...hostsPreloadEnv({}, { file: hostsFile }),
    },
  });
  replicas.push(stack.usage, await startService('usage', { ...stack.usageEnv, HOST: '127.0.0.2' }));
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.slice(1).map((r) => r.stop()));
  await stack?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Requests a usage replica allowed so far (its own metrics). */
async function allowed(replica: ServiceProcess): Promise<number> {
  const ready = await replica.waitForLog((l) => l.msg === 'ready');
  const host = replica === stack.usage ? '127.0.0.1' : `127.0.0.${replicas.indexOf(replica) + 1}`;
  const text = await (await fetch(`http://${host}:${ready.metricsPort as number}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('fcd_rate_limit_decisions_total{') && l.includes('outcome="allowed"'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** The requests a `load` made. */
const count = (statuses: Map<number, number>) => [...statuses.values()].reduce((a, b) => a + b, 0);

/** `lanes` clients sending requests back to back until `until()` says stop; every status tallied. */
async function load(apiKey: string, lanes: number, until: (sent: number) => boolean | Promise<boolean>) {
  const statuses = new Map<number, number>();
  let sent = 0;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (!(await until(sent))) {
        sent++;
        const res = await fetch(`${stack.gatewayUrls[0]}/v1/account/usage`, { headers: { 'x-api-key': apiKey } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  return statuses;
}

describe('Usage replicas behind one DNS name', () => {
  it('spreads one gateway’s batches across every replica, and a replica added under load gets traffic within the connection-age window', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    let total = 0;

    // Two replicas: both get a bounded share of at least 600 requests over SHARE_WINDOW_MS.
    const before2 = await Promise.all(replicas.map(allowed));
    const started2 = Date.now();
    const first = await load(apiKey, 8, (sent) => sent >= 600 && Date.now() - started2 >= SHARE_WINDOW_MS);
    expect([...first.keys()]).toEqual([200]);
    const sent2 = count(first);
    total += sent2;
    const shares2 = (await Promise.all(replicas.map(allowed))).map((n, i) => (n - (before2[i] as number)) / sent2);
    // Six streams over two replicas, re-placed as they age: a 5/1 split of the streams (one sixth)
    // is a fair outcome, so the bound is the same as for three replicas below.
    for (const share of shares2) {
      expect(share).toBeGreaterThan(0.1);
      expect(share).toBeLessThan(0.9);
    }

    // A third replica joins the name while the load runs.
    replicas.push(await startService('usage', { ...stack.usageEnv, HOST: '127.0.0.3' }));
    const third = replicas[2] as ServiceProcess;
    await resolvesTo(['127.0.0.1', '127.0.0.2', '127.0.0.3']);
    const added = Date.now();
    let reachedAfter = 0;
    const joining = await load(apiKey, 8, async (sent) => {
      if (sent % 20 !== 0) return false;
      if ((await allowed(third)) === 0) return false;
      reachedAfter = Date.now() - added;
      return true;
    });
    expect([...joining.keys()]).toEqual([200]);
    total += joining.get(200) ?? 0;
    // Found when the connections it had reach their max age (GOAWAY, +10 % jitter) and DNS is asked
    // again; the stream that lands on it is opened within one stream age after that.
    expect(reachedAfter).toBeLessThan(CONNECTION_AGE_MS * 1.1 + DNS_MIN_INTERVAL_MS + STREAM_MAX_AGE_MS + 3000);

    // Three replicas: each gets a bounded share of the next 900 requests or more, over
    // SHARE_WINDOW_MS, and none fails.
    const before3 = await Promise.all(replicas.map(allowed));
    const started3 = Date.now();
    const last = await load(apiKey, 8, (sent) => sent >= 900 && Date.now() - started3 >= SHARE_WINDOW_MS);
    expect([...last.keys()]).toEqual([200]);
    const sent3 = count(last);
    total += sent3;
    const shares3 = (await Promise.all(replicas.map(allowed))).map((n, i) => (n - (before3[i] as number)) / sent3);
    for (const share of shares3) {
      expect(share).toBeGreaterThan(0.1);
      expect(share).toBeLessThan(0.6);
    }
    // Counting stayed exact through every stream rotation and GOAWAY.
    await expect.poll(() => stack.storedCount(accountId), { timeout: 10_000 }).toBe(total);
  }, 120_000);
});
