/**
 * The chart, played under podman on this machine (docs/operations.md, "Try the chart without a
 * cluster"): `helm template` with ci/podman-values.yaml, the manifests made playable (pods.ts),
 * the Secrets created with `podman secret create`, the migration Job's pod run to completion,
 * then every Deployment replica as a pod, each ready when its readiness probe answers 200.
 *
 *   tsx scripts/image/play.ts up     (npm run kube:play, after scripts/image/build.sh)
 *   tsx scripts/image/play.ts down   (npm run kube:down)
 *
 * Replica i of a Deployment is rendered with every port moved up by 100 × i: on one host network
 * no two pods can listen on one port. Application secrets (`facility-compliance-secrets`, the
 * chart's default existing Secret) are generated once into .run/kube/app-secrets.json.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { parse, stringify } from 'yaml';
import { CHART, type Manifest, ROOT, render } from '../chart/manifests';
import { type PlanOptions, type PlayPlan, playPlan } from './pods';

export const VALUES = join(CHART, 'ci/podman-values.yaml');
export const STATE_DIR = join(ROOT, '.run/kube');
export const IMAGE = 'localhost/facility-compliance-api:dev';
export const APP_SECRET = 'facility-compliance-secrets';
const SERVICES = ['gateway', 'usage', 'facility', 'webhook', 'dispatcher'] as const;
const BASE_CONF = process.env.CONTAINERS_CONF ?? join(ROOT, 'scripts/image/containers.conf');
let podmanEnv: NodeJS.ProcessEnv = { ...process.env, CONTAINERS_CONF: BASE_CONF };

/**
 * Cluster DNS stand-in: podman 4.x ignores a pod's hostAliases on the host network, so the
 * Service names go into the base hosts file of every container (containers.conf
 * `base_hosts_file`), in a copy of the project's containers.conf under .run/kube.
 */
function useHostsFile(hostnames: string[]): void {
  mkdirSync(STATE_DIR, { recursive: true });
  const hosts = join(STATE_DIR, 'hosts');
  writeFileSync(hosts, `${readFileSync('/etc/hosts', 'utf8').trimEnd()}\n127.0.0.1 ${hostnames.join(' ')}\n`);
  const conf = readFileSync(BASE_CONF, 'utf8').replace('[containers]\n', `[containers]\nbase_hosts_file = ${JSON.stringify(hosts)}\n`);
  writeFileSync(join(STATE_DIR, 'containers.conf'), conf);
  podmanEnv = { ...process.env, CONTAINERS_CONF: join(STATE_DIR, 'containers.conf') };
}

export function podman(args: string[], input?: string): string {
  try {
    return execFileSync('podman', args, { env: podmanEnv, encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`podman ${args.slice(0, 3).join(' ')}: ${e.stderr?.trim() || e.message}`);
  }
}

interface PodmanValues {
  externalDatabase: { url: string };
  [service: string]: { containerPorts?: Record<string, number> } & Record<string, unknown>;
}

/**
 * podman without blocking the event loop: for what takes a while (`wait`, `exec`), while this
 * process also serves the pods (the ECHO download, the webhook receiver, the load of a test).
 */
export async function podmanAsync(args: string[]): Promise<string> {
  try {
    return (await promisify(execFile)('podman', args, { env: podmanEnv, encoding: 'utf8', maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`podman ${args.slice(0, 3).join(' ')}: ${e.stderr?.trim() || e.message}`);
  }
}

/** The overlay's values (ports, backends). */
export function podmanValues(): PodmanValues {
  return parse(readFileSync(VALUES, 'utf8'));
}

/**
 * `--set` flags of the render of replica `i`: the ports of each service with more than `i`
 * replicas move up by 100 × i; the others keep theirs (their replica 0 is what the env vars of
 * the rendered pods, e.g. the gateway's FACILITY_URL, point at).
 */
function replicaPortFlags(i: number): string[] {
  const values = podmanValues();
  const flags: string[] = [];
  for (const s of SERVICES) {
    if (Number(values[s]?.replicaCount ?? 1) <= i) continue;
    for (const [name, port] of Object.entries(values[s]?.containerPorts ?? {}))
      flags.push('--set', `${s}.containerPorts.${name}=${Number(port) + 100 * i}`);
  }
  return flags;
}

/** The plan of the played chart: renders of replica 0 and 1 (the most any service has in the overlay). */
export function plan(extraCa?: PlanOptions['extraCa']): PlayPlan {
  const renders = [0, 1].map((i) => render([VALUES], i === 0 ? [] : replicaPortFlags(i)));
  return playPlan({ renders, extraCa });
}

/** Application secrets of the played stack: generated once, reused by every later play. */
export function appSecrets(): Record<string, string> {
  const file = join(STATE_DIR, 'app-secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  const values = {
    'internal-auth-secret': randomBytes(32).toString('hex'),
    'usage-grpc-secret': randomBytes(32).toString('hex'),
    'webhook-secret-key': randomBytes(32).toString('base64'),
    'ingest-token': randomBytes(32).toString('hex'),
  };
  mkdirSync(STATE_DIR, { recursive: true });
  writeFileSync(file, JSON.stringify(values), { mode: 0o600 });
  return values;
}

/** Creates (or replaces) one podman secret from a key → base64 map; the file never outlives the call. */
function createSecret(name: string, data: Record<string, string>): void {
  const dir = mkdtempSync(join(tmpdir(), 'fcd-secret-'));
  try {
    writeFileSync(join(dir, 'data.json'), JSON.stringify(data), { mode: 0o600 });
    try {
      podman(['secret', 'rm', name]);
    } catch {
      // not there yet
    }
    podman(['secret', 'create', name, join(dir, 'data.json')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The played stack's own database, created when missing (the overlay's externalDatabase.url). */
async function ensureDatabase(): Promise<void> {
  const url = new URL(podmanValues().externalDatabase.url);
  const database = url.pathname.slice(1);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE "${database.replace(/"/g, '')}"`);
  } finally {
    await client.end();
  }
}

/** `podman kube play` of one pod (replacing an earlier one of the same name). */
function playPod(m: Manifest): void {
  mkdirSync(STATE_DIR, { recursive: true });
  const file = join(STATE_DIR, `${m.metadata.name}.yaml`);
  writeFileSync(file, stringify(m));
  podman(['kube', 'play', '--replace', '--network', 'host', file]);
}

/** The end of a container's output, stdout and stderr together, and how it ended. */
function containerLog(container: string): string {
  const r = spawnSync('podman', ['logs', container], { env: podmanEnv, encoding: 'utf8' });
  const log = `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n').slice(-40).join('\n');
  const state = spawnSync('podman', ['inspect', '--format', 'exit code {{.State.ExitCode}}, error "{{.State.Error}}"', container], {
    env: podmanEnv,
    encoding: 'utf8',
  });
  return `${log}\n(${`${state.stdout}${state.stderr}`.trim()})`;
}

/** Names of a pod's containers as podman names them (`<pod>-<container>`). */
export function containerNames(m: Manifest): string[] {
  return [...(m.spec.initContainers ?? []), ...m.spec.containers].map((c: { name: string }) => `${m.metadata.name}-${c.name}`);
}

/**
 * Runs a Job's pod to completion: its containers must exit 0. podman runs the init containers
 * first, one after the other, and removes each once it exits 0; one that fails fails the play.
 */
export async function runToCompletion(m: Manifest): Promise<void> {
  playPod(m);
  for (const c of m.spec.containers.map((x: { name: string }) => `${m.metadata.name}-${x.name}`)) {
    const code = (await podmanAsync(['wait', c])).trim();
    if (code !== '0') throw new Error(`${c} exited with ${code}:\n${containerLog(c)}`);
  }
}

/** One probe of a rendered container, run against it on 127.0.0.1: its HTTP status (0: no answer). */
export async function runProbe(probe: { httpGet: { path: string; port: number } }): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${probe.httpGet.port}${probe.httpGet.path}`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Waits until the pod's readiness probes answer 200; a container that exits fails at once with its log. */
async function waitReady(m: Manifest, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await Promise.all(m.spec.containers.map((c: { readinessProbe: never }) => runProbe(c.readinessProbe)));
    if (statuses.every((s) => s === 200)) return;
    for (const c of containerNames(m)) {
      if (podman(['inspect', '--format', '{{.State.Running}}', c]).trim() !== 'true')
        throw new Error(`${c} is not running:\n${containerLog(c)}`);
    }
    if (Date.now() > deadline) throw new Error(`${m.metadata.name}: not ready within ${timeoutMs} ms (probes: ${statuses.join(', ')})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Brings the played chart up; returns its plan. The ECHO sync's pod is run only with `echoSync`. */
export async function up(
  options: { extraCa?: PlanOptions['extraCa']; echoSync?: boolean; log?: (s: string) => void } = {},
): Promise<PlayPlan> {
  const log = options.log ?? (() => {});
  const p = plan(options.extraCa);
  useHostsFile(p.pods[0]?.spec.hostAliases?.[0]?.hostnames ?? []);
  await ensureDatabase();
  const app = appSecrets();
  createSecret(APP_SECRET, Object.fromEntries(Object.entries(app).map(([k, v]) => [k, Buffer.from(v).toString('base64')])));
  for (const s of p.secrets) createSecret(s.name, s.data);
  const migrate = p.jobs.find((j) => j.metadata.name.endsWith('-migrate'));
  if (migrate) {
    await runToCompletion(migrate);
    log(`${migrate.metadata.name}: completed`);
  }
  for (const pod of p.pods) playPod(pod);
  for (const pod of p.pods) {
    await waitReady(pod);
    log(`${pod.metadata.name}: ready`);
  }
  const echo = p.jobs.find((j) => j.metadata.name.endsWith('-echo-sync-once'));
  if (echo && options.echoSync) {
    await runToCompletion(echo);
    log(`${echo.metadata.name}: completed`);
  }
  log(`not played (no podman equivalent): ${p.skipped.join(', ')}`);
  return p;
}

/** The chart's pods, volumes and secrets on this machine (the release's name prefix), from any earlier play. */
function played(kind: 'pod' | 'volume' | 'secret', prefix: string): string[] {
  return podman([kind, 'ls', '--format', '{{.Name}}'])
    .split('\n')
    .map((l) => l.trim())
    .filter((n) => n.startsWith(prefix));
}

/** Takes every pod, volume and secret of the played chart away, also those of an earlier overlay. */
export function down(): void {
  const p = plan();
  const migrate = p.jobs.find((j) => j.metadata.name.endsWith('-migrate'));
  const prefix = migrate?.metadata.name.replace(/-migrate$/, '') ?? 'fcd-facility-compliance';
  const pods = played('pod', `${prefix}-`);
  if (pods.length > 0) podman(['pod', 'rm', '--force', '--time', '10', ...pods]);
  const volumes = played('volume', `${prefix}-`);
  if (volumes.length > 0) podman(['volume', 'rm', '--force', ...volumes]);
  for (const name of [APP_SECRET, ...p.secrets.map((s) => s.name)])
    if (played('secret', name).includes(name)) podman(['secret', 'rm', name]);
}

async function main(): Promise<void> {
  const command = process.argv[2];
  if (command === 'down') {
    down();
    console.log('the played chart is down');
    return;
  }
  if (command !== 'up') throw new Error('usage: play.ts up|down');
  const p = await up({ log: (s) => console.log(s) });
  const gw = p.pods.find((m) => m.metadata.name.includes('-gateway-'));
  const port = gw?.spec.containers[0].env.find((e: { name: string }) => e.name === 'PORT')?.value;
  console.log(
    `\nThe API is up on http://127.0.0.1:${port} (gateway replica 0). A key: CONTAINERS_CONF=.run/kube/containers.conf podman exec ${
      containerNames(p.pods.find((m) => m.metadata.name.includes('-usage-')) as Manifest)[0]
    } node services/usage/dist/cli.js demo`,
  );
  console.log('npm run kube:down takes it away.');
}

if (process.argv[1]?.endsWith('play.ts')) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
