/**
 * Operator CLI of the usage service (accounts, tiers, API keys). Talks to
 * Postgres through DATABASE_URL. `--json` prints machine-readable output.
 *
 *   usage-cli migrate
 *   usage-cli accounts create --name NAME --tier free|pro|enterprise [--daily-limit N] [--json]
 *   usage-cli accounts list [--json]
 *   usage-cli accounts set-tier --account ID --tier TIER [--daily-limit N] [--json]
 *   usage-cli keys create --account ID [--json]        (the key is printed once)
 *   usage-cli keys list --account ID [--json]          (last 4 characters only)
 *   usage-cli keys revoke --key KEY_ID [--json]
 *   usage-cli demo [--json]                            (a demo Free and a demo Pro account, one key each)
 */
import { parseArgs } from 'node:util';
import { AppError, ConfigError, createLogger, createPool, migrate, PostgresEnv, parseConfig, postgresOptions } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import { AccountStore } from './store/accounts';
import { migrations, USAGE_SCHEMA } from './store/migrations';

const OPTIONS = {
  name: { type: 'string' },
  tier: { type: 'string' },
  account: { type: 'string' },
  key: { type: 'string' },
  'daily-limit': { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

/** One line on stderr (JSON with --json), exit code 1: the only way this CLI reports an error. */
function fail(json: boolean, message: string): never {
  process.stderr.write(json ? `${JSON.stringify({ error: message })}\n` : `usage-cli: ${message}\n`);
  process.exit(1);
}

function parseCommandLine() {
  try {
    return parseArgs({ allowPositionals: true, options: OPTIONS });
  } catch (err) {
    // An unknown option or an option without its value: a one-line error, not a stack trace.
    return fail(process.argv.includes('--json'), (err as Error).message.replace(/\s*\n\s*/g, ' '));
  }
}
const { positionals, values } = parseCommandLine();

const out = (json: unknown, text: string): void => void process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
const need = (name: 'name' | 'tier' | 'account' | 'key'): string => {
  const v = values[name];
  if (!v) throw new AppError('VALIDATION_ERROR', `--${name} is required`);
  return v;
};
/** usage.accounts.daily_limit_override is a positive Postgres integer. */
const MAX_DAILY_LIMIT = 2_147_483_647;
const dailyLimit = (): number | undefined => {
  const raw = values['daily-limit'];
  if (raw === undefined) return undefined;
  const n = /^[1-9][0-9]*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n <= MAX_DAILY_LIMIT)) throw new AppError('VALIDATION_ERROR', `--daily-limit must be an integer from 1 to ${MAX_DAILY_LIMIT}`);
  return n;
};

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) fail(values.json, 'DATABASE_URL is required');
const logger = createLogger({ service: 'usage-cli', level: 'warn', destination: process.stderr });
let pgEnv: Record<string, unknown> = {};
try {
  pgEnv = parseConfig(Type.Object(PostgresEnv));
} catch (err) {
  fail(values.json, err instanceof ConfigError ? err.message : String(err));
}
const pool = createPool({
  connectionString: databaseUrl,
  applicationName: 'usage-cli',
  logger,
  max: 2,
  connection: postgresOptions(pgEnv),
});
const accounts = new AccountStore(pool);

async function run(): Promise<void> {
  const [group, action] = positionals;
  switch (`${group} ${action ?? ''}`.trim()) {
    case 'migrate': {
      const applied = await migrate(pool, USAGE_SCHEMA, migrations);
      return out({ applied }, applied.length ? `applied: ${applied.join(', ')}` : 'up to date');
    }
    case 'accounts create': {
      const a = await accounts.createAccount({ name: need('name'), tier: need('tier'), dailyLimit: dailyLimit() });
      return out(a, `${a.id}\t${a.tier}\t${a.dailyLimit}/day\t${a.name}`);
    }
    case 'accounts list': {
      const list = await accounts.listAccounts();
      return out(list, list.map((a) => `${a.id}\t${a.tier}\t${a.dailyLimit}/day\t${a.name}`).join('\n'));
    }
    case 'accounts set-tier': {
      const a = await accounts.setTier(need('account'), need('tier'), dailyLimit());
      return out(a, `${a.id}\t${a.tier}\t${a.dailyLimit}/day`);
    }
    case 'keys create': {
      const { key, apiKey } = await accounts.createKey(need('account'));
      return out({ ...key, apiKey }, `${apiKey}\n(key id ${key.id}; shown once, store it now)`);
    }
    case 'keys list': {
      const accountId = need('account');
      // An unknown account is an error, not an empty list (a mistyped id must not look like "no keys").
      if (!(await accounts.accountWithTier(accountId))) throw new AppError('NOT_FOUND', `No such account: ${accountId}`);
      const keys = await accounts.listKeys(accountId);
      return out(keys, keys.map((k) => `${k.id}\t…${k.last4}\t${k.revokedAt ? `revoked ${k.revokedAt}` : 'active'}`).join('\n'));
    }
    case 'keys revoke': {
      const k = await accounts.revokeKey(need('key'));
      return out(k, `${k.id} revoked at ${k.revokedAt}`);
    }
    case 'demo': {
      await migrate(pool, USAGE_SCHEMA, migrations);
      const result: Record<string, { accountId: string; apiKey: string }> = {};
      for (const tier of ['free', 'pro']) {
        const a = await accounts.createAccount({ name: `Demo ${tier}`, tier });
        const { apiKey } = await accounts.createKey(a.id);
        result[tier] = { accountId: a.id, apiKey };
      }
      return out(
        result,
        Object.entries(result)
          .map(([t, v]) => `${t.padEnd(5)} ${v.apiKey}  (${v.accountId})`)
          .join('\n'),
      );
    }
    default:
      throw new AppError('VALIDATION_ERROR', `unknown command: ${positionals.join(' ') || '(none)'}`);
  }
}

try {
  await run();
} catch (err) {
  const message = err instanceof AppError ? err.message : `failed: ${(err as Error).message}`;
  process.stderr.write(values.json ? `${JSON.stringify({ error: message })}\n` : `usage-cli: ${message}\n`);
  process.exitCode = 1;
} finally {
  await pool.end();
}
