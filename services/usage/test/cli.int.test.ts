import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { createClient, type TypedClient } from '@fcd/grpc';
import { AuthorizeRequestSchema, Decision, GetUsageRequestSchema, UsageService } from '@fcd/proto';
import {
  createTestDatabase,
  freePort,
  repoRoot,
  type ServiceProcess,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestDatabase,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/cli';
import { migrations } from '../src/store/migrations';

/**
 * The operator CLI as operators run it: the built services/usage/dist/cli.js in
 * a child process (like libs/testing's stack.ts), against this file's own database.
 * Most commands run the same `run(argv, io)` in-process (the entry only calls it; a
 * process each would take most of a minute): the ones passed `cli` show the real process.
 */
const CLI = resolve(repoRoot, 'services/usage/dist/cli.js');
const KEY = /^fcd_[A-Za-z0-9]{32}$/;
const ACCOUNT_ID = /^acct_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const KEY_ID = /^key_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Account {
  id: string;
  name: string;
  tier: string;
  dailyLimit: number;
  createdAt: string;
}

interface Key {
  id: string;
  accountId: string;
  last4: string;
  name: string;
  prefix: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

let db: TestDatabase;
let client: pg.Client;
/** Every account this file created, in creation order (what `accounts list` must print). */
const created: Account[] = [];

function cli(args: string[]): Promise<CliResult> {
  return new Promise((res, rej) => {
    const proc = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (b: Buffer) => {
      stdout += b.toString('utf8');
    });
    proc.stderr.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    proc.once('error', rej);
    proc.once('close', (code) => res({ code, stdout, stderr }));
  });
}

/** The CLI's `run` in this process, with the child process's environment and exit code. */
async function cliInProcess(args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await run(args, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url },
  });
  return { code, stdout, stderr };
}

type Runner = (args: string[]) => Promise<CliResult>;

/** Runs a command that must succeed: exit 0, nothing on stderr (in-process unless `via` is the child process). */
async function ok(args: string[], via: Runner = cliInProcess): Promise<string> {
  const r = await via(args);
  expect(r, `usage-cli ${args.join(' ')}`).toMatchObject({ code: 0, stderr: '' });
  return r.stdout;
}

async function okJson<T>(args: string[], via: Runner = cliInProcess): Promise<T> {
  const stdout = await ok([...args, '--json'], via);
  expect(stdout.endsWith('\n')).toBe(true);
  expect(stdout.slice(0, -1)).not.toContain('\n'); // one JSON document on one line
  return JSON.parse(stdout) as T;
}

function occurrences(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

/** Everything the CLI can write, to show that a failed command wrote nothing. */
async function snapshot(): Promise<unknown> {
  const tables = ['accounts', 'api_keys', 'audit_log', 'daily_usage', 'tiers'];
  const out: Record<string, unknown> = {};
  for (const t of tables) out[t] = (await client.query(`SELECT * FROM usage.${t} ORDER BY 1, 2`)).rows;
  return out;
}

async function createAccount(name: string, tier: string, extra: string[] = []): Promise<Account> {
  const a = await okJson<Account>(['accounts', 'create', '--name', name, '--tier', tier, ...extra]);
  created.push(a);
  return a;
}

beforeAll(async () => {
  db = await createTestDatabase('usage_cli');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

// Each command is a Node process of its own (about half a second on a busy machine): generous time per test.
describe('usage admin CLI (built dist/cli.js, own database)', { timeout: 120_000 }, () => {
  it('migrates the schema once, then reports it up to date in both modes', async () => {
    expect(await okJson(['migrate'], cli)).toEqual({ applied: migrations.map((m) => m.id) });
    expect(await okJson(['migrate'])).toEqual({ applied: [] });
    expect(await ok(['migrate'])).toBe('up to date\n');
  });

  it('creates accounts of each tier (--json and human output) and lists them in creation order', async () => {
    const pro = await createAccount('Acme Compliance', 'pro');
    expect(pro).toEqual({
      id: expect.stringMatching(ACCOUNT_ID),
      name: 'Acme Compliance',
      tier: 'pro',
      dailyLimit: 25_000,
      createdAt: expect.stringMatching(ISO),
    });
    const free = await createAccount('Small Shop', 'free');
    expect(free).toMatchObject({ name: 'Small Shop', tier: 'free', dailyLimit: 100 });

    const human = await ok(['accounts', 'create', '--name', 'Big Corp', '--tier', 'enterprise', '--daily-limit', '300000']);
    const match = /^(acct_[0-9a-f-]{36})\tenterprise\t300000\/day\tBig Corp\n$/.exec(human);
    expect(match, human).not.toBeNull();
    const enterpriseId = match?.[1] as string;
    const { rows } = await client.query<{ name: string; tier: string; daily_limit_override: number; created_at: Date }>(
      'SELECT name, tier, daily_limit_override, created_at FROM usage.accounts WHERE id = $1',
      [enterpriseId],
    );
    expect(rows).toEqual([{ name: 'Big Corp', tier: 'enterprise', daily_limit_override: 300_000, created_at: expect.any(Date) }]);
    created.push({
      id: enterpriseId,
      name: 'Big Corp',
      tier: 'enterprise',
      dailyLimit: 300_000,
      createdAt: rows[0]!.created_at.toISOString(),
    });

    expect(await okJson<Account[]>(['accounts', 'list'])).toEqual(created);
    expect(await ok(['accounts', 'list'])).toBe(`${created.map((a) => `${a.id}\t${a.tier}\t${a.dailyLimit}/day\t${a.name}`).join('\n')}\n`);
  });

  it('prints a new key exactly once (fcd_ + 32 base62) and stores only its SHA-256 digest and last 4 characters', async () => {
    const account = await createAccount('Key Holder', 'pro');

    const json = await ok(['keys', 'create', '--account', account.id, '--json'], cli);
    const key = JSON.parse(json) as Key & { apiKey: string };
    expect(key).toEqual({
      id: expect.stringMatching(KEY_ID),
      accountId: account.id,
      last4: key.apiKey.slice(-4),
      name: 'default',
      prefix: key.apiKey.slice(0, 8),
      createdAt: expect.stringMatching(ISO),
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
      apiKey: expect.stringMatching(KEY),
    });
    expect(occurrences(json, key.apiKey)).toBe(1);

    const human = await ok(['keys', 'create', '--account', account.id]);
    const lines = human.split('\n');
    expect(lines).toHaveLength(3); // key, note, and the final newline
    const [apiKey, note, end] = lines as [string, string, string];
    expect(apiKey).toMatch(KEY);
    expect(note).toMatch(/^\(key id key_[0-9a-f-]{36}; shown once, store it now\)$/);
    expect(end).toBe('');
    expect(occurrences(human, apiKey)).toBe(1);
    expect(apiKey).not.toBe(key.apiKey);
    const humanKeyId = /^\(key id (key_[0-9a-f-]{36});/.exec(note)?.[1] as string;

    const { rows } = await client.query<{ id: string; account_id: string; digest: string; last4: string; revoked_at: Date | null }>(
      'SELECT id, account_id, digest, last4, revoked_at FROM usage.api_keys WHERE account_id = $1 ORDER BY created_at, id',
      [account.id],
    );
    const sha = (k: string) => createHash('sha256').update(k).digest('hex');
    expect(rows).toEqual([
      { id: key.id, account_id: account.id, digest: sha(key.apiKey), last4: key.apiKey.slice(-4), revoked_at: null },
      { id: humanKeyId, account_id: account.id, digest: sha(apiKey), last4: apiKey.slice(-4), revoked_at: null },
    ]);
    const everything = JSON.stringify(await snapshot());
    expect(everything).not.toContain(key.apiKey.slice(4));
    expect(everything).not.toContain(apiKey.slice(4));
  });

  it('lists keys with their last 4 characters only; a revoked key is listed as revoked (revoking again changes nothing)', async () => {
    const account = await createAccount('Revoker', 'free');
    const first = await okJson<Key & { apiKey: string }>(['keys', 'create', '--account', account.id]);
    const second = await okJson<Key & { apiKey: string }>(['keys', 'create', '--account', account.id]);
    const strip = ({ apiKey: _, ...k }: Key & { apiKey: string }): Key => k;

    const listJson = await ok(['keys', 'list', '--account', account.id, '--json']);
    expect(JSON.parse(listJson)).toEqual([strip(first), strip(second)]);
    const listHuman = await ok(['keys', 'list', '--account', account.id]);
    expect(listHuman).toBe(
      `${first.id}\t…${first.apiKey.slice(-4)}\tactive\tdefault\n${second.id}\t…${second.apiKey.slice(-4)}\tactive\tdefault\n`,
    );
    for (const out of [listJson, listHuman]) {
      for (const k of [first.apiKey, second.apiKey]) {
        expect(out).not.toContain(k);
        expect(out).not.toContain(k.slice(8, -4)); // no more of the key than its prefix and last 4 characters
      }
    }

    const revoked = await okJson<Key>(['keys', 'revoke', '--key', first.id]);
    expect(revoked).toEqual({ ...strip(first), revokedAt: expect.stringMatching(ISO) });
    const { rows } = await client.query<{ revoked_at: Date }>('SELECT revoked_at FROM usage.api_keys WHERE id = $1', [first.id]);
    expect(rows[0]?.revoked_at.toISOString()).toBe(revoked.revokedAt);

    expect(await ok(['keys', 'revoke', '--key', first.id])).toBe(`${first.id} revoked at ${revoked.revokedAt}\n`);
    expect(await okJson(['keys', 'list', '--account', account.id])).toEqual([revoked, strip(second)]);
    expect(await ok(['keys', 'list', '--account', account.id])).toBe(
      `${first.id}\t…${first.apiKey.slice(-4)}\trevoked ${revoked.revokedAt}\tdefault\n${second.id}\t…${second.apiKey.slice(-4)}\tactive\tdefault\n`,
    );
  });

  it('changes an account tier (persisted) and a running usage service applies it and a revocation to the next request', async () => {
    const account = await createAccount('Upgrader', 'free');
    const { apiKey, id: keyId } = await okJson<Key & { apiKey: string }>(['keys', 'create', '--account', account.id]);

    const prefix = `${uniqueName('usage_cli')}:`;
    const grpcPort = await freePort();
    let usage: ServiceProcess | undefined;
    let rpc: TypedClient<typeof UsageService> | undefined;
    try {
      // KEY_CACHE_TTL_MS bounds how long a replica may use a cached key lookup (5 s by default, docs/metering.md);
      // 0 makes every request read the account, so the change shows at the very next request, without waiting.
      usage = await startService('usage', {
        DATABASE_URL: db.url,
        REDIS_URL: testUrls.redis,
        REDIS_KEY_PREFIX: prefix,
        GRPC_PORT: String(grpcPort),
        PORT: '0',
        METRICS_PORT: '0',
        HOST: '127.0.0.1',
        KEY_CACHE_TTL_MS: '0',
        KEY_CACHE_NEGATIVE_TTL_MS: '0',
        USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
      });
      const usageRpc = createClient(UsageService, `127.0.0.1:${grpcPort}`, { callSecret: TEST_USAGE_GRPC_SECRET });
      rpc = usageRpc;
      const authorize = async () => {
        const res = await usageRpc.unary.authorize(create(AuthorizeRequestSchema, { items: [{ apiKey, method: 'GET', path: '/v1/x' }] }));
        expect(res.results).toHaveLength(1);
        const r = res.results[0]!;
        return {
          decision: r.decision,
          tier: r.tier,
          tierRank: r.tierRank,
          dailyLimit: r.dailyLimit,
          count: r.count,
          remaining: r.remaining,
        };
      };

      expect(await authorize()).toEqual({
        decision: Decision.ALLOWED,
        tier: 'free',
        tierRank: 0,
        dailyLimit: 100,
        count: 1,
        remaining: 99,
      });

      const pro = await okJson<Account>(['accounts', 'set-tier', '--account', account.id, '--tier', 'pro']);
      expect(pro).toEqual({ ...account, tier: 'pro', dailyLimit: 25_000 });
      const stored = async () =>
        (
          await client.query<{ tier: string; daily_limit_override: number | null }>(
            'SELECT tier, daily_limit_override FROM usage.accounts WHERE id = $1',
            [account.id],
          )
        ).rows;
      expect(await stored()).toEqual([{ tier: 'pro', daily_limit_override: null }]);
      expect(await authorize()).toEqual({
        decision: Decision.ALLOWED,
        tier: 'pro',
        tierRank: 1,
        dailyLimit: 25_000,
        count: 2,
        remaining: 24_998,
      });

      expect(await ok(['accounts', 'set-tier', '--account', account.id, '--tier', 'enterprise', '--daily-limit', '300000'])).toBe(
        `${account.id}\tenterprise\t300000/day\n`,
      );
      expect(await stored()).toEqual([{ tier: 'enterprise', daily_limit_override: 300_000 }]);
      expect(await authorize()).toEqual({
        decision: Decision.ALLOWED,
        tier: 'enterprise',
        tierRank: 2,
        dailyLimit: 300_000,
        count: 3,
        remaining: 299_997,
      });

      await ok(['keys', 'revoke', '--key', keyId]);
      expect(await authorize()).toEqual({
        decision: Decision.UNAUTHENTICATED,
        tier: '',
        tierRank: 0,
        dailyLimit: 0,
        count: 0,
        remaining: 0,
      });
      const report = await rpc.unary.getUsage(create(GetUsageRequestSchema, { accountId: account.id }));
      expect(report.today?.requestCount).toBe(3); // the refused request was not counted
      expect(report.tier).toBe('enterprise');
      expect(report.dailyLimit).toBe(300_000);
      for (const a of created) if (a.id === account.id) Object.assign(a, { tier: 'enterprise', dailyLimit: 300_000 });
    } finally {
      rpc?.close();
      if (usage) expect(await usage.stop()).toBe(0);
      const redis = new Redis(testUrls.redis);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });

  it("refuses a bad command as a process too: the entry passes on run()'s exit code and output", async () => {
    expect(await cli(['bogus'])).toEqual({ code: 1, stdout: '', stderr: 'usage-cli: unknown command: bogus\n' });
  });

  it('refuses bad commands with exit code 1, one line on stderr (JSON with --json), nothing on stdout and nothing written', async () => {
    const account = await createAccount('Untouched', 'pro');
    await okJson(['keys', 'create', '--account', account.id]);
    const cases: Array<[string[], string]> = [
      [['bogus'], 'unknown command: bogus'],
      [[], 'unknown command: (none)'],
      [['accounts'], 'unknown command: accounts'],
      [['accounts', 'delete', '--account', account.id], 'unknown command: accounts delete'],
      [['accounts', 'create', '--name', 'X'], '--tier is required'],
      [['accounts', 'create', '--tier', 'pro'], '--name is required'],
      [['accounts', 'create', '--tier', 'pro', '--name'], "Option '--name <value>' argument missing"],
      [
        ['accounts', 'create', '--name', 'X', '--tier', 'pro', '--daily-limit', '12abc'],
        '--daily-limit must be an integer from 1 to 2147483647',
      ],
      [
        ['accounts', 'create', '--name', 'X', '--tier', 'pro', '--daily-limit', '0'],
        '--daily-limit must be an integer from 1 to 2147483647',
      ],
      [['accounts', 'set-tier', '--account', account.id], '--tier is required'],
      [['accounts', 'set-tier', '--tier', 'free'], '--account is required'],
      [['keys', 'create'], '--account is required'],
      [['keys', 'list'], '--account is required'],
      [['keys', 'revoke'], '--key is required'],
      [['accounts', 'create', '--name', 'X', '--tier', 'gold'], 'Unknown tier: gold'],
      [['accounts', 'set-tier', '--account', account.id, '--tier', 'gold'], 'Unknown tier: gold'],
      [['accounts', 'set-tier', '--account', 'acct_missing', '--tier', 'free'], 'No such account: acct_missing'],
      [['keys', 'create', '--account', 'acct_missing'], 'No such account: acct_missing'],
      [['keys', 'list', '--account', 'acct_missing'], 'No such account: acct_missing'],
      [['keys', 'revoke', '--key', 'key_missing'], 'No such key: key_missing'],
    ];
    const before = await snapshot();
    for (const [args, message] of cases) {
      const [human, json] = await Promise.all([cliInProcess(args), cliInProcess(['--json', ...args])]);
      expect({ args, ...human }).toEqual({ args, code: 1, stdout: '', stderr: `usage-cli: ${message}\n` });
      expect({ args, ...json }).toEqual({ args, code: 1, stdout: '', stderr: `${JSON.stringify({ error: message })}\n` });
    }
    // An option given without its value before --json: Node's parser takes "--json" for the value and says so.
    expect(await cliInProcess(['accounts', 'create', '--name', 'X', '--tier', '--json'])).toEqual({
      code: 1,
      stdout: '',
      stderr: `${JSON.stringify({
        error:
          "Option '--tier' argument is ambiguous. Did you forget to specify the option argument for '--tier'? To specify an option argument starting with a dash use '--tier=-XYZ'.",
      })}\n`,
    });
    // An unknown option: Node's parser message, still one line and no stack trace.
    const unknown = await cliInProcess(['accounts', 'list', '--frob']);
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toMatch(/^usage-cli: Unknown option '--frob'\.[^\n]*\n$/);
    expect(await snapshot()).toEqual(before);
    // And the accounts as every successful command above left them (set-tier included).
    expect(await okJson(['accounts', 'list'])).toEqual(created);
  });
});
