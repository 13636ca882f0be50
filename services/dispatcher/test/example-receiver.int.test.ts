import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { resolve } from 'node:path';
import { repoRoot } from '@fcd/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';

/** The runnable example receiver (examples/webhook-receiver) answers 204 to a signed delivery and 401 otherwise. */
const secret = 'whsec_exampleReceiverSecret0123456789abcdefXYZ';
let proc: ChildProcess;
let url = '';

beforeAll(async () => {
  proc = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', resolve(repoRoot, 'examples/webhook-receiver/server.ts')], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((res) => {
    proc.stdout?.on('data', (b: Buffer) => {
      for (const line of b.toString().split('\n')) {
        if (line.includes('"ready"')) res(JSON.parse(line).port);
      }
    });
  });
  url = `http://127.0.0.1:${port}/`;
}, 30_000);

afterAll(() => {
  proc?.kill('SIGTERM');
});

it('the example receiver verifies the signature: 204 when it matches, 401 when it does not', async () => {
  const body = JSON.stringify({
    id: 'evt_example',
    type: 'violation.new',
    created_at: '2026-11-22T08:15:30.123Z',
    data: { violation: {} },
  });
  const good = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  expect((await fetch(url, { method: 'POST', body, headers: { 'x-service-signature': good } })).status).toBe(204);
  const bad = `sha256=${createHmac('sha256', `${secret}x`).update(body).digest('hex')}`;
  expect((await fetch(url, { method: 'POST', body, headers: { 'x-service-signature': bad } })).status).toBe(401);
});
