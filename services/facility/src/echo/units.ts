import type { Logger, PoolClient } from '@fcd/service-kit';
import { isoTimestamp } from '@fcd/service-kit';
import { lockIngestion, writeOutbox } from '../store/ingest';
import { applyCases, applyFacilities, applyLinks, applyViolations } from './apply';
import { FILE_SPECS, type FileSpec, type UnitName } from './files';
import type { EchoFileName } from './layouts';
import type { KeyRebuilds } from './rebuild';
import type { EchoSource, SourceEntry } from './source';
import { recordSources } from './sources';
import type { SyncOptions } from './sync-types';
import { type UnitResult, UnitRun } from './unit-run';

const SPEC_BY_FILE = new Map(FILE_SPECS.map((s) => [s.file, s]));

/** The files of one unit in a download, those skipped, and why the unit is refused (if it is). */
export function unitFiles(unit: UnitName, source: EchoSource): { entries: SourceEntry[]; skipped: SourceEntry[]; refusal?: string } {
  const present = FILE_SPECS.filter((s) => s.unit === unit && source.entries.has(s.file)).map(
    (s) => source.entries.get(s.file) as SourceEntry,
  );
  const has = (f: EchoFileName) => present.some((e) => e.file === f);
  if (unit === 'facilities' && has('ECHO_EXPORTER.csv') && has('FRS_FACILITIES.csv')) {
    // The Exporter carries the compliance status; FRS_FACILITIES would only repeat its facilities.
    return {
      entries: present.filter((e) => e.file !== 'FRS_FACILITIES.csv'),
      skipped: present.filter((e) => e.file === 'FRS_FACILITIES.csv'),
    };
  }
  if (unit === 'cases' && present.length > 0 && !(has('CASE_ENFORCEMENTS.csv') && has('CASE_FACILITIES.csv'))) {
    const missing = has('CASE_ENFORCEMENTS.csv') ? 'CASE_FACILITIES.csv' : 'CASE_ENFORCEMENTS.csv';
    return { entries: present, skipped: [], refusal: `cases need ${missing} in the same download (a case must name its facilities)` };
  }
  return { entries: present, skipped: [] };
}

/**
 * The served table a unit's bulk insert fills (links write only their own table). On a first
 * load, the units filling these tables share one transaction, so their keys and indexes are
 * dropped and rebuilt once (rebuild.ts, sync.ts `transactions`), not once per unit.
 */
export const UNIT_TABLE: Record<UnitName, string | undefined> = {
  links: undefined,
  facilities: 'facilities',
  'icis-air': 'violations',
  rcra: 'violations',
  npdes: 'violations',
  cases: undefined,
};

const VIOLATION_UNITS: Partial<Record<UnitName, { file: EchoFileName; prefix: string; system: string; idColumn: string }>> = {
  'icis-air': { file: 'ICIS-AIR_VIOLATION_HISTORY.csv', prefix: 'ICIS-AIR:', system: 'AIR', idColumn: 'PGM_SYS_ID' },
  rcra: { file: 'RCRA_VIOLATIONS.csv', prefix: 'RCRA:', system: 'RCRAINFO', idColumn: 'ID_NUMBER' },
  npdes: { file: 'NPDES_SE_VIOLATIONS.csv', prefix: 'NPDES:', system: 'NPDES', idColumn: 'NPDES_ID' },
};

/** The client with each statement's duration logged (debug level: where a sync spends its time). */
export function timedClient(client: PoolClient, log: Logger, unit: UnitName | 'keys'): PoolClient {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver);
      return (...args: unknown[]) => {
        const started = performance.now();
        const result = query(...args);
        if (result instanceof Promise) {
          const first = args[0] as string | { text?: string };
          const sql = (typeof first === 'string' ? first : (first?.text ?? '')).replace(/\s+/g, ' ').slice(0, 120);
          result.then(
            () => log.debug({ unit, ms: Math.round(performance.now() - started), sql }, 'echo sync: statement'),
            () => undefined,
          );
        }
        return result;
      };
    },
  });
}

/** One unit on a client in a transaction: stage its files, diff, write the outbox rows of its events. */
export async function applyUnit(
  client: PoolClient,
  unit: UnitName,
  entries: SourceEntry[],
  opts: SyncOptions,
  emit: boolean,
  keys: KeyRebuilds | undefined,
): Promise<UnitResult> {
  // Serialises with the ingestion API and the import/simulate CLIs (they take the same lock).
  await lockIngestion(client);
  const log = opts.logger;
  const debug = log.isLevelEnabled('debug');
  const run = new UnitRun(debug ? timedClient(client, log, unit) : client, opts, isoTimestamp(opts.clock.now()), emit, keys);
  for (const entry of entries) {
    const started = performance.now();
    await run.stage(entry, SPEC_BY_FILE.get(entry.file) as FileSpec);
    if (debug) log.debug({ unit, file: entry.file, ms: Math.round(performance.now() - started) }, 'echo sync: file staged');
  }
  await client.query("SET LOCAL work_mem = '64MB'");
  if (unit === 'links') for (const e of entries) await applyLinks(run, e.file);
  else if (unit === 'facilities') await applyFacilities(run, (entries[0] as SourceEntry).file);
  else if (unit === 'cases') await applyCases(run);
  else {
    const v = VIOLATION_UNITS[unit] as NonNullable<(typeof VIOLATION_UNITS)[UnitName]>;
    await applyViolations(run, v.file, v.prefix, v.system, v.idColumn);
  }
  const order = new Map(entries.map((e, i) => [e.origin, i]));
  run.result.errors.sort((a, b) => (order.get(a.origin) ?? 0) - (order.get(b.origin) ?? 0) || a.line - b.line);
  await writeOutbox(client, run.result.events);
  // The files of the unit, recorded on its transaction (GET /v1/sources): listed once committed.
  if (opts.runId !== undefined) await recordSources(client, opts.runId, run.now, entries, run.result.files);
  return run.result;
}
