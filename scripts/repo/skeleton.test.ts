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

  it('has main.ts, service.ts and config.ts', () => {
    expect(files).toEqual(expect.arrayContaining(['main.ts', 'service.ts', 'config.ts']));
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
