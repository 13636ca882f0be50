import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { createTestDatabase, repoRoot, type ServiceProcess, startService, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asAccount, type FacilityStub, INTERNAL_SECRET, newAccount, SECRET_KEY, startFacilityStub } from './helpers';

/** The built service as a process: config, migrations at start, ready line, health, metrics, HTTP, SIGTERM. */

const F1 = '11111111-1111-4111-8111-111111111111';
let db: TestDatabase;
let stub: FacilityStub;
let service: ServiceProcess;
let base: string;
let metricsBase: string;

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    METRICS_PORT: '0',
    DATABASE_URL: db.url,
    INTERNAL_AUTH_SECRET: INTERNAL_SECRET,
    WEBHOOK_SECRET_KEY: SECRET_KEY.toString('base64'),
    FACILITY_URL: stub.url,
    ...extra,
  };
}

beforeAll(async () => {
  db = await createTestDatabase('webhook_process');
  stub = await startFacilityStub([F1]);
  service = await startService('webhook', env());
  const ready = service.logs().find((l) => l.msg === 'ready');
  base = `http://127.0.0.1:${ready?.port}`;
  metricsBase = `http://127.0.0.1:${ready?.metricsPort}`;
});

afterAll(async () => {
  await service?.stop();
  await stub?.close();
  await db?.drop();
});

describe('webhook service process', () => {
  it('logs ready with the real port and metrics port once it listens', () => {
    const ready = service.logs().find((l) => l.msg === 'ready');
    expect(ready).toMatchObject({ msg: 'ready', port: expect.any(Number), metricsPort: expect.any(Number) });
    expect(ready?.port).not.toBe(0);
  });

  it('serves /healthz and /readyz (Postgres and the facility service up)', async () => {
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ data: { status: 'ok' } });
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
  });

  it('creates a subscription over HTTP and never writes the secret to its logs', async () => {
    const account = newAccount();
    const res = await fetch(`${base}/v1/webhooks`, {
      method: 'POST',
      headers: {
        ...asAccount(account, { method: 'POST', url: '/v1/webhooks' }),
        'content-type': 'application/json',
        'x-request-id': 'req-process-1',
      },
      body: JSON.stringify({ url: 'https://93.184.215.14/hook', events: ['violation.new'], facility_ids: [F1] }),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-request-id')).toBe('req-process-1');
    const { data } = (await res.json()) as { data: { secret: string; id: string } };
    expect(data.secret).toMatch(/^whsec_/);
    const list = await fetch(`${base}/v1/webhooks`, { headers: asAccount(account, { url: '/v1/webhooks' }) });
    expect(((await list.json()) as { data: Array<{ secret: string }> }).data[0]?.secret).toBe(`whsec_********${data.secret.slice(-4)}`);
    expect(service.output.join('\n')).not.toContain(data.secret.slice(6));
  });

  it('refuses a loopback destination by default (WEBHOOK_ALLOW_PRIVATE_URLS off)', async () => {
    const res = await fetch(`${base}/v1/webhooks`, {
      method: 'POST',
      headers: { ...asAccount(newAccount(), { method: 'POST', url: '/v1/webhooks' }), 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'http://127.0.0.1:8080/hook', events: ['violation.new'] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { details: { fields: Array<{ field: string }> } } }).error.details.fields).toEqual([
      { field: 'url', message: 'must use https' },
    ]);
  });

  it('exposes RED and domain metrics on the metrics port', async () => {
    const text = await (await fetch(`${metricsBase}/metrics`)).text();
    expect(text).toMatch(/fcd_requests_total\{[^}]*route="\/v1\/webhooks"[^}]*status="201"/);
    expect(text).toMatch(/fcd_webhook_subscription_changes_total\{[^}]*operation="create"[^}]*\} 1/);
    expect(text).toMatch(/fcd_webhook_url_refusals_total\{[^}]*reason="scheme"[^}]*\} 1/);
  });

  it('deactivate-account (CLI) deactivates every subscription of one account and cancels its pending deliveries', async () => {
    const downgraded = newAccount();
    const other = newAccount();
    const create = async (account: string) => {
      const res = await fetch(`${base}/v1/webhooks`, {
        method: 'POST',
        headers: { ...asAccount(account, { method: 'POST', url: '/v1/webhooks' }), 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'https://93.184.215.14/hook', events: ['case.new'] }),
      });
      return ((await res.json()) as { data: { id: string } }).data.id;
    };
    const a1 = await create(downgraded);
    const a2 = await create(downgraded);
    const b1 = await create(other);
    // A test event: a pending delivery (no dispatcher runs here).
    const test = await fetch(`${base}/v1/webhooks/${a1}/test`, {
      method: 'POST',
      headers: asAccount(downgraded, { method: 'POST', url: `/v1/webhooks/${a1}/test` }),
    });
    expect(test.status).toBe(202);
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [resolve(repoRoot, 'services/webhook/dist/cli.js'), ...args], {
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url },
        encoding: 'utf8',
      });
    const run = cli(['deactivate-account', '--account', downgraded, '--json']);
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ account_id: downgraded, reason: 'tier_downgraded', deactivated: [a1, a2].sort() });
    for (const id of [a1, a2]) {
      const { data } = (await (
        await fetch(`${base}/v1/webhooks/${id}`, { headers: asAccount(downgraded, { url: `/v1/webhooks/${id}` }) })
      ).json()) as {
        data: { is_active: boolean; deactivation_reason: string | null };
      };
      expect(data).toMatchObject({ is_active: false, deactivation_reason: 'tier_downgraded' });
    }
    const deliveries = (await (
      await fetch(`${base}/v1/webhooks/${a1}/deliveries`, { headers: asAccount(downgraded, { url: `/v1/webhooks/${a1}/deliveries` }) })
    ).json()) as {
      data: Array<{ status: string }>;
    };
    expect(deliveries.data.map((d) => d.status)).toEqual(['cancelled']);
    const untouched = (await (
      await fetch(`${base}/v1/webhooks/${b1}`, { headers: asAccount(other, { url: `/v1/webhooks/${b1}` }) })
    ).json()) as {
      data: { is_active: boolean };
    };
    expect(untouched.data.is_active).toBe(true);
    // Again: nothing left to deactivate. Bad invocations exit 2 and change nothing.
    expect(JSON.parse(cli(['deactivate-account', '--account', downgraded, '--json']).stdout).deactivated).toEqual([]);
    expect(cli(['deactivate-account']).status).toBe(2);
    expect(cli(['deactivate-account', '--account', other, '--reason', 'Bad Reason']).status).toBe(2);
    expect(cli(['frobnicate']).status).toBe(2);
    const still = (await (
      await fetch(`${base}/v1/webhooks/${b1}`, { headers: asAccount(other, { url: `/v1/webhooks/${b1}` }) })
    ).json()) as {
      data: { is_active: boolean };
    };
    expect(still.data.is_active).toBe(true);
  });

  it('stops on a bad configuration with one line naming the variable', async () => {
    const bad = await startService('webhook', env({ WEBHOOK_SECRET_KEY: 'too-short' }), { waitReady: false });
    expect(await bad.exited).toBe(1);
    expect(bad.output).toHaveLength(1);
    expect(bad.output[0]).toMatch(/^webhook: invalid configuration: .*WEBHOOK_SECRET_KEY/);
  });

  it('shuts down gracefully on SIGTERM', async () => {
    const second = await startService('webhook', env());
    expect(await second.stop('SIGTERM')).toBe(0);
    expect(second.logs().some((l) => l.msg === 'shutdown complete')).toBe(true);
  });
});
