import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';

/**
 * No test builds the services: the vitest global set-up (libs/testing/src/global-setup.ts) builds
 * them once, before any file runs. Test files run in parallel, and a build in one of them (turbo
 * restores its cached dist/ in place) could hand another one's process a half-written dist/ file.
 * Read: every test file, and every file of a test/ folder (helpers included).
 */
const root = resolve(import.meta.dirname, '../..');

/** Any way of calling a build: npm's argument list or command line, turbo, or the build script itself. */
const BUILD = /['"]run['"],\s*['"]build['"]|npm run build|turbo (run )?build|build-service\.mjs/;

/** Files that name a build without running one over dist/. */
const ALLOWED: Record<string, string> = {
  'scripts/build-service.test.ts': 'runs the build script on a fixture in a temporary folder',
  'scripts/image/image.test.ts': "reads the Dockerfile's build instruction as text",
  'scripts/repo/test-builds.test.ts': 'this check',
};

function testFiles(dir: string, inTestFolder: boolean): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name === 'dist') return [];
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return testFiles(path, inTestFolder || name === 'test');
    return name.endsWith('.test.ts') || (inTestFolder && /\.(ts|mts|mjs|js)$/.test(name)) ? [path] : [];
  });
}

it('has no test, and no file of a test folder, that runs a build', () => {
  const files = ['services', 'libs', 'scripts'].flatMap((d) => testFiles(join(root, d), false)).map((f) => relative(root, f));
  expect(files.length).toBeGreaterThan(200);
  const building = files.filter((f) => !(f in ALLOWED) && BUILD.test(readFileSync(join(root, f), 'utf8')));
  expect(building).toEqual([]);
});
