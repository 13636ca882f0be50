import type { CliIo } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { run } from './cli';

/** Nothing listens here: these commands must fail before they need Postgres. */
const NO_DATABASE = 'postgres://postgres@127.0.0.1:1/none';

async function cli(args: string[], env: Record<string, string> = { DATABASE_URL: NO_DATABASE }) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env };
  const code = await run(args, io);
  return { code, stdout, stderr };
}

describe('usage-cli run(): argument errors are exit 1 and one line on stderr (JSON with --json)', () => {
  const cases: Array<[string[], string]> = [
    [['bogus'], 'unknown command: bogus'],
    [[], 'unknown command: (none)'],
    [['migrate', 'now'], 'unknown command: migrate now'],
    [['accounts'], 'unknown command: accounts'],
    [['accounts', 'delete'], 'unknown command: accounts delete'],
    [['accounts', 'create', '--name', 'X'], '--tier is required'],
    [['accounts', 'create', '--tier', 'pro'], '--name is required'],
    [['accounts', 'create', '--tier', 'pro', '--name'], "Option '--name <value>' argument missing"],
    [
      ['accounts', 'create', '--name', 'X', '--tier', 'pro', '--daily-limit', '12abc'],
      '--daily-limit must be an integer from 1 to 2147483647',
    ],
    [
      ['accounts', 'create', '--name', 'X', '--tier', 'pro', '--daily-limit', '2147483648'],
      '--daily-limit must be an integer from 1 to 2147483647',
    ],
    [['accounts', 'set-tier', '--tier', 'free'], '--account is required'],
    [['keys', 'create'], '--account is required'],
    [['keys', 'list'], '--account is required'],
    [['keys', 'revoke'], '--key is required'],
    [['keys', 'rename', '--name', 'ci'], '--key is required'],
    [['keys', 'rename', '--key', 'key_00000000-0000-4000-8000-000000000000'], '--name is required'],
    [['keys', 'rename', '--key', 'key_00000000-0000-4000-8000-000000000000', '--name', ' '], 'Invalid name: must not be empty.'],
    [['keys', 'roll', '--expires-in-seconds', '60'], '--key is required'],
    [['keys', 'roll', '--key', 'key_00000000-0000-4000-8000-000000000000'], '--expires-in-seconds is required'],
    [
      ['keys', 'roll', '--key', 'key_00000000-0000-4000-8000-000000000000', '--expires-in-seconds', '604801'],
      'Invalid expires_in_seconds: must be an integer from 0 to 604800.',
    ],
    [
      ['keys', 'roll', '--key', 'key_00000000-0000-4000-8000-000000000000', '--expires-in-seconds', '1e3'],
      'Invalid expires_in_seconds: must be an integer from 0 to 604800.',
    ],
    [['keys', 'create', '--account', 'acct_1', '--name', ''], 'Invalid name: must not be empty.'],
    [['keys', 'create', '--account', 'acct_1', '--expires-at', 'tomorrow'], 'Invalid expires_at: must be an RFC 3339 date-time.'],
    [['keys', 'rotate'], 'unknown command: keys rotate'],
    [['keys', 'audit'], '--account is required'],
    [['keys', 'audit', '--account', 'acct_1', '--limit', '0'], 'Invalid request: limit: must be an integer from 1 to 100'],
    [['keys', 'audit', '--account', 'acct_1', '--limit', '1e2'], 'Invalid request: limit: must be an integer from 1 to 100'],
  ];
  it.each(cases)('%j: %s', async (args, message) => {
    expect(await cli(args)).toEqual({ code: 1, stdout: '', stderr: `usage-cli: ${message}\n` });
    expect(await cli(['--json', ...args])).toEqual({ code: 1, stdout: '', stderr: `${JSON.stringify({ error: message })}\n` });
  });

  it('names an unknown option', async () => {
    const r = await cli(['accounts', 'list', '--frob']);
    expect(r).toMatchObject({ code: 1, stdout: '' });
    expect(r.stderr).toMatch(/^usage-cli: Unknown option '--frob'\.[^\n]*\n$/);
  });

  it('needs DATABASE_URL', async () => {
    expect(await cli(['accounts', 'list'], {})).toEqual({ code: 1, stdout: '', stderr: 'usage-cli: DATABASE_URL is required\n' });
  });
});
