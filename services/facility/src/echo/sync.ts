import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { type Clock, type IdSource, isoTimestamp, type Logger, type Pool, type PoolClient, withTransaction } from '@fcd/service-kit';
import { from as copyFrom } from 'pg-copy-streams';
import type { CaseStatus, ComplianceStatus, EventType } from '../domain/codes';
import { EVENT_TYPES } from '../domain/codes';
import { type DomainEvent, events } from '../domain/events';
import { FIELDS, NATURAL_KEY } from '../domain/records';
import { lockIngestion, writeOutbox } from '../store/ingest';
import {
  CASE_COLUMNS,
  type CaseRow,
  FACILITY_COLUMNS,
  type FacilityRow,
  toCase,
  toFacility,
  toViolation,
  type ViolationRow,
} from '../store/rows';
import { RowReason } from './codes';
import { FileError, readCsv } from './csv';
import { type Cell, FILE_SPECS, type FileSpec, STAGES, type StageName, UNITS, type UnitName } from './files';
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

export type Retry = <T>(fn: () => Promise<T>) => Promise<T>;

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
  /** Called after each unit commits (tests use it to kill a sync part-way). */
  onUnitApplied?: (unit: UnitName) => void;
}

const SPEC_BY_FILE = new Map(FILE_SPECS.map((s) => [s.file, s]));

let temps = 0;
/** A temp table name unique in the process (a dry run holds every unit's tables in one transaction). */
function tempName(prefix: string): string {
  return `echo_${prefix}_${++temps}`;
}

/** Thrown inside a dry-run transaction to roll it back with its result. */
class DryRunRollback<T> extends Error {
  constructor(readonly result: T) {
    super('dry run');
  }
}

function emptySummary(entry: SourceEntry): FileSummary {
  return { file: entry.file, origin: entry.origin, read: 0, inserted: 0, changed: 0, unchanged: 0, rejected: 0, missing: 0, events: 0 };
}

/** COPY text-format escaping of one value. */
function copyValue(v: Cell): string {
  if (v === null) return '\\N';
  return v.replace(/[\\\n\r\t]/g, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}

interface UnitResult {
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
class UnitRun {
  readonly result: UnitResult = { files: [], errors: [], errorCount: 0, events: [] };
  private readonly byFile = new Map<EchoFileName, FileSummary>();
  private readonly tables = new Map<EchoFileName, string>();

  constructor(
    private readonly client: PoolClient,
    private readonly opts: SyncOptions,
    private readonly now: string,
    private readonly emit: boolean,
    /** A first load: the served tables' secondary indexes are rebuilt after the insert (rebuildingIndexes). */
    private readonly firstLoad = false,
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
      `WITH d AS (SELECT line, ${key} AS key, min(line) OVER (PARTITION BY ${key}) AS first FROM ${t})
       DELETE FROM ${t} s USING d WHERE s.line = d.line AND d.line <> d.first RETURNING d.line, d.first, d.key`,
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

  private accepted(file: EchoFileName): Promise<number> {
    return this.count(`SELECT count(*)::int AS n FROM ${this.table(file)}`);
  }

  async applyLinks(file: EchoFileName): Promise<void> {
    const t = this.table(file);
    const s = this.summary(file);
    const distinct = await this.count(`SELECT count(*)::int AS n FROM (SELECT DISTINCT system, pgm_sys_id, registry_id FROM ${t}) d`);
    s.inserted = await this.count(
      `WITH ins AS (INSERT INTO echo_program_links (system, pgm_sys_id, registry_id)
         SELECT DISTINCT system, pgm_sys_id, registry_id FROM ${t} s
          WHERE NOT EXISTS (SELECT 1 FROM echo_program_links l
                             WHERE l.system = s.system AND l.pgm_sys_id = s.pgm_sys_id AND l.registry_id = s.registry_id)
         ON CONFLICT DO NOTHING RETURNING 1)
       SELECT count(*)::int AS n FROM ins`,
    );
    s.unchanged = distinct - s.inserted;
  }

  private tmp(prefix: string): string {
    return tempName(prefix);
  }

  /** Facilities (ECHO_EXPORTER.csv, or FRS_FACILITIES.csv): insert new, update changed, facility.status_changed. */
  async applyFacilities(file: EchoFileName): Promise<void> {
    const t = this.table(file);
    const s = this.summary(file);
    const frs = file === 'FRS_FACILITIES.csv';
    await this.rejectDuplicates(file, 'registry_id', 'REGISTRY_ID');
    if (frs) {
      // FRS has no program flags: a facility's programs are those its program links name.
      await this.client.query(
        `UPDATE ${t} s SET programs = coalesce((
           SELECT string_agg(p, ' ' ORDER BY array_position(ARRAY['CAA','CWA','RCRA','SDWA'], p)) FROM (
             SELECT DISTINCT CASE l.system WHEN 'AIR' THEN 'CAA' WHEN 'NPDES' THEN 'CWA' WHEN 'RCRAINFO' THEN 'RCRA' WHEN 'SDWIS' THEN 'SDWA' END AS p
               FROM echo_program_links l WHERE l.registry_id = s.registry_id) x WHERE p IS NOT NULL), '')`,
      );
    } else {
      // Known links are filtered out with an anti-join first: a re-sync then inserts nothing
      // instead of attempting (and conflicting on) every link again.
      await this.client.query(
        `INSERT INTO echo_program_links (system, pgm_sys_id, registry_id)
         SELECT DISTINCT n.system, n.pgm_sys_id, n.registry_id FROM (
           SELECT split_part(x, '|', 1) AS system, substr(x, strpos(x, '|') + 1) AS pgm_sys_id, s.registry_id
             FROM ${t} s, unnest(string_to_array(s.links, ' ')) AS x) n
          WHERE NOT EXISTS (SELECT 1 FROM echo_program_links l
                             WHERE l.system = n.system AND l.pgm_sys_id = n.pgm_sys_id AND l.registry_id = n.registry_id)
         ON CONFLICT DO NOTHING`,
      );
    }
    // Every stored field but the natural key, in the representation's order (domain/records.ts).
    const cols = FIELDS.facilities.filter((c) => c !== NATURAL_KEY.facilities);
    // FRS leaves NAICS, status and last inspection as stored (it carries none of them).
    const keep = (col: string, value: string) => (frs ? `coalesce(${value}, f.${col})` : value);
    const next = `s.name, s.street, s.city, s.state, s.zip, s.county, s.latitude, s.longitude,
      ${keep('naics_codes', "string_to_array(s.naics_codes, ' ')")} AS naics_codes, string_to_array(s.programs, ' ') AS programs,
      ${keep('compliance_status', 's.compliance_status')} AS compliance_status,
      ${keep('last_inspection_date', 's.last_inspection_date')} AS last_inspection_date`;
    const newIds = await this.insertNew(
      `INSERT INTO facilities (id, registry_id, ${cols.join(', ')}, updated_at)
       SELECT gen_random_uuid(), s.registry_id, s.name, s.street, s.city, s.state, s.zip, s.county, s.latitude, s.longitude,
              coalesce(string_to_array(s.naics_codes, ' '), '{}'), string_to_array(s.programs, ' '),
              coalesce(s.compliance_status, 'no_violation'), s.last_inspection_date, $1::timestamptz
         FROM ${t} s WHERE NOT EXISTS (SELECT 1 FROM facilities f WHERE f.registry_id = s.registry_id)
       RETURNING id`,
      false,
      'facilities',
    );
    s.inserted = newIds.count;
    const changed = this.tmp('changed');
    await this.client.query(
      `CREATE TEMP TABLE ${changed} ON COMMIT DROP AS
       SELECT f.id, f.compliance_status AS previous_status, n.*
         FROM ${t} s JOIN facilities f ON f.registry_id = s.registry_id, LATERAL (SELECT ${next}) n
        WHERE (${cols.map((c) => `f.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map((c) => `n.${c}`).join(', ')})`,
    );
    s.changed = await this.update(
      `UPDATE facilities f SET (${cols.join(', ')}, updated_at) = (${cols.map((c) => `c.${c}`).join(', ')}, $1::timestamptz)
         FROM ${changed} c WHERE c.id = f.id`,
    );
    s.unchanged = (await this.accepted(file)) - s.inserted - s.changed;
    s.missing = await this.count(
      `SELECT count(*)::int AS n FROM facilities f WHERE NOT EXISTS (SELECT 1 FROM ${t} s WHERE s.registry_id = f.registry_id)`,
    );
    if (this.emit) {
      const { rows } = await this.client.query<FacilityRow & { previous_status: ComplianceStatus }>(
        `SELECT ${FACILITY_COLUMNS.replace(/(\w+)/g, 'f.$1')}, c.previous_status
           FROM ${changed} c JOIN facilities f ON f.id = c.id
          WHERE c.previous_status <> f.compliance_status ORDER BY f.registry_id`,
      );
      for (const r of rows) this.event(file, events.facilityStatusChanged(toFacility(r), r.previous_status, this.now, this.opts.ids));
    }
  }

  /** Violations of one source file: attach to facilities through the program links; insert new (violation.new), update changed. */
  async applyViolations(file: EchoFileName, idPrefix: string, system: string, idColumn: string): Promise<void> {
    const t = this.table(file);
    const s = this.summary(file);
    await this.rejectDuplicates(file, 'source_id', 'violation');
    const r = this.tmp('resolved');
    await this.client.query(
      `CREATE TEMP TABLE ${r} ON COMMIT DROP AS
       SELECT s.*, fl.id AS facility_id FROM ${t} s LEFT JOIN (
         SELECT DISTINCT ON (l.pgm_sys_id) l.pgm_sys_id, f.id
           FROM echo_program_links l JOIN facilities f ON f.registry_id = l.registry_id
          WHERE l.system = $1 ORDER BY l.pgm_sys_id, f.registry_id) fl ON fl.pgm_sys_id = s.pgm_sys_id`,
      [system],
    );
    const unlinked = await this.client.query<{ line: number; pgm_sys_id: string }>(
      `SELECT line, pgm_sys_id FROM ${r} WHERE facility_id IS NULL ORDER BY line`,
    );
    for (const u of unlinked.rows) {
      s.rejected++;
      this.problem(s.origin, u.line, `${idColumn} '${u.pgm_sys_id}' links to no known facility`);
    }
    const cols = ['facility_id', 'program', 'violation_type', 'violation_date', 'severity', 'description', 'resolved_date'];
    const newIds = await this.insertNew(
      `INSERT INTO violations (id, source_id, ${cols.join(', ')}, updated_at)
       SELECT gen_random_uuid(), r.source_id, ${cols.map((c) => `r.${c}`).join(', ')}, $1::timestamptz
         FROM ${r} r WHERE r.facility_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM violations v WHERE v.source_id = r.source_id)
        ORDER BY r.line
       RETURNING id`,
      this.emit,
      'violations',
    );
    s.inserted = newIds.count;
    s.changed = await this.update(
      `UPDATE violations v SET (${cols.join(', ')}, updated_at) = (${cols.map((c) => `r.${c}`).join(', ')}, $1::timestamptz)
         FROM ${r} r WHERE r.source_id = v.source_id AND r.facility_id IS NOT NULL
          AND (${cols.map((c) => `v.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map((c) => `r.${c}`).join(', ')})`,
    );
    s.unchanged = (await this.count(`SELECT count(*)::int AS n FROM ${r} WHERE facility_id IS NOT NULL`)) - s.inserted - s.changed;
    s.missing = await this.count(
      `SELECT count(*)::int AS n FROM violations v
        WHERE starts_with(v.source_id, $1) AND NOT EXISTS (SELECT 1 FROM ${t} s WHERE s.source_id = v.source_id)`,
      [idPrefix],
    );
    if (newIds.table) {
      const { rows } = await this.client.query<ViolationRow>(
        `SELECT v.id, v.facility_id, f.name AS facility_name, v.program, v.violation_type, v.violation_date, v.severity,
                v.description, v.resolved_date
           FROM ${newIds.table} n JOIN violations v ON v.id = n.id JOIN facilities f ON f.id = v.facility_id ORDER BY n.seq`,
      );
      for (const v of rows) this.event(file, events.violationNew(toViolation(v), this.now, this.opts.ids));
    }
  }

  /** Cases from the four ICIS-FE&C files: case.new for new cases, case.updated for a status change. */
  async applyCases(): Promise<void> {
    const e = this.table('CASE_ENFORCEMENTS.csv');
    const cf = this.table('CASE_FACILITIES.csv');
    const cc = this.tables.get('CASE_ENFORCEMENT_CONCLUSIONS.csv') ?? (await this.emptyStage('case_concl'));
    const cp = this.tables.get('CASE_PENALTIES.csv') ?? (await this.emptyStage('case_pen'));
    const s = this.summary('CASE_ENFORCEMENTS.csv');
    const sf = this.summary('CASE_FACILITIES.csv');
    await this.rejectDuplicates('CASE_ENFORCEMENTS.csv', 'case_number', 'CASE_NUMBER');
    const unknown = await this.client.query<{ line: number; registry_id: string }>(
      `SELECT line, registry_id FROM ${cf} c WHERE NOT EXISTS (SELECT 1 FROM facilities f WHERE f.registry_id = c.registry_id) ORDER BY line`,
    );
    for (const u of unknown.rows) {
      sf.rejected++;
      this.problem(sf.origin, u.line, `REGISTRY_ID '${u.registry_id}' names no known facility`);
    }
    const input = this.tmp('cases');
    await this.client.query(
      `CREATE TEMP TABLE ${input} ON COMMIT DROP AS
       SELECT e.line, e.case_number, e.case_type, e.status, e.lead_agency, e.filed_date, c.settled_date,
              round(coalesce(p.penalty, e.penalty), 2) AS penalty_amount_usd, fa.ids AS facility_ids
         FROM ${e} e
         LEFT JOIN (SELECT cf.case_number, array_agg(DISTINCT f.id ORDER BY f.id) AS ids
                      FROM ${cf} cf JOIN facilities f ON f.registry_id = cf.registry_id GROUP BY 1) fa ON fa.case_number = e.case_number
         LEFT JOIN (SELECT case_number, min(settled_date) AS settled_date FROM ${cc} GROUP BY 1) c ON c.case_number = e.case_number
         LEFT JOIN (SELECT case_number, sum(penalty) AS penalty FROM ${cp} GROUP BY 1) p ON p.case_number = e.case_number`,
    );
    const orphan = await this.client.query<{ line: number; case_number: string }>(
      `DELETE FROM ${input} WHERE facility_ids IS NULL RETURNING line, case_number`,
    );
    for (const o of orphan.rows.sort((a, b) => a.line - b.line)) {
      s.rejected++;
      this.problem(s.origin, o.line, `case ${o.case_number} has no known facility in CASE_FACILITIES.csv`);
    }
    const cols = ['case_type', 'status', 'lead_agency', 'filed_date', 'settled_date', 'penalty_amount_usd', 'facility_ids'];
    const newIds = await this.insertNew(
      `INSERT INTO cases (id, case_number, ${cols.join(', ')}, updated_at)
       SELECT gen_random_uuid(), i.case_number, ${cols.map((c) => `i.${c}`).join(', ')}, $1::timestamptz
         FROM ${input} i WHERE NOT EXISTS (SELECT 1 FROM cases c WHERE c.case_number = i.case_number)
        ORDER BY i.line
       RETURNING id`,
      this.emit,
    );
    s.inserted = newIds.count;
    const changed = this.tmp('changed');
    await this.client.query(
      `CREATE TEMP TABLE ${changed} ON COMMIT DROP AS
       SELECT c.id, c.status AS previous_status, i.* FROM ${input} i JOIN cases c ON c.case_number = i.case_number
        WHERE (${cols.map((x) => `c.${x}`).join(', ')}) IS DISTINCT FROM (${cols.map((x) => `i.${x}`).join(', ')})`,
    );
    s.changed = await this.update(
      `UPDATE cases c SET (${cols.join(', ')}, updated_at) = (${cols.map((x) => `i.${x}`).join(', ')}, $1::timestamptz)
         FROM ${changed} i WHERE i.id = c.id`,
    );
    s.unchanged = (await this.count(`SELECT count(*)::int AS n FROM ${input}`)) - s.inserted - s.changed;
    s.missing = await this.count(
      `SELECT count(*)::int AS n FROM cases c WHERE NOT EXISTS (SELECT 1 FROM ${e} e WHERE e.case_number = c.case_number)`,
    );
    if (newIds.table) {
      const { rows } = await this.client.query<CaseRow>(
        `SELECT ${CASE_COLUMNS.replace(/(\w+)/g, 'c.$1')} FROM ${newIds.table} n JOIN cases c ON c.id = n.id ORDER BY n.seq`,
      );
      for (const c of rows) this.event('CASE_ENFORCEMENTS.csv', events.caseNew(toCase(c), this.now, this.opts.ids));
    }
    if (this.emit) {
      const { rows } = await this.client.query<CaseRow & { previous_status: CaseStatus }>(
        `SELECT ${CASE_COLUMNS.replace(/(\w+)/g, 'c.$1')}, i.previous_status FROM ${changed} i JOIN cases c ON c.id = i.id
          WHERE i.previous_status <> c.status ORDER BY i.line`,
      );
      for (const c of rows) this.event('CASE_ENFORCEMENTS.csv', events.caseUpdated(toCase(c), c.previous_status, this.now, this.opts.ids));
    }
  }

  private async emptyStage(stage: StageName): Promise<string> {
    const name = this.tmp('empty');
    await this.client.query(`CREATE TEMP TABLE ${name} (line int NOT NULL, ${STAGES[stage]}) ON COMMIT DROP`);
    return name;
  }

  /**
   * Runs an INSERT ... RETURNING id; with `keep`, the new ids (in order) go to a temp table for the events.
   * `into` names the served table it fills: on a first load its secondary indexes are rebuilt around it.
   */
  private async insertNew(sql: string, keep: boolean, into?: string): Promise<{ count: number; table?: string }> {
    return this.rebuildingIndexes(into, async () => {
      if (!keep) return { count: await this.count(`WITH ins AS (${sql}) SELECT count(*)::int AS n FROM ins`, [this.now]) };
      const table = this.tmp('new');
      await this.client.query(`CREATE TEMP TABLE ${table} (seq bigint GENERATED ALWAYS AS IDENTITY, id uuid) ON COMMIT DROP`);
      const { rowCount } = await this.client.query(`WITH ins AS (${sql}) INSERT INTO ${table} (id) SELECT id FROM ins`, [this.now]);
      return { count: rowCount ?? 0, table };
    });
  }

  /**
   * On a first load, runs `fn` (the bulk insert into `table`) with the table's secondary B-tree
   * and GIN indexes dropped, and creates them again from their definitions before the unit goes
   * on: one sorted build per index is several times cheaper than maintaining each index row by
   * row for millions of rows (the GIN trigram index above all). The primary key and unique indexes
   * stay (they enforce the keys and serve the diff), and so do GiST indexes: a GiST build inserts
   * every row anyway, so rebuilding saves nothing (measured: slower). DDL is transactional: a unit
   * that fails or is killed rolls back to the original indexes. Readers of the table wait for the
   * unit's commit (the unit holds the table exclusively meanwhile); on a first load there is
   * nothing to read yet. Later syncs insert few rows and keep the indexes.
   */
  private async rebuildingIndexes<T>(table: string | undefined, fn: () => Promise<T>): Promise<T> {
    if (!this.firstLoad || table === undefined) return fn();
    const { rows } = await this.client.query<{ name: string; def: string }>(
      `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
         FROM pg_index i
        WHERE i.indrelid = $1::regclass AND NOT i.indisunique AND NOT i.indisprimary AND NOT i.indisexclusion
          AND (SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.oid = i.indexrelid) IN ('btree', 'gin')
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
        ORDER BY 1`,
      [table],
    );
    if (rows.length > 0) await this.client.query(`DROP INDEX ${rows.map((r) => r.name).join(', ')}`);
    const result = await fn();
    await this.client.query("SET LOCAL maintenance_work_mem = '256MB'");
    for (const r of rows) await this.client.query(r.def);
    await this.client.query('SET LOCAL maintenance_work_mem TO DEFAULT');
    return result;
  }

  private async update(sql: string): Promise<number> {
    const { rowCount } = await this.client.query(sql, [this.now]);
    return rowCount ?? 0;
  }

  private event(file: EchoFileName, e: DomainEvent): void {
    this.summary(file).events++;
    this.result.events.push(e);
  }
}

function unitFiles(unit: UnitName, source: EchoSource): { entries: SourceEntry[]; skipped: SourceEntry[]; refusal?: string } {
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

const VIOLATION_UNITS: Partial<Record<UnitName, { file: EchoFileName; prefix: string; system: string; idColumn: string }>> = {
  'icis-air': { file: 'ICIS-AIR_VIOLATION_HISTORY.csv', prefix: 'ICIS-AIR:', system: 'AIR', idColumn: 'PGM_SYS_ID' },
  rcra: { file: 'RCRA_VIOLATIONS.csv', prefix: 'RCRA:', system: 'RCRAINFO', idColumn: 'ID_NUMBER' },
  npdes: { file: 'NPDES_SE_VIOLATIONS.csv', prefix: 'NPDES:', system: 'NPDES', idColumn: 'NPDES_ID' },
};

/** The outcome of a sync: 0 everything applied, 2 some rows (or files) rejected. */
export function exitCodeOf(summary: SyncSummary): number {
  return summary.files.some((f) => f.rejected > 0 || f.error !== undefined) ? 2 : 0;
}

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

/**
 * A sync of one ECHO download: each unit (links, facilities, one per violation source, cases)
 * in its own transaction, retried whole after a lost Postgres connection. A dry run rolls every
 * unit back and reports what it would have changed.
 */
export async function syncEcho(opts: SyncOptions): Promise<SyncSummary> {
  const started = performance.now();
  const dryRun = opts.dryRun ?? false;
  const summary: SyncSummary = {
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
  await opts.retry(opts.ensureLock);
  summary.initial_load = await opts.retry(() => isInitialLoad(opts.pool));
  const emit = !summary.initial_load || (opts.emitEvents ?? false);
  summary.events_emitted = emit;
  let runId: number | undefined;
  if (!dryRun) {
    runId = await opts.retry(async () => {
      const { rows } = await opts.pool.query<{ id: number }>(
        'INSERT INTO echo_sync_runs (source, initial_load, started_at) VALUES ($1, $2, $3::timestamptz) RETURNING id',
        [opts.sourceName, summary.initial_load, isoTimestamp(opts.clock.now())],
      );
      return (rows[0] as { id: number }).id;
    });
  }
  let errorCount = 0;
  const planned: Array<{ unit: UnitName; entries: SourceEntry[] }> = [];
  const collect = (entries: SourceEntry[], result: UnitResult | FileError) => {
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
    for (const unit of UNITS) {
      if (opts.only && !opts.only.has(unit)) continue;
      const { entries, skipped, refusal } = unitFiles(unit, opts.source);
      for (const e of skipped) summary.ignored.push(`${e.origin} (ECHO_EXPORTER.csv supersedes it)`);
      if (entries.length === 0) continue;
      if (refusal) {
        for (const e of entries) summary.files.push({ ...emptySummary(e), error: refusal });
        continue;
      }
      if (dryRun) {
        planned.push({ unit, entries });
        continue;
      }
      let result: UnitResult | FileError;
      try {
        result = await opts.retry(async () => {
          await opts.ensureLock();
          return withTransaction(opts.pool, (client) => applyUnit(client, unit, entries, opts, emit, summary.initial_load));
        });
      } catch (err) {
        if (!(err instanceof FileError)) throw err;
        result = err;
      }
      collect(entries, result);
      opts.onUnitApplied?.(unit);
    }
    if (dryRun) await dryRunAll(planned, opts, emit, summary.initial_load, collect);
  } catch (err) {
    if (runId !== undefined) {
      const id = runId;
      await opts.pool
        .query(`UPDATE echo_sync_runs SET finished_at = $2::timestamptz, outcome = 'failed' WHERE id = $1`, [
          id,
          isoTimestamp(opts.clock.now()),
        ])
        .catch(() => undefined);
    }
    throw err;
  }
  summary.errors_truncated = errorCount > summary.errors.length;
  summary.seconds = Math.round(performance.now() - started) / 1000;
  if (runId !== undefined) {
    const id = runId;
    await opts.retry(() =>
      opts.pool.query('UPDATE echo_sync_runs SET finished_at = $2::timestamptz, outcome = $3, summary = $4::jsonb WHERE id = $1', [
        id,
        isoTimestamp(opts.clock.now()),
        exitCodeOf(summary) === 0 ? 'applied' : 'rows_rejected',
        JSON.stringify({ ...summary, errors: undefined }),
      ]),
    );
  }
  return summary;
}

/**
 * A dry run: every unit in one transaction (each behind a savepoint, so a refused file undoes
 * only its unit and later units see what earlier ones would have written), rolled back at the end.
 */
async function dryRunAll(
  planned: Array<{ unit: UnitName; entries: SourceEntry[] }>,
  opts: SyncOptions,
  emit: boolean,
  firstLoad: boolean,
  collect: (entries: SourceEntry[], result: UnitResult | FileError) => void,
): Promise<void> {
  const results = await opts
    .retry(async () => {
      await opts.ensureLock();
      return withTransaction(opts.pool, async (client) => {
        const out: Array<UnitResult | FileError> = [];
        for (const { unit, entries } of planned) {
          await client.query('SAVEPOINT echo_unit');
          try {
            out.push(await applyUnit(client, unit, entries, opts, emit, firstLoad));
            await client.query('RELEASE SAVEPOINT echo_unit');
          } catch (err) {
            if (!(err instanceof FileError)) throw err;
            await client.query('ROLLBACK TO SAVEPOINT echo_unit');
            out.push(err);
          }
        }
        throw new DryRunRollback(out);
      });
    })
    .catch((err: unknown) => {
      if (err instanceof DryRunRollback) return err.result as Array<UnitResult | FileError>;
      throw err;
    });
  for (const [i, { entries }] of planned.entries()) collect(entries, results[i] as UnitResult | FileError);
}

/** The client with each statement's duration logged (debug level: where a sync spends its time). */
function timedClient(client: PoolClient, log: Logger, unit: UnitName): PoolClient {
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
async function applyUnit(
  client: PoolClient,
  unit: UnitName,
  entries: SourceEntry[],
  opts: SyncOptions,
  emit: boolean,
  firstLoad: boolean,
): Promise<UnitResult> {
  // Serialises with the ingestion API and the import/simulate CLIs (they take the same lock).
  await lockIngestion(client);
  const log = opts.logger;
  const debug = log.isLevelEnabled('debug');
  const run = new UnitRun(debug ? timedClient(client, log, unit) : client, opts, isoTimestamp(opts.clock.now()), emit, firstLoad);
  for (const entry of entries) {
    const started = performance.now();
    await run.stage(entry, SPEC_BY_FILE.get(entry.file) as FileSpec);
    if (debug) log.debug({ unit, file: entry.file, ms: Math.round(performance.now() - started) }, 'echo sync: file staged');
  }
  await client.query("SET LOCAL work_mem = '64MB'");
  if (unit === 'links') for (const e of entries) await run.applyLinks(e.file);
  else if (unit === 'facilities') await run.applyFacilities((entries[0] as SourceEntry).file);
  else if (unit === 'cases') await run.applyCases();
  else {
    const v = VIOLATION_UNITS[unit] as NonNullable<(typeof VIOLATION_UNITS)[UnitName]>;
    await run.applyViolations(v.file, v.prefix, v.system, v.idColumn);
  }
  const order = new Map(entries.map((e, i) => [e.origin, i]));
  run.result.errors.sort((a, b) => (order.get(a.origin) ?? 0) - (order.get(b.origin) ?? 0) || a.line - b.line);
  await writeOutbox(client, run.result.events);
  return run.result;
}
