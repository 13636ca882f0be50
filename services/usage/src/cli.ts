/**
 * Operator CLI of the usage service (accounts, tiers, API keys). Talks to
 * Postgres through DATABASE_URL. `--json` prints machine-readable output.
 *
 *   usage-cli migrate
 *   usage-cli accounts create --name NAME --tier free|pro|enterprise [--daily-limit N] [--json]
 *   usage-cli accounts list [--json]
 *   usage-cli accounts set-tier --account ID --tier TIER [--daily-limit N] [--json]
 *   usage-cli accounts portal-link --account ID [--base-url URL] [--json]   (a one-time portal sign-in link)
 *   usage-cli keys create --account ID [--name N] [--expires-at T] [--json]   (the key is printed once)
 *   usage-cli keys list --account ID [--json]          (last 4 characters only)
 *   usage-cli keys rename --key KEY_ID --name N [--json]
 *   usage-cli keys revoke --key KEY_ID [--json]
 *   usage-cli keys roll --key KEY_ID --expires-in-seconds N [--json]   (cli/keys.ts; audited, actor operator)
 *   usage-cli keys audit --account ID [--limit N] [--cursor C] [--json]   (the account's audit log, newest first)
 *   usage-cli demo [--json]                            (a demo Free and a demo Pro account, one key each)
 *   usage-cli billing close|statements|verify --period YYYY-MM   (billing/cli.ts)
 */
import {
  AppError,
  type CliIo,
  CliUsageError,
  ConfigError,
  createLogger,
  createPool,
  EXIT_FAILURE,
  EXIT_OK,
  errMessage,
  migrate,
  type Pool,
  PostgresEnv,
  parseCliArgs,
  parseConfig,
  postgresOptions,
  runCliIfMain,
} from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';
import { billingCommand } from './billing/cli';
import { type KeyCommand, keysCommand } from './cli/keys';
import { DEFAULT_KEY_NAME } from './domain/account-keys';
import { OPERATOR } from './domain/audit';
import { portalLinkCommand } from './portal/cli';
import { AccountStore } from './store/accounts';
import { migrations, USAGE_SCHEMA } from './store/migrations';

const OPTIONS = {
  name: { type: 'string' },
  tier: { type: 'string' },
  account: { type: 'string' },
  key: { type: 'string' },
  'daily-limit': { type: 'string' },
  'expires-at': { type: 'string' },
  'expires-in-seconds': { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  'base-url': { type: 'string' },
  period: { type: 'string' },
  format: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

type Values = ReturnType<typeof parseCliArgs<typeof OPTIONS>>['values'];

/** usage.accounts.daily_limit_override is a positive Postgres integer. */
const MAX_DAILY_LIMIT = 2_147_483_647;

/** One command: its parsed options, the account store and where it prints. */
interface Command {
  values: Values;
  pool: Pool;
  accounts: AccountStore;
  io: CliIo;
  out(json: unknown, text: string): void;
}

function need(values: Values, name: 'name' | 'tier' | 'account' | 'key'): string {
  const v = values[name];
  if (!v) throw new AppError('VALIDATION_ERROR', `--${name} is required`);
  return v;
}

function dailyLimit(values: Values): number | undefined {
  const raw = values['daily-limit'];
  if (raw === undefined) return undefined;
  const n = /^[1-9][0-9]*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n <= MAX_DAILY_LIMIT)) throw new AppError('VALIDATION_ERROR', `--daily-limit must be an integer from 1 to ${MAX_DAILY_LIMIT}`);
  return n;
}

async function accountsCommand(action: string | undefined, { values, pool, accounts, out }: Command): Promise<boolean> {
  switch (action) {
    case 'portal-link':
      return portalLinkCommand(values, pool, out);
    case 'create': {
      const a = await accounts.createAccount({ name: need(values, 'name'), tier: need(values, 'tier'), dailyLimit: dailyLimit(values) });
      out(a, `${a.id}\t${a.tier}\t${a.dailyLimit}/day\t${a.name}`);
      return true;
    }
    case 'list': {
      const list = await accounts.listAccounts();
      out(list, list.map((a) => `${a.id}\t${a.tier}\t${a.dailyLimit}/day\t${a.name}`).join('\n'));
      return true;
    }
    case 'set-tier': {
      const a = await accounts.setTier(need(values, 'account'), need(values, 'tier'), dailyLimit(values));
      out(a, `${a.id}\t${a.tier}\t${a.dailyLimit}/day`);
      return true;
    }
    default:
      return false;
  }
}

async function demo({ pool, accounts, out }: Command): Promise<void> {
  await migrate(pool, USAGE_SCHEMA, migrations);
  const result: Record<string, { accountId: string; apiKey: string }> = {};
  for (const tier of ['free', 'pro']) {
    const a = await accounts.createAccount({ name: `Demo ${tier}`, tier });
    const { apiKey } = await accounts.keys.create(a.id, { name: DEFAULT_KEY_NAME, expiresAt: null }, OPERATOR, Date.now());
    result[tier] = { accountId: a.id, apiKey };
  }
  out(
    result,
    Object.entries(result)
      .map(([t, v]) => `${t.padEnd(5)} ${v.apiKey}  (${v.accountId})`)
      .join('\n'),
  );
}

function keyCommand({ values, accounts, io, out }: Command): KeyCommand {
  return { option: (name) => values[name], accounts, env: io.env, out, warn: (text) => void io.stderr.write(`usage-cli: ${text}\n`) };
}

async function dispatch(positionals: string[], command: Command): Promise<void> {
  const [group, action] = positionals;
  if (group === 'migrate' && action === undefined) {
    const applied = await migrate(command.pool, USAGE_SCHEMA, migrations);
    return command.out({ applied }, applied.length ? `applied: ${applied.join(', ')}` : 'up to date');
  }
  if (group === 'demo' && action === undefined) return demo(command);
  if (group === 'accounts' && (await accountsCommand(action, command))) return;
  if (group === 'keys' && (await keysCommand(action, keyCommand(command)))) return;
  if (group === 'billing' && (await billingCommand(action, command))) return;
  throw new AppError('VALIDATION_ERROR', `unknown command: ${positionals.join(' ') || '(none)'}`);
}

function openPool(io: CliIo, databaseUrl: string): Pool {
  const logger = createLogger({ service: 'usage-cli', level: 'warn', destination: io.stderr as NodeJS.WritableStream });
  const pgEnv = parseConfig(Type.Object(PostgresEnv), io.env);
  return createPool({ connectionString: databaseUrl, applicationName: 'usage-cli', logger, max: 2, connection: postgresOptions(pgEnv) });
}

/**
 * Runs one usage-cli command. Every error is one line on stderr (JSON with --json) and exit code 1,
 * argument errors included.
 */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let json = argv.includes('--json');
  const fail = (message: string): number => {
    io.stderr.write(json ? `${JSON.stringify({ error: message })}\n` : `usage-cli: ${message}\n`);
    return EXIT_FAILURE;
  };
  let parsed: ReturnType<typeof parseCliArgs<typeof OPTIONS>>;
  try {
    parsed = parseCliArgs(argv, OPTIONS);
  } catch (err) {
    // An unknown option or an option without its value: a one-line error, not a stack trace.
    if (err instanceof CliUsageError) return fail(err.message);
    throw err;
  }
  const { positionals, values } = parsed;
  json = values.json;
  const databaseUrl = io.env.DATABASE_URL;
  if (!databaseUrl) return fail('DATABASE_URL is required');
  let pool: Pool;
  try {
    pool = openPool(io, databaseUrl);
  } catch (err) {
    return fail(err instanceof ConfigError ? err.message : String(err));
  }
  const out = (doc: unknown, text: string): void => void io.stdout.write(json ? `${JSON.stringify(doc)}\n` : `${text}\n`);
  try {
    await dispatch(positionals, { values, pool, accounts: new AccountStore(pool), io, out });
    return EXIT_OK;
  } catch (err) {
    return fail(err instanceof AppError ? err.message : `failed: ${errMessage(err)}`);
  } finally {
    await pool.end();
  }
}

runCliIfMain(import.meta.url, 'usage-cli', run);
