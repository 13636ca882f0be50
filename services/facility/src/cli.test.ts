import type { CliIo } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { run } from './cli';

async function cli(args: string[]) {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' },
  };
  const code = await run(args, io);
  return { code, stdout, firstLine: stderr.split('\n')[0], usage: stderr.includes('\n\nusage: node dist/cli.js <command> [options]\n') };
}

describe('facility CLI run(): usage errors are exit 1, the message and the usage text on stderr', () => {
  it.each([
    [[], 'no command given'],
    [['frob'], 'unknown command: frob'],
    [['import'], 'import needs a file'],
    [['import', 'x.txt'], '--kind must be one of facilities, violations, cases'],
    [['import', 'x.txt', '--kind', 'cases'], 'the file must end in .ndjson, .jsonl or .csv'],
    [['import', 'missing.csv', '--kind', 'cases'], 'no such file: missing.csv'],
    [['import', 'x.csv', '--kind'], "Option '--kind <value>' argument missing"],
    [['seed'], '--facilities must be a positive integer'],
    [['seed', '--facilities', '0'], '--facilities must be a positive integer'],
    [['seed', '--facilities', '2', '--as-of', '2026-02-30'], '--as-of must be a date YYYY-MM-DD'],
    [['seed', '--facilities', '2', '--out', 'x', '--format', 'xml'], '--format must be ndjson or csv'],
    [['seed', '--facilities', '2', '--retry-for', 'soon'], '--retry-for must be a duration, e.g. 60s, 2m or 500ms'],
    [['simulate'], '--rate must be a number of changes per second, e.g. 2/s'],
    [['simulate', '--rate', '2/s', '--duration=-1'], '--duration must be a number of seconds'],
    [['sync-echo'], 'sync-echo needs --from <folder | file.zip | http(s) URL>'],
    [['sync-echo', '--from', 'x', '--only', 'air'], "--only takes links, facilities, icis-air, rcra, npdes, cases, violations; got 'air'"],
  ])('%j: %s', async (args, message) => {
    expect(await cli(args)).toEqual({ code: 1, stdout: '', firstLine: `facility: ${message}`, usage: true });
  });
});
