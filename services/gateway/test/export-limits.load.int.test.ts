import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { type ApiStack, eventually, gatewayEnv, type ServiceProcess, startApiStack, startService, type TestAccount } from '@fcd/testing';
import pg from 'pg';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from '../src/config';

/**
 * Bulk exports bounded (docs/api.md, "Bulk export"), through the whole stack: two exports at once
 * per Pro account across two gateway replicas (the third is 429), a stalled reader cut at the
 * configured send timeout with the resume line, and 1,000 stalled exports holding the gateway's
 * memory under its chart limit while another account's requests stay fast.
 */
const ROWS = 40_000;
const SEND_TIMEOUT_MS = 2000;
const GRACE_MS = 3000;

let stack: ApiStack;
let second: ServiceProcess;
let secondUrl: string;
let pro: TestAccount;
let other: TestAccount;

async function insertFacilities(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`
      INSERT INTO facility.facilities (id, registry_id, name, city, state, compliance_status, naics_codes, programs, latitude, longitude, updated_at)
      SELECT gen_random_uuid(), 'WY' || lpad(i::text, 10, '0'), 'Stalled Plant ' || i, 'Casper', 'WY',
             'no_violation', ARRAY['211120'], ARRAY['CAA','CWA'], 42.8, -106.3, now()
        FROM generate_series(1, ${ROWS}) AS i`);
  } finally {
    await client.end();
  }
}

/** A second gateway of the stack (same Redis prefix: the same slots), with `env` over the stack's. */
async function startGateway(env: Record<string, string>): Promise<{ proc: ServiceProcess; url: string }> {
  const proc = await startService('gateway', {
    ...(await gatewayEnv(stack.usageEnv.GRPC_PORT as string, {
      facilityUrl: stack.facilityUrl,
      webhookUrl: stack.webhookUrl,
      redisPrefix: stack.redisPrefix,
    })),
    ...env,
  });
  return { proc, url: `http://127.0.0.1:${(await proc.waitForLog((l) => l.msg === 'ready')).port as number}` };
}

const LIMITS = { EXPORT_SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS), EXPORT_SEND_GRACE_MS: String(GRACE_MS) };

beforeAll(async () => {
  stack = await startApiStack({ label: 'export_limits', webhookSecretKey: randomBytes(32).toString('base64'), gatewayEnv: LIMITS });
  await insertFacilities(stack.db.url);
  ({ proc: second, url: secondUrl } = await startGateway(LIMITS));
  [pro, other] = await Promise.all([stack.createAccount('pro'), stack.createAccount('pro')]);
}, 120_000);

afterAll(async () => {
  await second?.stop();
  await stack?.stop();
});

/** An export whose reader takes the head and the first bytes, then nothing (the socket paused). */
interface Stalled {
  socket: Socket;
  status: number;
  /** When the reader paused (Date.now()), on the head's arrival. */
  pausedAt: number;
  /** Everything received, once read again. */
  text(): string;
  closed: Promise<number>;
}

function stalledExport(base: string, key: string, path = '/v1/exports/facilities?state=WY'): Promise<Stalled> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    const closed = new Promise<number>((done) => socket.once('close', () => done(Date.now())));
    socket.once('error', reject);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (chunks.length > 1) return;
      socket.pause(); // stops reading: the kernel's buffers fill, then the gateway's writes wait
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(c.toString('latin1'))?.[1]);
      resolve({ socket, status, pausedAt: Date.now(), closed, text: () => Buffer.concat(chunks).toString('latin1') });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: gateway\r\nX-Api-Key: ${key}\r\nConnection: close\r\n\r\n`);
  });
}

async function get(base: string, path: string, key: string) {
  const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': key } });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The NDJSON lines of a raw HTTP/1.1 chunked response (head and chunk framing removed; latin1: one character a byte). */
function ndjsonOf(raw: string): string[] {
  const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  let out = '';
  for (let at = 0; at < body.length; ) {
    const eol = body.indexOf('\r\n', at);
    const size = Number.parseInt(body.slice(at, eol), 16);
    if (!(size > 0)) break;
    out += body.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
  return out.trimEnd().split('\n');
}

describe('exports at once per account', () => {
  it('refuses the third export at once of a Pro account with 429 and Retry-After on either replica, and admits one when another ends', async () => {
    const a = await stalledExport(stack.gateway, pro.apiKey);
    const b = await stalledExport(secondUrl, pro.apiKey);
    expect([a.status, b.status]).toEqual([200, 200]);

    for (const base of [stack.gateway, secondUrl]) {
      const third = await get(base, '/v1/exports/facilities?state=WY', pro.apiKey);
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toBe('5');
      expect(third.headers.get('x-request-id')).toMatch(/^req_/);
      expect(JSON.parse(third.text)).toEqual({
        error: {
          code: 'CONCURRENCY_LIMIT_EXCEEDED',
          message: 'At most 2 exports of this account may run at once. Retry when one of them has ended.',
          details: { limit: 2 },
        },
      });
    }
    // Another account is not affected.
    expect((await get(stack.gateway, '/v1/exports/facilities?state=VT', other.apiKey)).status).toBe(200);

    a.socket.destroy();
    const next = await eventually(
      () => get(secondUrl, '/v1/exports/facilities?state=VT', pro.apiKey),
      (r) => r.status === 200,
      5000,
    );
    expect(next.status).toBe(200);
    b.socket.destroy();
  });
});

describe('a stalled reader', () => {
  it('is cut at the configured send timeout: the rows read and the resume line are queued, and resuming loses nothing', async () => {
    const account = await stack.createAccount('pro');
    const stalled = await stalledExport(stack.gateway, account.apiKey);
    const pausedAt = Date.now();
    const cut = await stack.gateways[0]?.waitForLog(
      (l) => l.msg === 'export reader stalled: cut' && Date.parse(String(l.time)) >= pausedAt,
      10_000,
    );
    const cutAfter = Date.parse(String(cut?.time)) - pausedAt;
    expect(cutAfter).toBeGreaterThanOrEqual(SEND_TIMEOUT_MS - 50);
    // Later by the time the kernel's buffers take to fill (several pages on loopback).
    expect(cutAfter).toBeLessThan(SEND_TIMEOUT_MS + 10_000);
    expect(cut?.timeout_ms).toBe(SEND_TIMEOUT_MS);

    stalled.socket.resume(); // back within the grace: everything queued arrives, then a clean end
    await stalled.closed;
    const lines = ndjsonOf(stalled.text());
    const last = JSON.parse(lines.pop() as string) as { export: { complete: boolean; rows: number; after: string } };
    const ids = lines.map((l) => (JSON.parse(l) as { id: string }).id);
    expect(last).toEqual({
      export: {
        complete: false,
        rows: ids.length,
        after: ids.at(-1),
        error: { code: 'REQUEST_TIMEOUT', message: `The export was not read for ${SEND_TIMEOUT_MS / 1000} s. Resume with \`after\`.` },
      },
    });
    // Whole rows (each line above parsed as one): the cut ends after the last whole row read, which
    // may be part-way through a page (pages are streamed, not held: docs/api.md, "Bulk export").
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThan(ROWS);

    const rest = await get(stack.gateway, `/v1/exports/facilities?state=WY&after=${ids.at(-1)}`, account.apiKey);
    const restLines = rest.text.trimEnd().split('\n');
    expect(JSON.parse(restLines.pop() as string)).toEqual({ export: { complete: true, rows: ROWS - ids.length, after: null } });
    const all = [...ids, ...restLines.map((l) => (JSON.parse(l) as { id: string }).id)];
    expect(new Set(all).size).toBe(ROWS);
  });

  it('that never comes back is disconnected a grace after the cut, which frees its slot', async () => {
    const account = await stack.createAccount('pro');
    const stalled = await Promise.all([stalledExport(stack.gateway, account.apiKey), stalledExport(secondUrl, account.apiKey)]);
    // Both exports started (each holds one of the account's two slots); the head, when not.
    expect(stalled.map((s) => (s.status === 200 ? 200 : s.text().slice(0, 400)))).toEqual([200, 200]);
    // Times from the first pause: on a slow machine the second export may start seconds later, and
    // the first one's slot is the first freed.
    const pausedAt = Math.min(...stalled.map((s) => s.pausedAt));
    // The account's slots are held until the gateways close the connections: 429 until then.
    const answers: Array<{ status: number; at: number }> = [];
    while (answers.at(-1)?.status !== 200 && Date.now() - pausedAt < 30_000) {
      const res = await get(stack.gateway, '/v1/exports/facilities?state=VT', account.apiKey);
      answers.push({ status: res.status, at: Date.now() - pausedAt });
      await new Promise((r) => setTimeout(r, 100));
    }
    const freed = answers.at(-1) as { status: number; at: number };
    expect(freed.status).toBe(200);
    expect(answers.slice(0, -1).filter((a) => a.status !== 429)).toEqual([]);
    expect(freed.at).toBeGreaterThanOrEqual(SEND_TIMEOUT_MS + GRACE_MS - 50);

    // Each gateway cut its reader (not before the send timeout; later by the time the kernel's
    // buffers took to fill), then closed the connection the grace after. The first closed freed the
    // slot that answered 200: the other gateway's close may come a moment later.
    for (const [i, gateway] of [stack.gateways[0] as ServiceProcess, second].entries()) {
      const paused = (stalled[i] as Stalled).pausedAt;
      const at = async (msg: string) =>
        Date.parse(String((await gateway.waitForLog((l) => l.msg === msg && Date.parse(String(l.time)) >= paused, 10_000)).time));
      const cut = await at('export reader stalled: cut');
      const closed = await at('export reader took nothing more: connection closed');
      expect(cut - paused).toBeGreaterThanOrEqual(SEND_TIMEOUT_MS - 50);
      expect(closed - cut).toBeGreaterThanOrEqual(GRACE_MS - 10);
      expect(closed - cut).toBeLessThan(GRACE_MS + 500);
    }
    for (const s of stalled) s.socket.destroy();
  });
});

/** Resident set now (VmRSS) and at its peak (VmHWM), in MiB. */
function rssMiB(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return { now: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/**
 * Waits (at most 30 s) until each process used under 10 % of a core over each of two 500 ms
 * windows: the gateway, and the facility service, which keeps reading export pages for the
 * running exports until their sockets' buffers are full.
 */
async function quiet(pids: number[]): Promise<void> {
  const cpuMs = (pid: number) => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, in clock ticks of 10 ms
  };
  let calm = 0;
  for (const started = Date.now(); calm < 2 && Date.now() - started < 30_000; ) {
    const before = pids.map(cpuMs);
    await new Promise((r) => setTimeout(r, 500));
    calm = pids.every((pid, i) => cpuMs(pid) - (before[i] as number) < 50) ? calm + 1 : 0;
  }
}

/** The gateway container's memory limit in the chart (deploy/helm values: serviceDefaults, the gateway's own unset). */
const CHART_LIMIT_MIB = 512;
/**
 * The replica's limit in this test (the default is 64). On loopback each stalled connection takes
 * about 13 MB into the kernel's buffers before the gateway's writes wait, so every admitted export
 * costs the facility service about 13 pages: 16 keep the test within its time. What the gateway
 * holds per stalled export (at most one page) is printed, with the default's projection.
 */
const PER_REPLICA = 16;
/** EXPORT_MAX_PER_REPLICA's default (the chart sets the same). */
const DEFAULT_PER_REPLICA = GatewayConfigSchema.properties.EXPORT_MAX_PER_REPLICA.default as number;
const STALLED = 1000;
const ACCOUNTS = 10;

describe('1,000 stalled exports', () => {
  let gateway: { proc: ServiceProcess; url: string };
  const pidOf = () => gateway.proc.proc.pid as number;

  beforeAll(async () => {
    // Its own gateway: a fresh process to measure; 100 exports at once per account (10 accounts), so
    // the replica's limit is what bounds them; nothing cut while the other account is measured.
    gateway = await startGateway({
      EXPORT_CONCURRENCY_PRO: '100',
      EXPORT_MAX_PER_REPLICA: String(PER_REPLICA),
      EXPORT_SEND_TIMEOUT_MS: '60000',
    });
  }, 30_000);

  afterAll(async () => {
    await gateway?.proc.stop();
  });

  it("hold the gateway's memory under its chart limit (the replica runs its limit, the rest get 503) and another account's p99 under 100 ms", async () => {
    const pid = pidOf();
    const idle = rssMiB(pid);
    const accounts = await Promise.all(Array.from({ length: ACCOUNTS }, () => stack.createAccount('pro')));
    const openedAt = Date.now();
    const stalled: Stalled[] = [];
    for (let i = 0; i < STALLED; i += 100) {
      const batch = Array.from({ length: 100 }, (_, j) => stalledExport(gateway.url, (accounts[(i + j) % ACCOUNTS] as TestAccount).apiKey));
      stalled.push(...(await Promise.all(batch)));
    }
    const openFor = Date.now() - openedAt;
    const statuses = stalled.map((s) => s.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(PER_REPLICA);
    expect(statuses.filter((s) => s === 503)).toHaveLength(STALLED - PER_REPLICA);

    // Measured once the running exports have filled the kernel's buffers and wait for their readers:
    // the gateway and the facility service are idle but for the other account's requests.
    await quiet([pid, stack.facility.proc.pid as number]);
    const client = new Client(gateway.url);
    const latencies: number[] = [];
    try {
      for (let i = 0; i < 200; i++) {
        const started = performance.now();
        const res = await client.request({
          method: 'GET',
          path: '/v1/facilities?state=WY&limit=5',
          headers: { 'x-api-key': other.apiKey },
        });
        await res.body.text();
        latencies.push(performance.now() - started);
        expect(res.statusCode).toBe(200);
      }
    } finally {
      await client.close();
    }
    latencies.sort((x, y) => x - y);
    const p99 = latencies[Math.ceil(latencies.length * 0.99) - 1] as number;
    const held = rssMiB(pid);
    const perExport = (held.now - idle.now) / PER_REPLICA;
    console.log(
      `1,000 stalled exports (${PER_REPLICA} running): opened in ${openFor} ms; RSS MiB idle ${JSON.stringify(idle)}, held ${JSON.stringify(held)}, ` +
        `${perExport.toFixed(2)} MiB per running export (${DEFAULT_PER_REPLICA}: ${(idle.now + DEFAULT_PER_REPLICA * perExport).toFixed(0)} MiB); other account p99 ${p99.toFixed(1)} ms`,
    );
    expect(held.peak).toBeLessThan(CHART_LIMIT_MIB);
    // The default's projection (what one running export holds, times the limit) is under the chart's limit too.
    expect(idle.now + DEFAULT_PER_REPLICA * perExport).toBeLessThan(CHART_LIMIT_MIB);
    expect(p99).toBeLessThan(100);

    // The readers gone, the replica runs exports again.
    for (const s of stalled) s.socket.destroy();
    const again = await eventually(
      () => get(gateway.url, '/v1/exports/facilities?state=VT', other.apiKey),
      (r) => r.status === 200,
      5000,
    );
    expect(again.status).toBe(200);
  }, 90_000);
});
