import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';

/**
 * The size limits of CONTRIBUTING.md ("Where code goes"): no source file over 400 lines, outside
 * generated code and tests. (The 80-line limit on functions is biome's
 * complexity/noExcessiveLinesPerFunction in biome.json, checked by `npm run lint`.)
 */
const root = resolve(import.meta.dirname, '../..');
const MAX_LINES = 400;

const isSource = (file: string) =>
  /\.(ts|mjs|js)$/.test(file) &&
  /^(services|libs|scripts)\//.test(file) &&
  !/\.test\.ts$/.test(file) &&
  !/(^|\/)test\//.test(file) &&
  !/\/(gen|generated|dist)\//.test(file);

it(`keeps every source file at ${MAX_LINES} lines or fewer`, () => {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter(isSource);
  expect(files.length).toBeGreaterThan(100);
  const long = files
    .map((file) => ({ file, lines: readFileSync(resolve(root, file), 'utf8').trimEnd().split('\n').length }))
    .filter((f) => f.lines > MAX_LINES)
    .map((f) => `${f.file}: ${f.lines} lines`);
  expect(long).toEqual([]);
});
