import type { CliIo } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { run } from './cli';

const USAGE = 'usage: webhook-cli migrate\n       webhook-cli deactivate-account --account ID [--reason REASON] [--json]\n';

async function cli(args: string[], env: Record<string, string> = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env };
  const code = await run(args, io);
  return { code, stdout, stderr };
}

describe('webhook-cli run()', () => {
  it.each([
    [[], 'a command is required'],
    [['frobnicate'], 'unknown command "frobnicate"'],
    [['deactivate-account'], '--account is required'],
    [
      ['deactivate-account', '--account', 'acct_1', '--reason', 'Bad Reason'],
      '--reason must be snake_case (a-z, 0-9, _), at most 64 characters',
    ],
    [['migrate', '--account'], "Option '--account <value>' argument missing"],
  ])('refuses %j with exit 2, the message and the usage text', async (args, message) => {
    expect(await cli(args)).toEqual({ code: 2, stdout: '', stderr: `webhook-cli: ${message}\n${USAGE}` });
  });

  it('refuses a missing DATABASE_URL with exit 1 and one line', async () => {
    const r = await cli(['migrate'], {});
    expect(r).toMatchObject({ code: 1, stdout: '' });
    expect(r.stderr).toMatch(/^webhook-cli: invalid configuration: [^\n]*DATABASE_URL[^\n]*\n$/);
  });
});
