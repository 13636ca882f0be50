import { execFileSync } from 'node:child_process';
import { repoRoot } from './process';

/**
 * Builds the services once, before any test file runs, and points the tests at Postgres, Redis and
 * NATS.
 *
 * The build is here and in no test file: test files run in parallel, and one that rebuilt a service
 * while another started it from dist/ could start it from a file being replaced. The services'
 * builds write by rename and are not cached by turbo (services/<name>/turbo.json: a cache hit would
 * restore dist/ in place); esbuild makes the whole `npm run build` about 1.5 s.
 * `npm run test:unit` sets TEST_SKIP_BUILD=1: its tests start no process.
 *
 * Postgres, Redis and NATS: when DATABASE_URL, REDIS_URL
 * and NATS_URL are set (scripts/test.sh sets them to the machine's services),
 * nothing starts. When one is unset and a Docker engine answers, testcontainers
 * starts that service for the run; otherwise the local default is used.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.TEST_SKIP_BUILD !== '1') buildServices();
  const missing = ['DATABASE_URL', 'REDIS_URL', 'NATS_URL'].filter((k) => !process.env[k]);
  if (missing.length === 0 || !dockerAvailable()) return undefined;
  const { GenericContainer } = await import('testcontainers');
  const stops: Array<() => Promise<unknown>> = [];
  if (!process.env.DATABASE_URL) {
    const c = await new GenericContainer('postgres:15')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
      .withExposedPorts(5432)
      .start();
    process.env.DATABASE_URL = `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/test`;
    stops.push(() => c.stop());
  }
  if (!process.env.REDIS_URL) {
    const c = await new GenericContainer('redis:7').withExposedPorts(6379).start();
    process.env.REDIS_URL = `redis://${c.getHost()}:${c.getMappedPort(6379)}`;
    stops.push(() => c.stop());
  }
  if (!process.env.NATS_URL) {
    const c = await new GenericContainer('nats:2').withCommand(['-js']).withExposedPorts(4222).start();
    process.env.NATS_URL = `nats://${c.getHost()}:${c.getMappedPort(4222)}`;
    stops.push(() => c.stop());
  }
  return async () => {
    for (const stop of stops) await stop();
  };
}

function buildServices(): void {
  try {
    // A build with nothing cached takes about a minute on two cores; ten is a hung one.
    execFileSync('npm', ['run', 'build', '--silent'], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 600_000,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`npm run build failed before the tests:\n${String(stdout ?? '')}${String(stderr ?? '')}`);
  }
}

function dockerAvailable(): boolean {
  try {
    execFileSync('docker', ['info'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}
