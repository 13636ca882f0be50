import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CliIo, CliUsageError, EXIT_OK, EXIT_PARTIAL, migrate } from '@fcd/service-kit';
import { DEFAULT_AS_OF, type DemoData, generateDemoData } from '../demo/demo-data';
import { FIELDS, isCalendarDate, RECORD_KINDS } from '../domain/records';
import type { SourceRow } from '../domain/row-source';
import { SCHEMA } from '../store/db';
import { emptyReport, type IngestReport } from '../store/ingestion';
import { migrations } from '../store/migrations';
import { type Args, positiveInt } from './args';
import { ingestionFor, openContext, retryForMs, retrying } from './context';
import { printReport } from './report';

async function* fromArray(rows: object[]): AsyncGenerator<SourceRow> {
  let line = 0;
  for (const raw of rows) yield { line: ++line, raw: { ...raw } };
}

function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = Array.isArray(v) ? v.join(';') : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** `seed --out DIR`: the demo data as import files, one per kind. */
function writeFiles(io: CliIo, data: DemoData, out: string, format: string, summary: { seed: string; asOf: string }): number {
  mkdirSync(out, { recursive: true });
  const files: Record<string, string> = {};
  for (const kind of RECORD_KINDS) {
    const rows = data[kind] as object[];
    const path = join(out, `${kind}.${format}`);
    const text =
      format === 'ndjson'
        ? rows.map((r) => JSON.stringify(r)).join('\n')
        : [FIELDS[kind].join(','), ...rows.map((r) => FIELDS[kind].map((f) => csvCell((r as Record<string, unknown>)[f])).join(','))].join(
            '\n',
          );
    writeFileSync(path, `${text}\n`);
    files[kind] = path;
  }
  const counts = { facilities: data.facilities.length, violations: data.violations.length, cases: data.cases.length };
  io.stdout.write(`${JSON.stringify({ ...summary, files, ...counts })}\n`);
  return EXIT_OK;
}

/** `seed`: deterministic demo data into the database (exit 2 when rows were rejected) or, with --out, into files. */
export async function cmdSeed(args: Args, io: CliIo): Promise<number> {
  const facilities = positiveInt(args.flag('facilities'), 'facilities');
  const seed = args.flag('seed') ?? '1';
  const asOf = args.flag('as-of') ?? DEFAULT_AS_OF;
  if (!isCalendarDate(asOf)) throw new CliUsageError('--as-of must be a date YYYY-MM-DD');
  const data = generateDemoData({ facilities, seed, asOf });
  const out = args.flag('out');
  if (out) {
    const format = args.flag('format') ?? 'ndjson';
    if (format !== 'ndjson' && format !== 'csv') throw new CliUsageError('--format must be ndjson or csv');
    return writeFiles(io, data, out, format, { seed, asOf });
  }
  const retryFor = retryForMs(args, io);
  const { pool, logger } = openContext(io);
  const retry = retrying(retryFor, logger);
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
    printReport(io, report, args.has('json'), { seed, asOf });
    return report.errors.length > 0 ? EXIT_PARTIAL : EXIT_OK;
  } finally {
    await pool.end();
  }
}
