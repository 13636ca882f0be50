import { createReadStream, existsSync } from 'node:fs';
import { type CliIo, CliUsageError, EXIT_OK, EXIT_PARTIAL, migrate } from '@fcd/service-kit';
import { formatOfPath, rowsOf } from '../domain/row-source';
import { SCHEMA } from '../store/db';
import { migrations } from '../store/migrations';
import { type Args, kindOf } from './args';
import { ingestionFor, openContext, retryForMs, retrying } from './context';
import { printReport } from './report';

/** `migrate`: applies the facility schema migrations. */
export async function cmdMigrate(io: CliIo): Promise<number> {
  const { pool, logger } = openContext(io);
  try {
    const applied = await migrate(pool, SCHEMA, migrations, logger);
    io.stdout.write(`${JSON.stringify({ applied })}\n`);
    return EXIT_OK;
  } finally {
    await pool.end();
  }
}

/** `import FILE --kind KIND`: exit 0 all rows good, 2 some rejected. */
export async function cmdImport(args: Args, io: CliIo): Promise<number> {
  const file = args.positional[1];
  if (!file) throw new CliUsageError('import needs a file');
  const kind = kindOf(args.flag('kind'));
  const format = formatOfPath(file);
  if (!format) throw new CliUsageError('the file must end in .ndjson, .jsonl or .csv');
  if (!existsSync(file)) throw new CliUsageError(`no such file: ${file}`);
  const retryFor = retryForMs(args, io);
  const { pool, logger } = openContext(io);
  const retry = retrying(retryFor, logger);
  try {
    await retry(() => migrate(pool, SCHEMA, migrations));
    const started = performance.now();
    // A re-run after a lost connection reads the file again: the import is idempotent on natural keys.
    const report = await retry(() => ingestionFor(pool).ingestStream(kind, rowsOf(format, createReadStream(file), kind)));
    const seconds = Math.round(performance.now() - started) / 1000;
    printReport(io, report, args.has('json'), { file, kind, seconds });
    return report.counts[kind].rejected > 0 ? EXIT_PARTIAL : EXIT_OK;
  } finally {
    await pool.end();
  }
}
