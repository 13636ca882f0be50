import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { hostsPreloadEnv } from '../src/process';

const run = promisify(execFile);

// The child resolves with the same calls the services make: node:dns `lookup`
// through util.promisify with { all: true }, and the callback form.
const probe = `
import { lookup } from 'node:dns';
import { promisify } from 'node:util';
const all = await promisify(lookup)('rebind.test', { all: true, verbatim: true });
const one = await new Promise((res, rej) => lookup('Rebind.Test', (e, a, f) => (e ? rej(e) : res({ a, f }))));
const v6 = await promisify(lookup)('two.test', { all: true, family: 6 });
const real = await promisify(lookup)('localhost', { all: true });
let missing = 'resolved';
try { await promisify(lookup)('v6only.test', { family: 4 }); } catch (e) { missing = e.code; }
console.log(JSON.stringify({ all, one, v6, real: real.length > 0, missing }));
`;

describe('hosts preload (test-only resolver for service processes)', () => {
  it('makes the named hosts resolve to the given addresses and leaves other names to the system', async () => {
    const env = hostsPreloadEnv({ 'rebind.test': '127.0.0.1', 'two.test': ['10.0.0.5', '::1'], 'v6only.test': '::1' });
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], { env: { PATH: process.env.PATH ?? '', ...env } });
    expect(JSON.parse(stdout)).toEqual({
      all: [{ address: '127.0.0.1', family: 4 }],
      one: { a: '127.0.0.1', f: 4 },
      v6: [{ address: '::1', family: 6 }],
      real: true,
      missing: 'ENOTFOUND',
    });
  });
});
