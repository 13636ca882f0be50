/**
 * The facility's command-line tool: `run(argv, io)` parses the command line and dispatches to the
 * command modules in cli/. Exit codes: 0 done, 1 failure or usage error (message and usage text on
 * stderr), 2 some rows or files rejected (import, seed, sync-echo).
 */
import { type CliIo, CliUsageError, ConfigError, EXIT_FAILURE, errMessage, runCliIfMain } from '@fcd/service-kit';
import { type Args, parseFacilityArgs } from './cli/args';
import { cmdImport, cmdMigrate } from './cli/import';
import { cmdSeed } from './cli/seed';
import { cmdSimulate } from './cli/simulate';
import { cmdSyncEcho } from './cli/sync-echo';

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

function dispatch(args: Args, io: CliIo): Promise<number> {
  const command = args.positional[0];
  switch (command) {
    case 'migrate':
      return cmdMigrate(io);
    case 'import':
      return cmdImport(args, io);
    case 'seed':
      return cmdSeed(args, io);
    case 'simulate':
      return cmdSimulate(args, io);
    case 'sync-echo':
      return cmdSyncEcho(args, io);
    default:
      throw new CliUsageError(command ? `unknown command: ${command}` : 'no command given');
  }
}

export async function run(argv: string[], io: CliIo): Promise<number> {
  try {
    return await dispatch(parseFacilityArgs(argv), io);
  } catch (err) {
    if (err instanceof CliUsageError) io.stderr.write(`facility: ${err.message}\n\n${USAGE}\n`);
    else if (err instanceof ConfigError) io.stderr.write(`facility: ${err.message}\n`);
    else io.stderr.write(`facility: ${errMessage(err)}\n`);
    return EXIT_FAILURE;
  }
}

runCliIfMain(import.meta.url, 'facility', run);
