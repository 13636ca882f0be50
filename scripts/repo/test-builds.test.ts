import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';

/**
 * No test file builds the services: the vitest global set-up (libs/testing/src/global-setup.ts)
 * builds them once, before any file runs. Test files run in parallel, and a build in one of them
 * (`npm run build`, turbo restoring its cache in place) could hand another one's process a
 * half-written dist/ file.
 */
const root = resolve(import.meta.dirname, '../..');

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name === 'dist') return [];
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return testFiles(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

it('has no test file that runs npm run build', () => {
  const files = ['services', 'libs', 'scripts'].flatMap((d) => testFiles(join(root, d)));
  expect(files.length).toBeGreaterThan(100);
  const building = files.filter((f) => /['"]run['"],\s*['"]build['"]/.test(readFileSync(f, 'utf8'))).map((f) => relative(root, f));
  expect(building).toEqual([]);
});
