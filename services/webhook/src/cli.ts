/**
 * Operator commands of the webhook service. Talk to Postgres through DATABASE_URL.
 *
 *   webhook-cli migrate
 *       applies the `webhook` schema migrations and exits (the Helm migration
 *       Job; the service also applies them at start-up, under an advisory
 *       lock, so either order is safe)
 *   webhook-cli deactivate-account --account ID [--reason REASON] [--json]
 *       deactivates every active subscription of an account and cancels its
 *       pending deliveries (after a downgrade below Pro: docs/webhooks.md,
 *       "Tier changes"); REASON defaults to "tier_downgraded"
 */
import {
  type CliIo,
  CliUsageError,
  ConfigError,
  createLogger,
  createPool,
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  migrate,
  parseCliArgs,
  parseConfig,
  postgresOptions,
  runCliIfMain,
} from '@fcd/service-kit';
import { deactivateAccountSubscriptions, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { Type } from '@sinclair/typebox';
import { WebhookConfigSchema } from './config';

const USAGE = 'usage: webhook-cli migrate\n       webhook-cli deactivate-account --account ID [--reason REASON] [--json]\n';
/** Reasons are shown to clients in `deactivation_reason`: a short snake_case word. */
const REASON = /^[a-z][a-z0-9_]{0,63}$/;

const OPTIONS = {
  account: { type: 'string' },
  reason: { type: 'string', default: 'tier_downgraded' },
  json: { type: 'boolean', default: false },
} as const;

const CliConfigSchema = Type.Pick(WebhookConfigSchema, [
  'DATABASE_URL',
  'LOG_LEVEL',
  'DATABASE_PASSWORD',
  'DATABASE_SSLMODE',
  'DATABASE_SSL_CA_FILE',
  'DATABASE_POOL_MODE',
]);

/** The command line, checked before anything connects; a CliUsageError when it is wrong. */
function parseCommandLine(argv: string[]) {
  const { positionals, values } = parseCliArgs(argv, OPTIONS);
  const [command] = positionals;
  if (command !== 'migrate' && command !== 'deactivate-account')
    throw new CliUsageError(command ? `unknown command "${command}"` : 'a command is required');
  if (command === 'deactivate-account') {
    if (!values.account) throw new CliUsageError('--account is required');
    if (!REASON.test(values.reason)) throw new CliUsageError('--reason must be snake_case (a-z, 0-9, _), at most 64 characters');
  }
  return { command, values };
}

/**
 * Runs one webhook-cli command: exit 0 done, 1 failed (bad configuration included), 2 usage error
 * (the message and the usage text on stderr).
 */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof CliUsageError)) throw err;
    io.stderr.write(`webhook-cli: ${err.message}\n${USAGE}`);
    return EXIT_USAGE;
  }
  const { command, values } = parsed;
  let config: ReturnType<typeof parseConfig<typeof CliConfigSchema>>;
  try {
    config = parseConfig(CliConfigSchema, io.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(`webhook-cli: ${err.message}\n`);
    return EXIT_FAILURE;
  }
  const logger = createLogger({ service: 'webhook-cli', level: config.LOG_LEVEL, destination: io.stderr as NodeJS.WritableStream });
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    applicationName: 'webhook-cli',
    logger,
    max: 2,
    connection: postgresOptions(config),
  });
  try {
    if (command === 'migrate') {
      const applied = await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations, logger);
      io.stdout.write(`${JSON.stringify({ schema: WEBHOOK_SCHEMA, applied })}\n`);
    } else {
      const account = values.account as string;
      const ids = await deactivateAccountSubscriptions(pool, account, values.reason, Date.now());
      io.stdout.write(
        values.json
          ? `${JSON.stringify({ account_id: account, reason: values.reason, deactivated: ids })}\n`
          : `${ids.length} subscription(s) of ${account} deactivated (${values.reason})${ids.map((id) => `\n${id}`).join('')}\n`,
      );
    }
    return EXIT_OK;
  } finally {
    await pool.end();
  }
}

runCliIfMain(import.meta.url, 'webhook-cli', run);
