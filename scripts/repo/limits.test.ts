import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';

/**
 * The size limits of CONTRIBUTING.md ("Where code goes"): no source file over 400 lines and no
 * function over 80, outside generated code and tests (test files, test/ folders: a `describe` body
 * is long by nature). A function counts from the line it starts on to the line it ends on, as a
 * reader counts it. Biome's complexity/noExcessiveLinesPerFunction (biome.json, 80) counts only the
 * code lines of the body, so it flags a subset of these, in the editor; this test is the rule.
 */
const root = resolve(import.meta.dirname, '../..');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

const isSource = (file: string) =>
  /\.(ts|mts|mjs|js)$/.test(file) &&
  /^(services|libs|scripts)\//.test(file) &&
  !/\.d\.m?ts$/.test(file) &&
  !/\.test\.ts$/.test(file) &&
  !/(^|\/)test\//.test(file) &&
  !/\/(gen|generated|dist)\//.test(file);

const sources = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter(isSource)
  .map((file) => ({ file, text: readFileSync(resolve(root, file), 'utf8') }));

it(`keeps every source file at ${MAX_FILE_LINES} lines or fewer`, () => {
  expect(sources.length).toBeGreaterThan(100);
  const long = sources
    .map(({ file, text }) => ({ file, lines: text.trimEnd().split('\n').length }))
    .filter((f) => f.lines > MAX_FILE_LINES)
    .map((f) => `${f.file}: ${f.lines} lines`);
  expect(long).toEqual([]);
});

/** The functions of a file (declarations, expressions, arrows, methods, accessors) longer than the limit. */
function longFunctions(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : '(anonymous)';
      if (lines > MAX_FUNCTION_LINES) found.push(`${file}:${first + 1} ${name}: ${lines} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

it(`keeps every function of the sources at ${MAX_FUNCTION_LINES} lines or fewer`, () => {
  expect(longFunctions('example.ts', `function f() {\n${'  f();\n'.repeat(MAX_FUNCTION_LINES - 1)}}\n`)).toEqual([
    `example.ts:1 f: ${MAX_FUNCTION_LINES + 1} lines`,
  ]);
  expect(sources.flatMap(({ file, text }) => longFunctions(file, text))).toEqual([]);
});
