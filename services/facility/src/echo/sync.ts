import { EVENT_TYPES, type EventType } from '@fcd/events';
import { isoTimestamp, type Pool, type PoolClient, withTransaction } from '@fcd/service-kit';
import { FileError } from './csv';
import { UNITS, type UnitName } from './files';
import { KeyRebuilds } from './rebuild';
import type { SourceEntry } from './source';
import { emptySummary, exitCodeOf, type SyncOptions, type SyncSummary } from './sync-types';
import type { UnitResult } from './unit-run';
import { applyUnit, timedClient, UNIT_TABLE, unitFiles } from './units';

export type { SyncSummary } from './sync-types';
export { exitCodeOf } from './sync-types';

/** Thrown inside a dry-run transaction to roll it back with its result. */
class DryRunRollback<T> extends Error {
  constructor(readonly result: T) {
    super('dry run');
  }
}

type Planned = Array<{ unit: UnitName; entries: SourceEntry[] }>;
type Collect = (entries: SourceEntry[], result: UnitResult | FileError) => void;

async function isInitialLoad(pool: Pool): Promise<boolean> {
  const { rows } = await pool.query<{ resumed: boolean | null; empty: boolean }>(
    `SELECT (SELECT initial_load FROM echo_sync_runs WHERE outcome IS DISTINCT FROM 'applied' AND outcome IS DISTINCT FROM 'rows_rejected'
               AND id = (SELECT max(id) FROM echo_sync_runs)) AS resumed,
            NOT EXISTS (SELECT 1 FROM facilities) AND NOT EXISTS (SELECT 1 FROM violations) AND NOT EXISTS (SELECT 1 FROM cases) AS empty`,
  );
  const r = rows[0] as { resumed: boolean | null; empty: boolean };
  // A first load that was killed or failed part-way is still the first load when it is run again.
  return r.resumed === true || r.empty;
}

function newSummary(opts: SyncOptions, dryRun: boolean): SyncSummary {
  return {
    source: opts.sourceName,
    dry_run: dryRun,
    initial_load: false,
    events_emitted: false,
    files: [],
    events: Object.fromEntries(EVENT_TYPES.map((t) => [t, 0])) as Record<EventType, number>,
    errors: [],
    errors_truncated: false,
    ignored: [...opts.source.ignored],
    seconds: 0,
  };
}

/** The run's row in echo_sync_runs, opened before the first unit. */
function openRun(opts: SyncOptions, initialLoad: boolean): Promise<number> {
  return opts.retry(async () => {
    const { rows } = await opts.pool.query<{ id: number }>(
      'INSERT INTO echo_sync_runs (source, initial_load, started_at) VALUES ($1, $2, $3::timestamptz) RETURNING id',
      [opts.sourceName, initialLoad, isoTimestamp(opts.clock.now())],
    );
    return (rows[0] as { id: number }).id;
  });
}

/** Marks the run failed (best effort: the failure itself is what the caller reports). */
async function failRun(opts: SyncOptions, id: number): Promise<void> {
  await opts.pool
    .query(`UPDATE echo_sync_runs SET finished_at = $2::timestamptz, outcome = 'failed' WHERE id = $1`, [
      id,
      isoTimestamp(opts.clock.now()),
    ])
    .catch(() => undefined);
}

async function closeRun(opts: SyncOptions, id: number, summary: SyncSummary): Promise<void> {
  await opts.retry(() =>
    opts.pool.query('UPDATE echo_sync_runs SET finished_at = $2::timestamptz, outcome = $3, summary = $4::jsonb WHERE id = $1', [
      id,
      isoTimestamp(opts.clock.now()),
      exitCodeOf(summary) === 0 ? 'applied' : 'rows_rejected',
      JSON.stringify({ ...summary, errors: undefined }),
    ]),
  );
}

/**
 * A sync of one ECHO download: each unit (links, facilities, one per violation source, cases)
 * in its own transaction, retried whole after a lost Postgres connection. A dry run rolls every
 * unit back and reports what it would have changed.
 */
export async function syncEcho(opts: SyncOptions): Promise<SyncSummary> {
  const started = performance.now();
  const dryRun = opts.dryRun ?? false;
  const summary = newSummary(opts, dryRun);
  await opts.retry(opts.ensureLock);
  summary.initial_load = await opts.retry(() => isInitialLoad(opts.pool));
  const emit = !summary.initial_load || (opts.emitEvents ?? false);
  summary.events_emitted = emit;
  const runId = dryRun ? undefined : await openRun(opts, summary.initial_load);
  let errorCount = 0;
  const collect: Collect = (entries, result) => {
    if (result instanceof FileError) {
      // A bad header or malformed file: the whole unit is refused, nothing of it written.
      const culprit = entries.find((e) => result.message.startsWith(`${e.origin}:`)) ?? entries[0];
      for (const e of entries)
        summary.files.push({ ...emptySummary(e), error: e === culprit ? result.message : `not applied: ${result.message}` });
      return;
    }
    summary.files.push(...result.files);
    for (const ev of result.events) summary.events[ev.type]++;
    for (const p of result.errors) if (summary.errors.length < (opts.maxErrors ?? 1000)) summary.errors.push(p);
    errorCount += result.errorCount;
  };
  try {
    await runUnits(runId === undefined ? opts : { ...opts, runId }, summary, emit, collect);
  } catch (err) {
    if (runId !== undefined) await failRun(opts, runId);
    throw err;
  }
  summary.errors_truncated = errorCount > summary.errors.length;
  summary.seconds = Math.round(performance.now() - started) / 1000;
  if (runId !== undefined) await closeRun(opts, runId, summary);
  return summary;
}

/** Every unit the download has, in order: each applied in its own transaction (see `transactions`), or all planned for one dry run. */
async function runUnits(opts: SyncOptions, summary: SyncSummary, emit: boolean, collect: Collect): Promise<void> {
  const planned: Planned = [];
  for (const unit of UNITS) {
    if (opts.only && !opts.only.has(unit)) continue;
    const { entries, skipped, refusal } = unitFiles(unit, opts.source);
    for (const e of skipped) summary.ignored.push(`${e.origin} (ECHO_EXPORTER.csv supersedes it)`);
    if (entries.length === 0) continue;
    if (refusal) {
      for (const e of entries) summary.files.push({ ...emptySummary(e), error: refusal });
      continue;
    }
    planned.push({ unit, entries });
  }
  if (summary.dry_run) {
    await dryRunAll(planned, opts, emit, summary.initial_load, collect);
    return;
  }
  for (const group of transactions(planned, summary.initial_load)) {
    const results = await opts.retry(async () => {
      await opts.ensureLock();
      return withTransaction(opts.pool, async (client) => {
        const keys = summary.initial_load ? keyRebuilds(client, opts) : undefined;
        const out = await applyEach(client, group, opts, emit, keys);
        await keys?.restore();
        return out;
      });
    });
    for (const [i, { unit, entries }] of group.entries()) {
      collect(entries, results[i] as UnitResult | FileError);
      opts.onUnitApplied?.(unit);
    }
  }
}

/**
 * The transactions of a sync: one per unit, except on a first load, where the units filling
 * the served tables (facilities and the three violation sources) share one: each table's keys and
 * indexes are rebuilt once, and the foreign key between them can be dropped, which locks both
 * tables, while neither has anything committed to read (rebuild.ts). A unit refused inside a
 * shared transaction (a bad header) is undone alone (a savepoint), as when it has its own.
 */
function transactions(planned: Planned, firstLoad: boolean): Planned[] {
  const groups: Planned[] = [];
  for (const p of planned) {
    const last = groups.at(-1)?.at(-1);
    const shared = firstLoad && last !== undefined && UNIT_TABLE[p.unit] !== undefined && UNIT_TABLE[last.unit] !== undefined;
    if (shared) (groups.at(-1) as Planned).push(p);
    else groups.push([p]);
  }
  return groups;
}

/** A first load's key and index rebuilds (their statements timed in the debug log, like the units'). */
function keyRebuilds(client: PoolClient, opts: SyncOptions): KeyRebuilds {
  return new KeyRebuilds(opts.logger.isLevelEnabled('debug') ? timedClient(client, opts.logger, 'keys') : client);
}

/**
 * The units of one transaction, each behind a savepoint: a refused file (FileError) undoes only
 * its unit (nothing of it written) and later units see what earlier ones wrote. The tables they
 * fill lose their keys before the first savepoint, so undoing a unit never undoes that.
 */
async function applyEach(client: PoolClient, planned: Planned, opts: SyncOptions, emit: boolean, keys: KeyRebuilds | undefined) {
  for (const table of new Set(planned.map((p) => UNIT_TABLE[p.unit]))) if (table !== undefined) await keys?.drop(table);
  const out: Array<UnitResult | FileError> = [];
  for (const p of planned) {
    await client.query('SAVEPOINT echo_unit');
    try {
      out.push(await applyUnit(client, p.unit, p.entries, opts, emit, keys));
      await client.query('RELEASE SAVEPOINT echo_unit');
    } catch (err) {
      if (!(err instanceof FileError)) throw err;
      await client.query('ROLLBACK TO SAVEPOINT echo_unit');
      out.push(err);
    }
  }
  return out;
}

/**
 * A dry run: every unit in one transaction (applyEach: a refused file undoes only its unit and
 * later units see what earlier ones would have written), rolled back at the end.
 */
async function dryRunAll(planned: Planned, opts: SyncOptions, emit: boolean, firstLoad: boolean, collect: Collect): Promise<void> {
  const results = await opts
    .retry(async () => {
      await opts.ensureLock();
      return withTransaction(opts.pool, async (client) => {
        throw new DryRunRollback(await applyEach(client, planned, opts, emit, firstLoad ? keyRebuilds(client, opts) : undefined));
      });
    })
    .catch((err: unknown) => {
      if (err instanceof DryRunRollback) return err.result as Array<UnitResult | FileError>;
      throw err;
    });
  for (const [i, { entries }] of planned.entries()) collect(entries, results[i] as UnitResult | FileError);
}
