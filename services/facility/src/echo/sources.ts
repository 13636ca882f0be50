import type { PoolClient } from '@fcd/service-kit';
import type { Queryable } from '../store/queries';
import type { SourceEntry } from './source';
import type { FileSummary } from './sync-types';

/**
 * The ECHO files a sync applied (table echo_sync_sources; GET /v1/sources, docs/echo.md
 * "Freshness"). Each unit records its files in its own transaction, after its diff: a file is
 * listed exactly when what it brought is committed, never half-written, and a refused file (its
 * unit undone) keeps the entry of the last sync that applied it. `synced_at` is the unit's
 * timestamp, the same value the unit writes as `data_as_of` of the facilities it inserts or changes.
 */

/** One file as GET /v1/sources lists it. */
export interface SourceFile {
  name: string;
  archive: string | null;
  file_date: string | null;
  synced_at: string;
  rows: number;
  rejected_rows: number;
}

/** Records the files of one applied unit (on the unit's transaction). */
export async function recordSources(
  client: PoolClient,
  runId: number,
  syncedAt: string,
  entries: SourceEntry[],
  files: FileSummary[],
): Promise<void> {
  const byFile = new Map(entries.map((e) => [e.file, e]));
  const rows = files.map((f) => ({ f, e: byFile.get(f.file) as SourceEntry }));
  await client.query(
    `INSERT INTO echo_sync_sources (run_id, file, archive, file_date, synced_at, rows_read, rows_rejected)
     SELECT $1, file, archive, file_date, $2::timestamptz, rows_read, rows_rejected
       FROM unnest($3::text[], $4::text[], $5::timestamptz[], $6::int[], $7::int[]) AS t(file, archive, file_date, rows_read, rows_rejected)`,
    [
      runId,
      syncedAt,
      rows.map((r) => r.f.file),
      rows.map((r) => r.e.archive),
      rows.map((r) => r.e.fileDate?.toISOString() ?? null),
      rows.map((r) => r.f.read),
      rows.map((r) => r.f.rejected),
    ],
  );
}

const iso = (d: Date) => d.toISOString();

/** The latest applied record of each ECHO file, by file name (empty before any sync, e.g. demo data). */
export async function latestSources(db: Queryable): Promise<SourceFile[]> {
  const { rows } = await db.query<{
    file: string;
    archive: string | null;
    file_date: Date | null;
    synced_at: Date;
    rows_read: number;
    rows_rejected: number;
  }>(
    `SELECT DISTINCT ON (file) file, archive, file_date, synced_at, rows_read, rows_rejected
       FROM echo_sync_sources ORDER BY file, synced_at DESC, id DESC`,
  );
  return rows.map((r) => ({
    name: r.file,
    archive: r.archive,
    file_date: r.file_date === null ? null : iso(r.file_date),
    synced_at: iso(r.synced_at),
    rows: r.rows_read,
    rejected_rows: r.rows_rejected,
  }));
}
