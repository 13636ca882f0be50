import { type CliIo, CliUsageError, EXIT_OK, EXIT_PARTIAL, migrate, systemClock, uuidSource } from '@fcd/service-kit';
import { UNITS, type UnitName } from '../echo/files';
import { type EchoSource, openSource } from '../echo/source';
import { exitCodeOf, syncEcho } from '../echo/sync';
import { SCHEMA } from '../store/db';
import { migrations } from '../store/migrations';
import type { Args } from './args';
import { openContext, retryForMs, retrying } from './context';
import { printSyncSummary } from './report';
import { syncLock } from './sync-lock';

const UNIT_ALIASES: Record<string, UnitName[]> = { violations: ['icis-air', 'rcra', 'npdes'] };

function onlyUnits(value: string | undefined): Set<UnitName> | undefined {
  if (value === undefined) return undefined;
  const out = new Set<UnitName>();
  for (const name of value.split(',').map((s) => s.trim())) {
    const units = UNIT_ALIASES[name] ?? (UNITS.includes(name as UnitName) ? [name as UnitName] : undefined);
    if (!units) throw new CliUsageError(`--only takes ${[...UNITS, 'violations'].join(', ')}; got '${name}'`);
    for (const u of units) out.add(u);
  }
  return out;
}

/** `sync-echo --from SOURCE`: exit 0 all applied, 2 some rows or files rejected (0 with --rejected-rows-ok), 1 failure. */
export async function cmdSyncEcho(args: Args, io: CliIo): Promise<number> {
  const from = args.flag('from');
  if (!from) throw new CliUsageError('sync-echo needs --from <folder | file.zip | http(s) URL>');
  const only = onlyUnits(args.flag('only'));
  const retryFor = retryForMs(args, io);
  const { pool, logger, config } = openContext(io, 3_600_000);
  const retry = retrying(retryFor, logger);
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
      dryRun: args.has('dry-run'),
      emitEvents: args.has('emit-events'),
      ...(only ? { only } : {}),
    });
    printSyncSummary(io, summary, args.has('json'));
    const code = exitCodeOf(summary);
    // Real downloads always carry some bad rows: a scheduled sync can count them as success.
    return code === EXIT_PARTIAL && args.has('rejected-rows-ok') ? EXIT_OK : code;
  } finally {
    source?.close();
    await lock.release();
    await pool.end();
  }
}
