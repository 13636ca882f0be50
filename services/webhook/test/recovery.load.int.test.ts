import { createLogger, createPool, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type ServiceProcess, startService, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { asAccount, type FacilityStub, INTERNAL_SECRET, insertEvents, newAccount, SECRET_KEY, startFacilityStub } from './helpers';

/**
 * The built webhook service as a process (default pool of 10 connections): 50 concurrent recover
 * calls over 10 subscriptions of a 25,000-event log leave another account's GET /v1/webhooks
 * p99 under 100 ms (recoveries never wait on a pooled connection for a lock, and at most 2 run at
 * once per replica: docs/webhooks.md "Recovery").
 */

let db: TestDatabase;
let pool: Pool;
let stub: FacilityStub;
let service: ServiceProcess;
let base: string;

beforeAll(async () => {
  db = await createTestDatabase('webhook_recovery_load');
  stub = await startFacilityStub([]);
  service = await startService('webhook', {
    PORT: '0',
    METRICS_PORT: '0',
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: INTERNAL_SECRET,
    WEBHOOK_SECRET_KEY: SECRET_KEY.toString('base64'),
    FACILITY_URL: stub.url,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  });
  base = `http://127.0.0.1:${service.logs().find((l) => l.msg === 'ready')?.port}`;
  pool = createPool({
    connectionString: db.url,
    applicationName: 'recovery-load-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
});

afterAll(async () => {
  await pool?.end();
  await service?.stop();
  await stub?.close();
  await db?.drop();
});

async function request(account: string, method: string, path: string, body?: unknown): Promise<{ status: number; ms: number; json: any }> {
  const started = performance.now();
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...asAccount(account, { method, url: path }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  return { status: res.status, ms: performance.now() - started, json };
}

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1] as number;

it('50 concurrent recovers leave another account’s GET /v1/webhooks p99 under 100 ms', async () => {
  // 10 accounts with one subscription each, then 25,000 events after their creation.
  const owners = Array.from({ length: 10 }, () => newAccount());
  const ids: string[] = [];
  for (const owner of owners) {
    const created = await request(owner, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['violation.new'] });
    expect(created.status).toBe(201);
    ids.push(created.json.data.id);
  }
  const since = new Date(Date.now() - 60_000).toISOString();
  await insertEvents(pool, 25_000, Date.now() + 1, 0.02);
  await new Promise((resolve) => setTimeout(resolve, 600));

  const other = newAccount();
  expect((await request(other, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/other', events: ['case.new'] })).status).toBe(201);
  // The same requests with no recovery running: the machine's own latency, for the message.
  const baseline: number[] = [];
  for (let i = 0; i < 200; i++) baseline.push((await request(other, 'GET', '/v1/webhooks')).ms);

  // 5 calls per subscription, all at once: one per subscription recovers 10,000 events, the rest are 409.
  let done = false;
  const recovers = Promise.all(
    Array.from({ length: 50 }, (_, i) => request(owners[i % 10] as string, 'POST', `/v1/webhooks/${ids[i % 10]}/recover`, { since })),
  ).finally(() => {
    done = true;
  });
  const latencies: number[] = [];
  const statuses = new Set<number>();
  while (!done || latencies.length < 200) {
    const r = await request(other, 'GET', '/v1/webhooks');
    statuses.add(r.status);
    latencies.push(r.ms);
  }
  const answers = await recovers;
  const count = (s: number) => answers.filter((a) => a.status === s).length;
  expect([count(202), count(409)]).toEqual([10, 40]);
  expect(answers.filter((a) => a.status === 202).every((a) => a.json.data.events === 10_000 && a.json.data.next_since !== null)).toBe(true);
  expect([...statuses]).toEqual([200]);
  expect(p99(latencies), `p99 of ${latencies.length} requests; ${p99(baseline).toFixed(1)} ms with no recovery running`).toBeLessThan(100);
}, 120_000);
