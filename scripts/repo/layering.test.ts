import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';

/**
 * domain/ is pure (CONTRIBUTING.md, "Where code goes"), and not only in its own imports: nothing
 * it loads, through any chain of workspace modules, may load a driver or a server. The walk
 * follows every value import (`import type` and `export type` are erased; `import { type X }` is
 * not, under verbatimModuleSyntax) through relative paths and the workspace libraries'
 * package.json exports, and stops at third-party packages, which it names. A domain/ file takes
 * the service kit from `@fcd/service-kit/pure` and the webhook library from `@fcd/webhooks/pure`.
 */
const root = resolve(import.meta.dirname, '../..');
const FORBIDDEN = [/^pg$/, /^ioredis$/, /^@nats-io\//, /^fastify$/, /^undici$/];

const SERVICES = readdirSync(join(root, 'services')).filter((s) => existsSync(join(root, 'services', s, 'src', 'domain')));

function filesBelow(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesBelow(path) : [path];
  });
}

/** The specifiers a module loads when it runs. */
function valueImports(source: string): string[] {
  const statements = source.matchAll(/^\s*(import|export)\s+(type\s+)?([^;'"]*?\bfrom\s+)?['"]([^'"]+)['"]/gm);
  return [...statements].filter((m) => m[2] === undefined && (m[1] === 'import' || m[3] !== undefined)).map((m) => m[4] as string);
}

/** A workspace library's file for `@fcd/<name>[/<subpath>]`, from its package.json exports. */
function workspaceFile(specifier: string): string | undefined {
  const [, name, sub] = /^@fcd\/([^/]+)(?:\/(.+))?$/.exec(specifier) ?? [];
  if (!name) return undefined;
  const pkg = join(root, 'libs', name, 'package.json');
  if (!existsSync(pkg)) return undefined;
  const exports = (JSON.parse(readFileSync(pkg, 'utf8')) as { exports: Record<string, Record<string, string> | string> }).exports;
  const entry = exports[sub === undefined ? '.' : `./${sub}`];
  if (entry === undefined) throw new Error(`${specifier}: not exported by libs/${name}/package.json`);
  const target = typeof entry === 'string' ? entry : (entry.source ?? entry.types ?? entry.default);
  return resolve(dirname(pkg), target as string);
}

function relativeFile(from: string, specifier: string): string {
  const base = resolve(dirname(from), specifier);
  const found = [base, `${base}.ts`, join(base, 'index.ts'), base.replace(/\.js$/, '.ts')].find(
    (f) => existsSync(f) && statSync(f).isFile(),
  );
  if (!found) throw new Error(`${relative(root, from)}: cannot resolve ${specifier}`);
  return found;
}

/** The forbidden modules reachable from `file`, each with the chain that loads it. */
function forbiddenReach(file: string): string[] {
  const seen = new Set<string>([file]);
  const queue: Array<{ file: string; chain: string[] }> = [{ file, chain: [relative(root, file)] }];
  const found: string[] = [];
  while (queue.length > 0) {
    const { file: current, chain } = queue.shift() as { file: string; chain: string[] };
    for (const specifier of valueImports(readFileSync(current, 'utf8'))) {
      if (FORBIDDEN.some((re) => re.test(specifier))) {
        found.push([...chain, specifier].join(' → '));
        continue;
      }
      const next = specifier.startsWith('.') ? relativeFile(current, specifier) : workspaceFile(specifier);
      if (next === undefined || seen.has(next)) continue;
      seen.add(next);
      queue.push({ file: next, chain: [...chain, specifier.startsWith('.') ? relative(root, next) : specifier] });
    }
  }
  return found;
}

it('reads value imports and skips type-only ones', () => {
  const source = [
    "import type { A } from 'pg';",
    "import { type B, c } from './c';",
    "import './side-effect';",
    "export * from '../d';",
    "export type { E } from 'ioredis';",
    'const s = \'import x from "no"\';',
  ].join('\n');
  expect(valueImports(source)).toEqual(['./c', './side-effect', '../d']);
});

it('finds the pg that @fcd/service-kit loads, and none from @fcd/service-kit/pure', () => {
  const probe = join(root, 'libs/service-kit/src/exports/pure.ts');
  expect(forbiddenReach(probe)).toEqual([]);
  expect(forbiddenReach(join(root, 'libs/service-kit/src/index.ts')).some((chain) => chain.endsWith(' → pg'))).toBe(true);
});

it('finds the pg that @fcd/webhooks loads, and none from @fcd/webhooks/pure', () => {
  expect(forbiddenReach(workspaceFile('@fcd/webhooks/pure') as string)).toEqual([]);
  expect(forbiddenReach(workspaceFile('@fcd/webhooks') as string).some((chain) => chain.endsWith(' → pg'))).toBe(true);
});

it('keeps every domain/ file of every service from loading pg, ioredis, NATS, Fastify or undici, transitively', () => {
  const files = SERVICES.flatMap((s) => filesBelow(join(root, 'services', s, 'src', 'domain'))).filter(
    (f) => f.endsWith('.ts') && !f.endsWith('.test.ts'),
  );
  expect(files.length).toBeGreaterThanOrEqual(10);
  const reached = files.map((f) => ({ file: relative(root, f), chains: forbiddenReach(f) }));
  expect(reached.filter((r) => r.chains.length > 0).map((r) => `${r.chains[0]}`)).toEqual([]);
});
