import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitMessageProblems, MAX_SUBJECT, SCOPES } from './commit-msg.mjs';

const root = resolve(import.meta.dirname, '../..');

describe('commitMessageProblems', () => {
  it('accepts "Scope: what changed" with a listed scope, a blank line and a body', () => {
    expect(commitMessageProblems('Gateway: bound every write in total\n\nWhy it matters.\n')).toEqual([]);
    expect(commitMessageProblems('ECHO sync: classify staged rows in one join\n')).toEqual([]);
  });

  it('accepts a subject of exactly 72 characters and refuses 73, counting characters, not bytes', () => {
    const base = 'Benchmarks: ';
    const at72 = base + 'é'.repeat(MAX_SUBJECT - base.length);
    expect(commitMessageProblems(at72)).toEqual([]);
    expect(commitMessageProblems(`${at72}x`)).toEqual(['the subject is 73 characters; at most 72']);
  });

  it('refuses a scope outside the list, naming the list', () => {
    expect(commitMessageProblems('Paced bench: print the slices')).toEqual([
      `"Paced bench" is not a scope; use one of: ${SCOPES.join(', ')}`,
    ]);
    expect(commitMessageProblems('gateway: lower case is another scope')[0]).toMatch(/^"gateway" is not a scope/);
  });

  it('refuses a subject without a scope', () => {
    expect(commitMessageProblems('Tidy comments left doubled')).toEqual(['the subject is not "Scope: what changed"']);
    expect(commitMessageProblems('Gateway:no space after the colon')).toEqual(['the subject is not "Scope: what changed"']);
  });

  it('refuses tracker numbers in the subject', () => {
    // Built at run time, so that a search of the code for tracker numbers does not find the test.
    const n = 16;
    expect(commitMessageProblems(`Bench: end a run with issue ${n}'s targets`)).toEqual([
      'the subject names a tracker number; name the doc or ADR instead',
    ]);
    expect(commitMessageProblems(`Docs: fix the link (#${n})`)).toEqual([
      'the subject names a tracker number; name the doc or ADR instead',
    ]);
  });

  it('wants a blank line between the subject and the body', () => {
    expect(commitMessageProblems('Docs: a subject\nthe body at once')).toEqual([
      'the second line must be blank (subject, blank line, body)',
    ]);
  });

  it("ignores git's comment lines and scissors, and passes git's own merge and revert subjects", () => {
    const edited =
      '# Please enter the commit message\n\nDocs: a subject\n\n# On branch main\n# ------------------------ >8 ------------------------\ndiff';
    expect(commitMessageProblems(edited)).toEqual([]);
    expect(commitMessageProblems("Merge branch 'h-geo'")).toEqual([]);
    expect(commitMessageProblems('Revert "Name the dispatcher\'s hot statements on a direct Postgres pool"')).toEqual([]);
    expect(commitMessageProblems('\n# only comments\n')).toEqual(['the message is empty']);
  });
});

describe('the commit-msg hook', () => {
  const hook = join(root, '.githooks/commit-msg');
  const message = (text: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'commit-msg-')), 'COMMIT_EDITMSG');
    writeFileSync(file, text);
    return file;
  };

  it('exits 0 for a good message and 1 with the problem on stderr for a bad one', () => {
    expect(execFileSync(hook, [message('Docs: a good subject\n')], { cwd: root, encoding: 'utf8' })).toBe('');
    let failure: { status?: number; stderr?: string } = {};
    try {
      execFileSync(hook, [message('a subject without a scope\n')], { cwd: root, encoding: 'utf8', stdio: 'pipe' });
    } catch (err) {
      failure = err as typeof failure;
    }
    expect(failure.status).toBe(1);
    expect(failure.stderr).toBe('commit-msg: the subject is not "Scope: what changed"\n(CONTRIBUTING.md, "Commits")\n');
  });

  it('is named in CONTRIBUTING.md with the same list of scopes', () => {
    const page = readFileSync(join(root, 'CONTRIBUTING.md'), 'utf8');
    const quoted = page
      .split('\n')
      .filter((l) => l.startsWith('> '))
      .map((l) => l.slice(2))
      .join(' ');
    expect(quoted.split(', ')).toEqual(SCOPES);
    expect(page).toContain('`.githooks/commit-msg`');
  });

  it('is installed by npm install: the prepare script points core.hooksPath at .githooks', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.prepare).toContain('git config core.hooksPath .githooks');
  });
});
