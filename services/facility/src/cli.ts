import { createReadStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ConfigError,
  createLogger,
  createPool,
  isDatabaseUnavailable,
  type Logger,
  migrate,
  type Pool,
  parseConfig,
  parseDurationMs,
  postgresOptions,
  RetryExhaustedError,
  systemClock,
  uuidSource,
  withRetry,
} from '@fcd/service-kit';
import pg from 'pg';
import { type CliConfig, CliConfigSchema } from './config';
import { DEFAULT_AS_OF, generateDemoData } from './demo/demo-data';
import { runSimulation } from './demo/simulate';
import { FIELDS, isCalendarDate, RECORD_KINDS, type RecordKind } from './domain/records';
import { formatOfPath, rowsOf, type SourceRow } from './domain/row-source';
import { UNITS, type UnitName } from './echo/files';
import { type EchoSource, openSource } from './echo/source';
import { exitCodeOf, type SyncSummary, syncEcho } from './echo/sync';
import { SCHEMA, schemaPoolTarget } from './store/db';
import { emptyReport, Ingestion, type IngestReport } from './store/ingestion';
import { migrations } from './store/migrations';

const USAGE = `usage: node dist/cli.js <command> [options]

  migrate                                   apply the facility schema migrations
  import <file.ndjson|file.csv> --kind facilities|violations|cases [--json]
                                            import a file (idempotent on natural keys);
                                            exit 0 all rows good, 2 some rows rejected, 1 failure
  seed --facilities N --seed S [--as-of YYYY-MM-DD] [--out DIR [--format ndjson|csv]] [--json]
                                            deterministic demo data: into the database, or
                                            written as import files to DIR
  simulate --rate R[/s] [--duration SECONDS] [--seed S] [--json]
                                            keep producing violations and case/status changes
  sync-echo --from <folder | file.zip | http(s) URL>[,…] [--only UNITS] [--dry-run] [--emit-events]
            [--rejected-rows-ok] [--json]
                                            load EPA ECHO bulk downloads and sync them (docs/echo.md);
                                            UNITS: comma list of links, facilities, violations
                                            (or icis-air, rcra, npdes), cases; exit 0 all applied,
                                            2 some rows or files rejected (0 with --rejected-rows-ok),
                                            1 failure (incl. another sync running)

  import, seed, simulate and sync-echo take --retry-for DURATION (default 60s, or CLI_RETRY_FOR): a lost
  Postgres connection is retried with backoff that long (0 = never), then the command fails

environment: DATABASE_URL (required except for seed --out), LOG_LEVEL (default warn), CLI_RETRY_FOR`;

class UsageError extends Error {}

interface Args {
  positional: string[];
  flags: Map<string, string | true>;
}

const BOOLEAN_FLAGS = new Set(['json', 'dry-run', 'emit-events', 'rejected-rows-ok']);

function parseArgs(argv: string[]): Args {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a.startsWith('--')) {
      const [name, inline] = a.slice(2).split('=', 2) as [string, string | undefined];
      const next = argv[i + 1];
      if (inline !== undefined) flags.set(name, inline);
      else if (next !== undefined && !next.startsWith('--') && !BOOLEAN_FLAGS.has(name)) {
        flags.set(name, next);
        i++;
      } else flags.set(name, true);
    } else positional.push(a);
  }
  return { positional, flags };
}

function flag(args: Args, name: string): string | undefined {
  const v = args.flags.get(name);
  if (v === true) throw new UsageError(`--${name} needs a value`);
  return v;
}

function positiveInt(value: string | undefined, name: string): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

function kindOf(value: string | undefined): RecordKind {
  if (!value || !RECORD_KINDS.includes(value as RecordKind)) throw new UsageError(`--kind must be one of ${RECORD_KINDS.join(', ')}`);
  return value as RecordKind;
}

function context(queryTimeoutMs?: number): { pool: Pool; logger: Logger; config: CliConfig } {
  const config = parseConfig(CliConfigSchema);
  const logger = createLogger({ service: 'facility-cli', level: config.LOG_LEVEL, destination: process.stderr });
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

type Retry = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * Runs a step again while Postgres is unreachable (refused, timed out, terminated), with backoff,
 * for --retry-for (or CLI_RETRY_FOR, default 60s); then one clear error. Steps must be idempotent.
 */
function retrying(args: Args, logger: Logger): Retry {
  const text = flag(args, 'retry-for') ?? process.env.CLI_RETRY_FOR ?? '60s';
  const retryForMs = parseDurationMs(text);
  if (retryForMs === undefined) throw new UsageError('--retry-for must be a duration, e.g. 60s, 2m or 500ms');
  return (fn) =>
    withRetry(fn, {
      retryForMs,
      isRetryable: isDatabaseUnavailable,
      onRetry: ({ err, attempt, delayMs }) =>
        logger.warn({ attempt, delayMs, err: { message: (err as Error).message } }, 'postgres unavailable; retrying'),
    }).catch((err: unknown) => {
      throw err instanceof RetryExhaustedError ? new Error(`Postgres unreachable: ${err.message}`) : err;
    });
}

function ingestionFor(pool: Pool): Ingestion {
  return new Ingestion({ pool, clock: systemClock, ids: uuidSource });
}

function printReport(report: IngestReport, json: boolean, extra: Record<string, unknown> = {}): void {
  if (json) {
    process.stdout.write(`${JSON.stringify({ ...extra, ...report })}\n`);
    return;
  }
  for (const [k, v] of Object.entries(extra)) process.stdout.write(`${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}\n`);
  for (const kind of RECORD_KINDS) {
    const c = report.counts[kind];
    if (c.received === 0) continue;
    process.stdout.write(
      `${kind}: ${c.received} rows: ${c.inserted} inserted, ${c.updated} updated, ${c.unchanged} unchanged, ${c.rejected} rejected\n`,
    );
  }
  const evts = Object.entries(report.events).filter(([, n]) => n > 0);
  process.stdout.write(`events: ${evts.length === 0 ? 'none' : evts.map(([t, n]) => `${t} ${n}`).join(', ')}\n`);
  for (const e of report.errors) {
    const where = e.line !== undefined ? `line ${e.line}` : `row ${e.index}`;
    process.stdout.write(`error: ${where}: ${e.field}: ${e.message}\n`);
  }
  if (report.errors_truncated) process.stdout.write('error: (more errors not shown)\n');
}

async function cmdMigrate(): Promise<number> {
  const { pool, logger } = context();
  try {
    const applied = await migrate(pool, SCHEMA, migrations, logger);
    process.stdout.write(`${JSON.stringify({ applied })}\n`);
    return 0;
  } finally {
    await pool.end();
  }
}

async function cmdImport(args: Args): Promise<number> {
  const file = args.positional[1];
  if (!file) throw new UsageError('import needs a file');
  const kind = kindOf(flag(args, 'kind'));
  const format = formatOfPath(file);
  if (!format) throw new UsageError('the file must end in .ndjson, .jsonl or .csv');
  if (!existsSync(file)) throw new UsageError(`no such file: ${file}`);
  const { pool, logger } = context();
  const retry = retrying(args, logger);
  try {
    await retry(() => migrate(pool, SCHEMA, migrations));
    const started = performance.now();
    // A re-run after a lost connection reads the file again: the import is idempotent on natural keys.
    const report = await retry(() => ingestionFor(pool).ingestStream(kind, rowsOf(format, createReadStream(file), kind)));
    const seconds = Math.round(performance.now() - started) / 1000;
    printReport(report, args.flags.has('json'), { file, kind, seconds });
    return report.counts[kind].rejected > 0 ? 2 : 0;
  } finally {
    await pool.end();
  }
}

async function* fromArray(rows: object[]): AsyncGenerator<SourceRow> {
  let line = 0;
  for (const raw of rows) yield { line: ++line, raw: { ...raw } };
}

function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = Array.isArray(v) ? v.join(';') : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

async function cmdSeed(args: Args): Promise<number> {
  const facilities = positiveInt(flag(args, 'facilities'), 'facilities');
  const seed = flag(args, 'seed') ?? '1';
  const asOf = flag(args, 'as-of') ?? DEFAULT_AS_OF;
  if (!isCalendarDate(asOf)) throw new UsageError('--as-of must be a date YYYY-MM-DD');
  const data = generateDemoData({ facilities, seed, asOf });
  const out = flag(args, 'out');
  if (out) {
    const format = flag(args, 'format') ?? 'ndjson';
    if (format !== 'ndjson' && format !== 'csv') throw new UsageError('--format must be ndjson or csv');
    mkdirSync(out, { recursive: true });
    const files: Record<string, string> = {};
    for (const kind of RECORD_KINDS) {
      const rows = data[kind] as object[];
      const path = join(out, `${kind}.${format}`);
      const text =
        format === 'ndjson'
          ? rows.map((r) => JSON.stringify(r)).join('\n')
          : [
              FIELDS[kind].join(','),
              ...rows.map((r) => FIELDS[kind].map((f) => csvCell((r as Record<string, unknown>)[f])).join(',')),
            ].join('\n');
      writeFileSync(path, `${text}\n`);
      files[kind] = path;
    }
    const summary = { seed, asOf, files, facilities: data.facilities.length, violations: data.violations.length, cases: data.cases.length };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  }
  const { pool, logger } = context();
  const retry = retrying(args, logger);
  try {
    await retry(() => migrate(pool, SCHEMA, migrations));
    const ingestion = ingestionFor(pool);
    const report = emptyReport();
    for (const kind of RECORD_KINDS) {
      const r = await retry(() => ingestion.ingestStream(kind, fromArray(data[kind] as object[])));
      report.counts[kind] = r.counts[kind];
      for (const [t, n] of Object.entries(r.events)) report.events[t as keyof IngestReport['events']] += n;
      report.errors.push(...r.errors);
    }
    printReport(report, args.flags.has('json'), { seed, asOf });
    return report.errors.length > 0 ? 2 : 0;
  } finally {
    await pool.end();
  }
}

async function cmdSimulate(args: Args): Promise<number> {
  const rateText = flag(args, 'rate');
  const rate = Number(rateText?.replace(/\/s$/, ''));
  if (!rateText || !Number.isFinite(rate) || rate <= 0 || rate > 10_000)
    throw new UsageError('--rate must be a number of changes per second, e.g. 2/s');
  const durationText = flag(args, 'duration');
  const duration = durationText === undefined ? undefined : Number(durationText);
  if (duration !== undefined && (!Number.isFinite(duration) || duration <= 0))
    throw new UsageError('--duration must be a number of seconds');
  const seed = flag(args, 'seed');
  const { pool, logger } = context();
  const retry = retrying(args, logger);
  const abort = new AbortController();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => abort.abort());
  try {
    await retry(() => migrate(pool, SCHEMA, migrations));
    const summary = await runSimulation({
      pool,
      retry,
      ingestion: ingestionFor(pool),
      clock: systemClock,
      logger,
      rate,
      signal: abort.signal,
      ...(duration !== undefined ? { durationMs: duration * 1000 } : {}),
      ...(seed !== undefined ? { seed } : {}),
    });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return 0;
  } finally {
    await pool.end();
  }
}

const UNIT_ALIASES: Record<string, UnitName[]> = { violations: ['icis-air', 'rcra', 'npdes'] };

function onlyUnits(value: string | undefined): Set<UnitName> | undefined {
  if (value === undefined) return undefined;
  const out = new Set<UnitName>();
  for (const name of value.split(',').map((s) => s.trim())) {
    const units = UNIT_ALIASES[name] ?? (UNITS.includes(name as UnitName) ? [name as UnitName] : undefined);
    if (!units) throw new UsageError(`--only takes ${[...UNITS, 'violations'].join(', ')}; got '${name}'`);
    for (const u of units) out.add(u);
  }
  return out;
}

function printSyncSummary(s: SyncSummary, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(s)}\n`);
    return;
  }
  const out: string[] = [];
  out.push(`source: ${s.source}${s.dry_run ? ' (dry run: nothing written)' : ''}`);
  if (s.initial_load) out.push(`first load into an empty database: events ${s.events_emitted ? 'emitted (--emit-events)' : 'not emitted'}`);
  for (const f of s.files) {
    if (f.error) out.push(`${f.origin}: refused: ${f.error}`);
    else
      out.push(
        `${f.origin}: ${f.read} read, ${f.inserted} inserted, ${f.changed} changed, ${f.unchanged} unchanged, ${f.rejected} rejected, ${f.missing} missing, ${f.events} events`,
      );
  }
  for (const i of s.ignored) out.push(`ignored: ${i}`);
  for (const e of s.errors) out.push(`error: ${e.origin}:${e.line}: ${e.reason}`);
  if (s.errors_truncated) out.push('error: (more errors not shown)');
  out.push(`seconds: ${s.seconds}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

/**
 * The one-sync-at-a-time lock: a transaction-scoped advisory lock in a transaction kept open on a
 * connection of its own (so it also holds through PgBouncer in transaction pooling mode, where a
 * session lock would stay on whichever server connection the pooler picked), re-taken after it is
 * lost. The transaction reads and writes nothing, so it holds back no vacuum.
 */
function syncLock(config: CliConfig, logger: Logger): { ensure(): Promise<void>; release(): Promise<void> } {
  let held: pg.Client | undefined;
  let lost = false;
  return {
    async ensure() {
      if (held && !lost) return;
      held?.end().catch(() => undefined);
      held = undefined;
      const { poolMode: _, ...connection } = postgresOptions(config);
      const client = new pg.Client({
        connectionString: config.DATABASE_URL,
        application_name: 'facility-sync-echo-lock',
        connectionTimeoutMillis: 5000,
        ...connection,
      });
      client.on('error', (err) => {
        lost = true;
        logger.warn({ err: { message: err.message } }, 'sync lock connection lost');
      });
      client.on('end', () => {
        lost = true;
      });
      await client.connect();
      // Idle in this transaction for the whole sync: a server-wide idle_in_transaction_session_timeout must not end it.
      await client.query('BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0');
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [SYNC_LOCK_KEY]);
      if (!rows[0]?.ok) {
        await client.end().catch(() => undefined);
        throw new SyncBusyError('another ECHO sync is running (its lock is held); this one changed nothing');
      }
      held = client;
      lost = false;
    },
    async release() {
      await held?.query('ROLLBACK').catch(() => undefined);
      await held?.end().catch(() => undefined);
      held = undefined;
    },
  };
}

const SYNC_LOCK_KEY = 'facility:echo-sync';
class SyncBusyError extends Error {}

async function cmdSyncEcho(args: Args): Promise<number> {
  const from = flag(args, 'from');
  if (!from) throw new UsageError('sync-echo needs --from <folder | file.zip | http(s) URL>');
  const only = onlyUnits(flag(args, 'only'));
  const { pool, logger, config } = context(3_600_000);
  const retry = retrying(args, logger);
  const lock = syncLock(config, logger);
  let source: EchoSource | undefined;
  try {
    source = await openSource(from);
    await retry(() => migrate(pool, SCHEMA, migrations));
    const summary = await syncEcho({
      pool,
      clock: systemClock,
      ids: uuidSource,
      logger,
      retry,
      ensureLock: () => lock.ensure(),
      source,
      sourceName: from,
      dryRun: args.flags.has('dry-run'),
      emitEvents: args.flags.has('emit-events'),
      ...(only ? { only } : {}),
    });
    printSyncSummary(summary, args.flags.has('json'));
    const code = exitCodeOf(summary);
    // Real downloads always carry some bad rows: a scheduled sync can count them as success.
    return code === 2 && args.flags.has('rejected-rows-ok') ? 0 : code;
  } finally {
    source?.close();
    await lock.release();
    await pool.end();
  }
}

async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  const command = args.positional[0];
  switch (command) {
    case 'migrate':
      return cmdMigrate();
    case 'import':
      return cmdImport(args);
    case 'seed':
      return cmdSeed(args);
    case 'simulate':
      return cmdSimulate(args);
    case 'sync-echo':
      return cmdSyncEcho(args);
    default:
      throw new UsageError(command ? `unknown command: ${command}` : 'no command given');
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) process.stderr.write(`facility: ${err.message}\n\n${USAGE}\n`);
    else if (err instanceof ConfigError) process.stderr.write(`facility: ${err.message}\n`);
    else process.stderr.write(`facility: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
