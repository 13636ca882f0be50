import {
  type CliIo,
  CliUsageError,
  createLogger,
  createPool,
  errMessage,
  isDatabaseUnavailable,
  type Logger,
  type Pool,
  parseConfig,
  parseDurationMs,
  postgresOptions,
  RetryExhaustedError,
  systemClock,
  uuidSource,
  withRetry,
} from '@fcd/service-kit';
import { type CliConfig, CliConfigSchema } from '../config';
import { schemaPoolTarget } from '../store/db';
import { Ingestion } from '../store/ingestion';
import type { Args } from './args';

/** What a command that talks to Postgres works with. */
export interface CommandContext {
  pool: Pool;
  logger: Logger;
  config: CliConfig;
}

export function openContext(io: CliIo, queryTimeoutMs?: number): CommandContext {
  const config = parseConfig(CliConfigSchema, io.env);
  const logger = createLogger({ service: 'facility-cli', level: config.LOG_LEVEL, destination: io.stderr as NodeJS.WritableStream });
  const connection = postgresOptions(config);
  const pool = createPool({
    ...schemaPoolTarget(config.DATABASE_URL, connection.poolMode),
    max: 4,
    applicationName: 'facility-cli',
    logger,
    connection,
    ...(queryTimeoutMs !== undefined ? { timeouts: { PG_QUERY_TIMEOUT_MS: queryTimeoutMs } } : {}),
  });
  return { pool, logger, config };
}

export type Retry = <T>(fn: () => Promise<T>) => Promise<T>;

/** --retry-for (or CLI_RETRY_FOR, default 60s) in milliseconds; a usage error when it is no duration. */
export function retryForMs(args: Args, io: CliIo): number {
  const text = args.flag('retry-for') ?? io.env.CLI_RETRY_FOR ?? '60s';
  const ms = parseDurationMs(text);
  if (ms === undefined) throw new CliUsageError('--retry-for must be a duration, e.g. 60s, 2m or 500ms');
  return ms;
}

/**
 * Runs a step again while Postgres is unreachable (refused, timed out, terminated), with backoff,
 * for `retryForMs`; then one clear error. Steps must be idempotent.
 */
export function retrying(retryFor: number, logger: Logger): Retry {
  return (fn) =>
    withRetry(fn, {
      retryForMs: retryFor,
      isRetryable: isDatabaseUnavailable,
      onRetry: ({ err, attempt, delayMs }) =>
        logger.warn({ attempt, delayMs, err: { message: errMessage(err) } }, 'postgres unavailable; retrying'),
    }).catch((err: unknown) => {
      throw err instanceof RetryExhaustedError ? new Error(`Postgres unreachable: ${err.message}`) : err;
    });
}

export function ingestionFor(pool: Pool): Ingestion {
  return new Ingestion({ pool, clock: systemClock, ids: uuidSource });
}
