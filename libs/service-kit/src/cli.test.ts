import { describe, expect, it } from 'vitest';
import { CliUsageError, parseCliArgs, runCliIfMain, stopSignal } from './cli';

const OPTIONS = { name: { type: 'string' }, json: { type: 'boolean' } } as const;

describe('parseCliArgs', () => {
  it('returns positionals and options', () => {
    expect(parseCliArgs(['keys', 'list', '--name', 'x', '--json'], OPTIONS)).toEqual({
      positionals: ['keys', 'list'],
      values: { name: 'x', json: true },
    });
  });

  it('turns an unknown option into a one-line usage error', () => {
    expect(() => parseCliArgs(['--frob'], OPTIONS)).toThrow(CliUsageError);
    expect(() => parseCliArgs(['--frob'], OPTIONS)).toThrow(/^Unknown option '--frob'\.[^\n]*$/);
  });

  it('turns a missing value into a usage error', () => {
    expect(() => parseCliArgs(['--name'], OPTIONS)).toThrow(new CliUsageError("Option '--name <value>' argument missing"));
  });
});

describe('runCliIfMain', () => {
  it('does nothing when the module is not the process entry', () => {
    let ran = false;
    runCliIfMain(import.meta.url, 'test', async () => {
      ran = true;
      return 0;
    });
    expect(ran).toBe(false);
  });
});

describe('stopSignal', () => {
  it('is the injected signal when there is one', () => {
    const abort = new AbortController();
    expect(stopSignal({ stdout: process.stdout, stderr: process.stderr, env: {}, signal: abort.signal })).toBe(abort.signal);
  });
});
