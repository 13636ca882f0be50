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
import { parseArgs } from 'node:util';
import { createLogger, createPool, loadConfigOrExit, migrate, postgresOptions } from '@fcd/service-kit';
import { deactivateAccountSubscriptions, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { Type } from '@sinclair/typebox';
import { ConfigSchema } from './config';

const USAGE = 'usage: webhook-cli migrate\n       webhook-cli deactivate-account --account ID [--reason REASON] [--json]\n';
/** Reasons are shown to clients in `deactivation_reason`: a short snake_case word. */
const REASON = /^[a-z][a-z0-9_]{0,63}$/;

function fail(message: string): never {
  process.stderr.write(`webhook-cli: ${message}\n${USAGE}`);
  process.exit(2);
}

let parsed: ReturnType<typeof parse>;
function parse() {
  return parseArgs({
    allowPositionals: true,
    options: {
      account: { type: 'string' },
      reason: { type: 'string', default: 'tier_downgraded' },
      json: { type: 'boolean', default: false },
    },
  });
}
try {
  parsed = parse();
} catch (err) {
  fail((err as Error).message);
}
const { positionals, values } = parsed;
const [command] = positionals;
if (command !== 'migrate' && command !== 'deactivate-account') fail(command ? `unknown command "${command}"` : 'a command is required');
if (command === 'deactivate-account') {
  if (!values.account) fail('--account is required');
  if (!REASON.test(values.reason)) fail('--reason must be snake_case (a-z, 0-9, _), at most 64 characters');
}

const config = loadConfigOrExit(
  'webhook-cli',
  Type.Pick(ConfigSchema, [
    'DATABASE_URL',
    'LOG_LEVEL',
    'DATABASE_PASSWORD',
    'DATABASE_SSLMODE',
    'DATABASE_SSL_CA_FILE',
    'DATABASE_POOL_MODE',
  ]),
);
const logger = createLogger({ service: 'webhook-cli', level: config.LOG_LEVEL, destination: process.stderr });
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
    process.stdout.write(`${JSON.stringify({ schema: WEBHOOK_SCHEMA, applied })}\n`);
  } else {
    const account = values.account as string;
    const ids = await deactivateAccountSubscriptions(pool, account, values.reason, Date.now());
    process.stdout.write(
      values.json
        ? `${JSON.stringify({ account_id: account, reason: values.reason, deactivated: ids })}\n`
        : `${ids.length} subscription(s) of ${account} deactivated (${values.reason})${ids.map((id) => `\n${id}`).join('')}\n`,
    );
  }
} finally {
  await pool.end();
}
