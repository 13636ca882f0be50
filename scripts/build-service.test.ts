import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/build-service.mjs replaces each file of dist/ by a rename, never by rewriting it in place:
 * a process that starts from dist/ while a build runs loads the old file or the new one, never a
 * half-written one (an empty cli.js runs, prints nothing and exits 0). The proof: a hard link to the
 * old dist/cli.js keeps the old content after a build, which a write in place would have changed.
 */
const script = resolve(import.meta.dirname, 'build-service.mjs');
const dir = mkdtempSync(join(tmpdir(), 'fcd-build-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the service build', () => {
  it('replaces dist/cli.js by a rename: a link to the old file still holds the old build', () => {
    mkdirSync(join(dir, 'src'));
    writeFileSync(join(dir, 'package.json'), '{"name":"fixture","private":true}');
    writeFileSync(join(dir, 'src/cli.ts'), "console.log('first');\n");
    execFileSync(process.execPath, [script], { cwd: dir });
    const first = readFileSync(join(dir, 'dist/cli.js'), 'utf8');
    expect(execFileSync(process.execPath, [join(dir, 'dist/cli.js')], { encoding: 'utf8' })).toBe('first\n');
    linkSync(join(dir, 'dist/cli.js'), join(dir, 'old-cli.js'));

    writeFileSync(join(dir, 'src/cli.ts'), "console.log('second');\n");
    execFileSync(process.execPath, [script], { cwd: dir });

    expect(readFileSync(join(dir, 'old-cli.js'), 'utf8')).toBe(first);
    expect(execFileSync(process.execPath, [join(dir, 'dist/cli.js')], { encoding: 'utf8' })).toBe('second\n');
  });
});
