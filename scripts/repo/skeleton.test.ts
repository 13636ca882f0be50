import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The service skeleton of CONTRIBUTING.md ("Where code goes"), checked for every service: the same
 * names for the same things, nothing loose in src/ beyond the table, main.ts small and delegating to
 * service.ts's start<Name>, and domain/ free of I/O. A service that drifts from the table fails here,
 * so the table and the code cannot disagree for long.
 */
const root = resolve(import.meta.dirname, '../..');
const SERVICES = readdirSync(join(root, 'services')).filter((s) => existsSync(join(root, 'services', s, 'package.json')));

/**
 * What every service has (the table's rows), unless it is listed below in EXCEPTIONS with the
 * reason; metrics.ts (only when a service has metrics of its own) is optional.
 */
const REQUIRED = ['main.ts', 'service.ts', 'config.ts', 'telemetry.ts', 'app.ts', 'routes/', 'domain/', 'store/', 'clients/', 'cli.ts'];
/** The rows of the table a service does without, and why. An exception for what exists fails too. */
const EXCEPTIONS: Record<string, Record<string, string>> = {
  dispatcher: {
    'routes/': 'serves only /healthz, /readyz (service-kit healthRoutes, in app.ts) and /metrics',
    'cli.ts': 'no command-line tool',
  },
  facility: {
    'clients/': 'calls no other service (the ECHO download is echo/)',
  },
  gateway: {
    'domain/': 'no domain of its own: authentication and metering are auth/, the HTTP mechanics http/',
    'cli.ts': 'no command-line tool (accounts and keys are the usage CLI)',
  },
  usage: {
    'app.ts': 'two servers, each in its folder: grpc/ (authorization) and http/ (admin API, http/app.ts)',
    'routes/': 'its admin routes are http/, beside the gRPC server in grpc/',
    'clients/': 'calls no other service',
  },
  webhook: {
    'store/': 'its storage is @fcd/webhooks (libs/webhooks), shared with the dispatcher',
  },
};

/** The files the table allows directly in src/ (each may have a `.test.ts` beside it). */
const LOOSE_FILES = new Set(['main.ts', 'service.ts', 'config.ts', 'app.ts', 'metrics.ts', 'telemetry.ts', 'cli.ts']);
/** Folder names that would be a second name for a skeleton folder. */
const SYNONYMS: Record<string, string> = {
  upstream: 'clients',
  client: 'clients',
  repositories: 'store',
  repository: 'store',
  db: 'store',
  storage: 'store',
  model: 'domain',
  models: 'domain',
  lib: 'domain',
  utils: 'domain',
  handlers: 'routes',
  controllers: 'routes',
};
/** Modules whose import makes code do I/O; domain/ must import none of them. */
const IO_MODULES = [/^pg$/, /^ioredis$/, /^@nats-io\//, /^undici$/, /^@grpc\//, /^fastify$/, /^node:(fs|net|http|https|dns|child_process)/];

const capitalized = (s: string) => s[0]!.toUpperCase() + s.slice(1);
const importsOf = (source: string) => [...source.matchAll(/^\s*import\s[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);

function filesBelow(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesBelow(path) : [path];
  });
}

describe.each(SERVICES)('services/%s/src follows the service skeleton', (service) => {
  const src = join(root, 'services', service, 'src');
  const entries = readdirSync(src);
  const files = entries.filter((e) => statSync(join(src, e)).isFile());
  const folders = entries.filter((e) => statSync(join(src, e)).isDirectory());

  it('keeps only the files of the table loose in src/', () => {
    const loose = files.filter((f) => !LOOSE_FILES.has(f.replace(/\.test\.ts$/, '.ts')));
    expect(loose).toEqual([]);
  });

  it('has every row of the table, but the exceptions named in this test', () => {
    const exceptions = EXCEPTIONS[service] ?? {};
    const has = (entry: string) => (entry.endsWith('/') ? folders.includes(entry.slice(0, -1)) : files.includes(entry));
    expect(REQUIRED.filter((entry) => !has(entry) && !(entry in exceptions))).toEqual([]);
    // An exception for what the service now has is stale: drop it.
    expect(Object.keys(exceptions).filter(has)).toEqual([]);
  });

  it('uses the skeleton folder names, not synonyms', () => {
    expect(folders.filter((f) => f in SYNONYMS).map((f) => `${f}/ (use ${SYNONYMS[f]}/)`)).toEqual([]);
  });

  it(`starts from service.ts's start${capitalized(service)}, with main.ts about 15 lines`, () => {
    const main = readFileSync(join(src, 'main.ts'), 'utf8');
    const serviceTs = readFileSync(join(src, 'service.ts'), 'utf8');
    expect(serviceTs).toMatch(new RegExp(`export async function start${capitalized(service)}\\(`));
    expect(main).toContain(`start${capitalized(service)}(`);
    expect(main.trimEnd().split('\n').length).toBeLessThanOrEqual(25);
  });
});

it('names only existing services and table rows in EXCEPTIONS', () => {
  expect(Object.keys(EXCEPTIONS).filter((s) => !SERVICES.includes(s))).toEqual([]);
  expect(Object.values(EXCEPTIONS).flatMap((e) => Object.keys(e).filter((row) => !REQUIRED.includes(row)))).toEqual([]);
});

it("keeps every service's domain/ pure: no module that does I/O is imported", () => {
  const domains = SERVICES.map((s) => join(root, 'services', s, 'src', 'domain')).filter((d) => existsSync(d));
  expect(domains.length).toBeGreaterThanOrEqual(4);
  const impure = domains.flatMap((domain) =>
    filesBelow(domain)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
      .flatMap((f) =>
        importsOf(readFileSync(f, 'utf8'))
          .filter((m) => IO_MODULES.some((re) => re.test(m)))
          .map((m) => `${f.slice(root.length + 1)} imports ${m}`),
      ),
  );
  expect(impure).toEqual([]);
});
