import { createLogger, createPool, loadConfigOrExit, migrate } from '@fcd/service-kit';
import { WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { Type } from '@sinclair/typebox';
import { ConfigSchema } from './config';

/**
 * Operator commands. `migrate`: applies the `webhook` schema migrations and
 * exits (the Helm migration Job; the service also applies them at start-up,
 * under an advisory lock, so either order is safe).
 */
const [command] = process.argv.slice(2);
if (command !== 'migrate') {
  process.stderr.write('usage: webhook-cli migrate\n');
  process.exit(2);
}
const config = loadConfigOrExit('webhook-cli', Type.Pick(ConfigSchema, ['DATABASE_URL', 'LOG_LEVEL']));
const logger = createLogger({ service: 'webhook-cli', level: config.LOG_LEVEL });
const pool = createPool({ connectionString: config.DATABASE_URL, applicationName: 'webhook-cli', logger });
try {
  const applied = await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations, logger);
  process.stdout.write(`${JSON.stringify({ schema: WEBHOOK_SCHEMA, applied })}\n`);
} finally {
  await pool.end();
}
