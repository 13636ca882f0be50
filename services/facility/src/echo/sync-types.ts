import type { EventType } from '@fcd/events';
import type { Clock, IdSource, Logger, Pool } from '@fcd/service-kit';
import type { UnitName } from './files';
import type { EchoFileName } from './layouts';
import type { EchoSource, SourceEntry } from './source';

/** Counts of one file of a sync (the summary: docs/echo.md). */
export interface FileSummary {
  file: EchoFileName;
  origin: string;
  /** Data rows read (the header not counted). */
  read: number;
  inserted: number;
  changed: number;
  unchanged: number;
  rejected: number;
  /** Stored records of this file's kind that the file no longer has (kept, not deleted). */
  missing: number;
  events: number;
  /** Set when the whole file (its unit) was refused: nothing of it was written. */
  error?: string;
}

export interface RowProblem {
  origin: string;
  line: number;
  reason: string;
}

export interface SyncSummary {
  source: string;
  dry_run: boolean;
  initial_load: boolean;
  events_emitted: boolean;
  files: FileSummary[];
  events: Record<EventType, number>;
  errors: RowProblem[];
  errors_truncated: boolean;
  ignored: string[];
  seconds: number;
}

type Retry = <T>(fn: () => Promise<T>) => Promise<T>;

export interface SyncOptions {
  pool: Pool;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  retry: Retry;
  /** Holds the one-sync-at-a-time lock; called before each unit (re-takes it after a lost connection). */
  ensureLock: () => Promise<void>;
  source: EchoSource;
  sourceName: string;
  dryRun?: boolean;
  /** Emit events even on a first load into an empty database. */
  emitEvents?: boolean;
  only?: ReadonlySet<UnitName>;
  /** Row problems listed (the rest are counted). */
  maxErrors?: number;
  /** Rows copied per COPY chunk write. */
  copyChunkBytes?: number;
  /** The sync's row in echo_sync_runs (set by syncEcho; a dry run has none and records no source). */
  runId?: number;
  /** Called after each unit commits (tests use it to kill a sync part-way). */
  onUnitApplied?: (unit: UnitName) => void;
}

/** The outcome of a sync: 0 everything applied, 2 some rows (or files) rejected. */
export function exitCodeOf(summary: SyncSummary): number {
  return summary.files.some((f) => f.rejected > 0 || f.error !== undefined) ? 2 : 0;
}

export function emptySummary(entry: SourceEntry): FileSummary {
  return { file: entry.file, origin: entry.origin, read: 0, inserted: 0, changed: 0, unchanged: 0, rejected: 0, missing: 0, events: 0 };
}
