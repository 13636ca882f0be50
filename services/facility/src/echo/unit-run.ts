import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { PoolClient } from '@fcd/service-kit';
import { from as copyFrom } from 'pg-copy-streams';
import type { DomainEvent } from '../domain/events';
import { RowReason } from './codes';
import { readCsv } from './csv';
import { type Cell, type FileSpec, STAGES, type StageName } from './files';
import type { EchoFileName } from './layouts';
import type { KeyRebuilds } from './rebuild';
import type { SourceEntry } from './source';
import { emptySummary, type FileSummary, type RowProblem, type SyncOptions } from './sync-types';

let temps = 0;
/** A temp table name unique in the process (a dry run holds every unit's tables in one transaction). */
function tempName(prefix: string): string {
  return `echo_${prefix}_${++temps}`;
}

/** COPY text-format escaping of one value. */
function copyValue(v: Cell): string {
  if (v === null) return '\\N';
  return v.replace(/[\\\n\r\t]/g, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}

export interface UnitResult {
  files: FileSummary[];
  errors: RowProblem[];
  errorCount: number;
  events: DomainEvent[];
}

/**
 * One unit of a sync in one transaction: stage every file of the unit with COPY into temp
 * tables, then diff the staged rows against the stored ones with set-based SQL (INSERT the new
 * keys, UPDATE ... WHERE the row IS DISTINCT FROM the stored one), writing the events of those
 * changes to the outbox in the same transaction. A unit either commits whole or not at all, so
 * a sync killed part-way and run again ends in the same state and emits each event once.
 */
export class UnitRun {
  readonly result: UnitResult = { files: [], errors: [], errorCount: 0, events: [] };
  private readonly byFile = new Map<EchoFileName, FileSummary>();
  private readonly tables = new Map<EchoFileName, string>();

  constructor(
    readonly client: PoolClient,
    readonly opts: SyncOptions,
    /** The unit's timestamp (updated_at of what it writes, occurred_at of its events). */
    readonly now: string,
    /** Whether the unit's changes become events. */
    readonly emit: boolean,
    /** On a first load: the served tables' keys and indexes, dropped before the bulk inserts (rebuild.ts). */
    private readonly keys?: KeyRebuilds,
  ) {}

  problem(origin: string, line: number, reason: string): void {
    this.result.errorCount++;
    if (this.result.errors.length < (this.opts.maxErrors ?? 1000)) this.result.errors.push({ origin, line, reason });
  }

  summary(file: EchoFileName): FileSummary {
    return this.byFile.get(file) as FileSummary;
  }

  table(file: EchoFileName): string {
    return this.tables.get(file) as string;
  }

  /** The staging table of a file, if the unit has that file. */
  stagedTable(file: EchoFileName): string | undefined {
    return this.tables.get(file);
  }

  async createStage(file: EchoFileName, stage: StageName): Promise<string> {
    const name = tempName('stage');
    this.tables.set(file, name);
    await this.client.query(`CREATE TEMP TABLE ${name} (line int NOT NULL, ${STAGES[stage]}) ON COMMIT DROP`);
    return name;
  }

  /** Streams one file through its mapper into its staging table. */
  async stage(entry: SourceEntry, spec: FileSpec): Promise<void> {
    const summary = emptySummary(entry);
    this.byFile.set(entry.file, summary);
    this.result.files.push(summary);
    const table = await this.createStage(entry.file, spec.stage);
    const columns = STAGES[spec.stage].split(', ').map((c) => c.split(' ')[0]);
    const copy = this.client.query(copyFrom(`COPY ${table} (line, ${columns.join(', ')}) FROM STDIN`)) as Writable;
    const done = once(copy, 'finish');
    done.catch(() => undefined);
    const chunkBytes = this.opts.copyChunkBytes ?? 256 * 1024;
    let buffer = '';
    try {
      for await (const row of readCsv(await entry.open(), entry.origin, spec.reads)) {
        summary.read++;
        if (row.fieldCountProblem) {
          summary.rejected++;
          this.problem(entry.origin, row.line, row.fieldCountProblem);
          continue;
        }
        let values: Cell[] | null;
        try {
          values = spec.map(row.get);
        } catch (err) {
          if (!(err instanceof RowReason)) throw err;
          summary.rejected++;
          this.problem(entry.origin, row.line, err.message);
          continue;
        }
        if (values === null) continue;
        buffer += `${row.line}\t${values.map(copyValue).join('\t')}\n`;
        if (buffer.length >= chunkBytes) {
          const ok = copy.write(buffer);
          buffer = '';
          if (!ok) await Promise.race([once(copy, 'drain'), done]);
        }
      }
      if (buffer !== '') copy.write(buffer);
      copy.end();
      await done;
    } catch (err) {
      copy.destroy(err as Error);
      await done.catch(() => undefined);
      throw err;
    }
  }

  /** Removes rows whose key repeats an earlier row of the file, reporting each. */
  async rejectDuplicates(file: EchoFileName, key: string, what: string): Promise<void> {
    const t = this.table(file);
    const { rows } = await this.client.query<{ line: number; first: number; key: string }>(
      // Only the repeated keys are joined back (usually none), not every staged row.
      `WITH d AS (SELECT ${key} AS key, min(line) AS first FROM ${t} GROUP BY 1 HAVING count(*) > 1)
       DELETE FROM ${t} s USING d WHERE s.${key} = d.key AND s.line <> d.first RETURNING s.line, d.first, d.key`,
    );
    const s = this.summary(file);
    for (const r of rows.sort((a, b) => a.line - b.line)) {
      s.rejected++;
      this.problem(s.origin, r.line, `${what} ${r.key} repeats line ${r.first}`);
    }
  }

  async count(sql: string, values: unknown[] = []): Promise<number> {
    const { rows } = await this.client.query<{ n: number }>(sql, values);
    return rows[0]?.n ?? 0;
  }

  accepted(file: EchoFileName): Promise<number> {
    return this.count(`SELECT count(*)::int AS n FROM ${this.table(file)}`);
  }

  tmp(prefix: string): string {
    return tempName(prefix);
  }

  async emptyStage(stage: StageName): Promise<string> {
    const name = this.tmp('empty');
    await this.client.query(`CREATE TEMP TABLE ${name} (line int NOT NULL, ${STAGES[stage]}) ON COMMIT DROP`);
    return name;
  }

  /**
   * Runs an INSERT ... RETURNING id; with `keep`, the new ids (in order) go to a temp table for the events.
   * `into` names the served table it fills: on a first load its keys and indexes are dropped first.
   */
  async insertNew(sql: string, keep: boolean, into?: string): Promise<{ count: number; table?: string }> {
    if (into !== undefined) await this.keys?.drop(into);
    if (!keep) return { count: await this.count(`WITH ins AS (${sql}) SELECT count(*)::int AS n FROM ins`, [this.now]) };
    const table = this.tmp('new');
    await this.client.query(`CREATE TEMP TABLE ${table} (seq bigint GENERATED ALWAYS AS IDENTITY, id uuid) ON COMMIT DROP`);
    const { rowCount } = await this.client.query(`WITH ins AS (${sql}) INSERT INTO ${table} (id) SELECT id FROM ins`, [this.now]);
    return { count: rowCount ?? 0, table };
  }

  /** Before a bulk insert into `table` not made by insertNew: on a first load its keys and indexes go first (rebuild.ts). */
  async bulkInsertInto(table: string): Promise<void> {
    await this.keys?.drop(table);
  }

  async update(sql: string): Promise<number> {
    const { rowCount } = await this.client.query(sql, [this.now]);
    return rowCount ?? 0;
  }

  event(file: EchoFileName, e: DomainEvent): void {
    this.summary(file).events++;
    this.result.events.push(e);
  }
}
