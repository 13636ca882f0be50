import type { CaseStatus, ComplianceStatus } from '../domain/codes';
import { events } from '../domain/events';
import { FACILITY_FIELDS, NATURAL_KEY } from '../domain/records';
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
import { facilitySnapshots } from '../store/snapshots';
import type { EchoFileName } from './layouts';
import { PROFILE_DEFAULTS } from './profile';
import type { UnitRun } from './unit-run';

/** A profile column's value from the staged row `s` (SIC codes are staged space-separated). */
const profileValue = (col: string) => (col === 'sic_codes' ? "string_to_array(s.sic_codes, ' ')" : `s.${col}`);

// The diff of each unit: set-based SQL over its staged rows (UnitRun) against the stored ones.

/** Program links (the FRS program-links file): insert the new ones. */
export async function applyLinks(run: UnitRun, file: EchoFileName): Promise<void> {
  const t = run.table(file);
  const s = run.summary(file);
  const distinct = await run.count(`SELECT count(*)::int AS n FROM (SELECT DISTINCT system, pgm_sys_id, registry_id FROM ${t}) d`);
  await run.bulkInsertInto('echo_program_links');
  s.inserted = await run.count(
    `WITH ins AS (INSERT INTO echo_program_links (system, pgm_sys_id, registry_id)
       SELECT DISTINCT system, pgm_sys_id, registry_id FROM ${t} s
        WHERE NOT EXISTS (SELECT 1 FROM echo_program_links l
                           WHERE l.system = s.system AND l.pgm_sys_id = s.pgm_sys_id AND l.registry_id = s.registry_id)
       ON CONFLICT DO NOTHING RETURNING 1)
     SELECT count(*)::int AS n FROM ins`,
  );
  s.unchanged = distinct - s.inserted;
}

/** Facilities (ECHO_EXPORTER.csv, or FRS_FACILITIES.csv): insert new, update changed, facility.status_changed. */
export async function applyFacilities(run: UnitRun, file: EchoFileName): Promise<void> {
  const t = run.table(file);
  const s = run.summary(file);
  const frs = file === 'FRS_FACILITIES.csv';
  await run.rejectDuplicates(file, 'registry_id', 'REGISTRY_ID');
  await linkPrograms(run, t, frs);
  // Every stored field but the natural key, in the representation's order (domain/records.ts).
  const cols = Object.keys(FACILITY_FIELDS).filter((c) => c !== NATURAL_KEY.facilities);
  // FRS leaves NAICS, status, last inspection and the profile as stored (it carries none of them).
  const keep = (col: string, value: string) => (frs ? `coalesce(${value}, f.${col})` : value);
  const profile = Object.keys(PROFILE_DEFAULTS);
  const next = `s.name, s.street, s.city, s.state, s.zip, s.county, s.latitude, s.longitude,
    ${keep('naics_codes', "string_to_array(s.naics_codes, ' ')")} AS naics_codes, string_to_array(s.programs, ' ') AS programs,
    ${keep('compliance_status', 's.compliance_status')} AS compliance_status,
    ${keep('last_inspection_date', 's.last_inspection_date')} AS last_inspection_date,
    ${profile.map((c) => `${keep(c, profileValue(c))} AS ${c}`).join(', ')}`;
  // The stored rows are diffed before the new ones are inserted: the new ones cannot differ from
  // the staged rows, and on a first load the diff then reads an empty table, not the load.
  const changed = run.tmp('changed');
  await run.client.query(
    `CREATE TEMP TABLE ${changed} ON COMMIT DROP AS
     SELECT f.id, f.compliance_status AS previous_status, n.*
       FROM ${t} s JOIN facilities f ON f.registry_id = s.registry_id, LATERAL (SELECT ${next}) n
      WHERE (${cols.map((c) => `f.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map((c) => `n.${c}`).join(', ')})`,
  );
  // data_as_of: the unit's timestamp ($1), which the unit records as its file's synced_at in
  // echo_sync_sources (sources.ts, GET /v1/sources): the time of the sync that last wrote the row.
  s.changed = await run.update(
    `UPDATE facilities f SET (${cols.join(', ')}, updated_at, data_as_of) = (${cols.map((c) => `c.${c}`).join(', ')}, $1::timestamptz, $1::timestamptz)
       FROM ${changed} c WHERE c.id = f.id`,
  );
  s.missing = await run.count(
    `SELECT count(*)::int AS n FROM facilities f WHERE NOT EXISTS (SELECT 1 FROM ${t} s WHERE s.registry_id = f.registry_id)`,
  );
  const newIds = await run.insertNew(
    `INSERT INTO facilities (id, registry_id, ${cols.join(', ')}, updated_at, data_as_of)
     SELECT gen_random_uuid(), s.registry_id, s.name, s.street, s.city, s.state, s.zip, s.county, s.latitude, s.longitude,
            coalesce(string_to_array(s.naics_codes, ' '), '{}'), string_to_array(s.programs, ' '),
            coalesce(s.compliance_status, 'no_violation'), s.last_inspection_date,
            ${profile.map((c) => `coalesce(${profileValue(c)}, ${PROFILE_DEFAULTS[c]})`).join(', ')}, $1::timestamptz, $1::timestamptz
       FROM ${t} s WHERE NOT EXISTS (SELECT 1 FROM facilities f WHERE f.registry_id = s.registry_id)
     RETURNING id`,
    false,
    'facilities',
  );
  s.inserted = newIds.count;
  s.unchanged = (await run.accepted(file)) - s.inserted - s.changed;
  if (run.emit) await facilityStatusEvents(run, file, changed);
}

/**
 * The program links of the staged facilities: FRS takes each facility's programs from its known
 * links; the Exporter brings links of its own (its program ids), added here.
 */
async function linkPrograms(run: UnitRun, t: string, frs: boolean): Promise<void> {
  if (frs) {
    // FRS has no program flags: a facility's programs are those its program links name.
    await run.client.query(
      `UPDATE ${t} s SET programs = coalesce((
         SELECT string_agg(p, ' ' ORDER BY array_position(ARRAY['CAA','CWA','RCRA','SDWA'], p)) FROM (
           SELECT DISTINCT CASE l.system WHEN 'AIR' THEN 'CAA' WHEN 'NPDES' THEN 'CWA' WHEN 'RCRAINFO' THEN 'RCRA' WHEN 'SDWIS' THEN 'SDWA' END AS p
             FROM echo_program_links l WHERE l.registry_id = s.registry_id) x WHERE p IS NOT NULL), '')`,
    );
  } else {
    // Known links are filtered out with an anti-join first: a re-sync then inserts nothing
    // instead of attempting (and conflicting on) every link again.
    await run.bulkInsertInto('echo_program_links');
    await run.client.query(
      `INSERT INTO echo_program_links (system, pgm_sys_id, registry_id)
       SELECT DISTINCT n.system, n.pgm_sys_id, n.registry_id FROM (
         SELECT split_part(x, '|', 1) AS system, substr(x, strpos(x, '|') + 1) AS pgm_sys_id, s.registry_id
           FROM ${t} s, unnest(string_to_array(s.links, ' ')) AS x) n
        WHERE NOT EXISTS (SELECT 1 FROM echo_program_links l
                           WHERE l.system = n.system AND l.pgm_sys_id = n.pgm_sys_id AND l.registry_id = n.registry_id)
       ON CONFLICT DO NOTHING`,
    );
  }
}

/** facility.status_changed for each changed facility whose compliance status moved. */
async function facilityStatusEvents(run: UnitRun, file: EchoFileName, changed: string): Promise<void> {
  const { rows } = await run.client.query<FacilityRow & { previous_status: ComplianceStatus }>(
    `SELECT ${FACILITY_COLUMNS.replace(/(\w+)/g, 'f.$1')}, c.previous_status
       FROM ${changed} c JOIN facilities f ON f.id = c.id
      WHERE c.previous_status <> f.compliance_status ORDER BY f.registry_id`,
  );
  for (const r of rows) run.event(file, events.facilityStatusChanged(toFacility(r), r.previous_status, run.now, run.opts.ids));
}

/** Violations of one source file: attach to facilities through the program links; insert new (violation.new), update changed. */
export async function applyViolations(run: UnitRun, file: EchoFileName, idPrefix: string, system: string, idColumn: string): Promise<void> {
  const t = run.table(file);
  const s = run.summary(file);
  await run.rejectDuplicates(file, 'source_id', 'violation');
  const cols = ['facility_id', 'program', 'violation_type', 'violation_date', 'severity', 'description', 'resolved_date'];
  const next = (c: string) => (c === 'facility_id' ? 'fl.id' : `s.${c}`);
  // One join classifies every staged row: the facility its program id links to, the stored
  // violation of the same id, and whether that one differs. The update, the insert and the
  // counts then read this table instead of joining the stored violations three times.
  const r = run.tmp('resolved');
  await run.client.query(
    `CREATE TEMP TABLE ${r} ON COMMIT DROP AS
     SELECT s.*, fl.id AS facility_id, v.id AS stored_id,
            fl.id IS NOT NULL AND v.id IS NOT NULL
              AND (${cols.map((c) => `v.${c}`).join(', ')}) IS DISTINCT FROM (${cols.map(next).join(', ')}) AS differs
       FROM ${t} s
       LEFT JOIN (SELECT DISTINCT ON (l.pgm_sys_id) l.pgm_sys_id, f.id
                    FROM echo_program_links l JOIN facilities f ON f.registry_id = l.registry_id
                   WHERE l.system = $1 ORDER BY l.pgm_sys_id, f.registry_id) fl ON fl.pgm_sys_id = s.pgm_sys_id
       LEFT JOIN violations v ON v.source_id = s.source_id AND starts_with(v.source_id, $2)`,
    [system, idPrefix],
  );
  const unlinked = await run.client.query<{ line: number; pgm_sys_id: string }>(
    `SELECT line, pgm_sys_id FROM ${r} WHERE facility_id IS NULL ORDER BY line`,
  );
  for (const u of unlinked.rows) {
    s.rejected++;
    run.problem(s.origin, u.line, `${idColumn} '${u.pgm_sys_id}' links to no known facility`);
  }
  s.changed = await run.update(
    `UPDATE violations v SET (${cols.join(', ')}, updated_at) = (${cols.map((c) => `r.${c}`).join(', ')}, $1::timestamptz)
       FROM ${r} r WHERE r.differs AND v.id = r.stored_id`,
  );
  // Stored violations of this source the download no longer has (a staged id matches at most one).
  s.missing = await run.count(
    `SELECT ((SELECT count(*) FROM violations WHERE starts_with(source_id, $1))
           - (SELECT count(*) FROM ${r} WHERE stored_id IS NOT NULL))::int AS n`,
    [idPrefix],
  );
  const newIds = await run.insertNew(
    `INSERT INTO violations (id, source_id, ${cols.join(', ')}, updated_at)
     SELECT gen_random_uuid(), r.source_id, ${cols.map((c) => `r.${c}`).join(', ')}, $1::timestamptz
       FROM ${r} r WHERE r.facility_id IS NOT NULL AND r.stored_id IS NULL
      ORDER BY r.line
     RETURNING id`,
    run.emit,
    'violations',
  );
  s.inserted = newIds.count;
  s.unchanged = (await run.count(`SELECT count(*)::int AS n FROM ${r} WHERE facility_id IS NOT NULL`)) - s.inserted - s.changed;
  if (newIds.table) {
    const { rows } = await run.client.query<ViolationRow>(
      `SELECT v.id, v.facility_id, f.name AS facility_name, v.program, v.violation_type, v.violation_date, v.severity,
              v.description, v.resolved_date
         FROM ${newIds.table} n JOIN violations v ON v.id = n.id JOIN facilities f ON f.id = v.facility_id ORDER BY n.seq`,
    );
    const snapshot = await facilitySnapshots(
      run.client,
      rows.map((v) => v.facility_id),
    );
    for (const v of rows) run.event(file, events.violationNew(toViolation(v), snapshot, run.now, run.opts.ids));
  }
}

/** Cases from the four ICIS-FE&C files: case.new for new cases, case.updated for a status change. */
export async function applyCases(run: UnitRun): Promise<void> {
  const e = run.table('CASE_ENFORCEMENTS.csv');
  const cf = run.table('CASE_FACILITIES.csv');
  const s = run.summary('CASE_ENFORCEMENTS.csv');
  const input = await caseInput(run, e, cf);
  const cols = ['case_type', 'status', 'lead_agency', 'filed_date', 'settled_date', 'penalty_amount_usd', 'facility_ids'];
  const newIds = await run.insertNew(
    `INSERT INTO cases (id, case_number, ${cols.join(', ')}, updated_at)
     SELECT gen_random_uuid(), i.case_number, ${cols.map((c) => `i.${c}`).join(', ')}, $1::timestamptz
       FROM ${input} i WHERE NOT EXISTS (SELECT 1 FROM cases c WHERE c.case_number = i.case_number)
      ORDER BY i.line
     RETURNING id`,
    run.emit,
  );
  s.inserted = newIds.count;
  const changed = run.tmp('changed');
  await run.client.query(
    `CREATE TEMP TABLE ${changed} ON COMMIT DROP AS
     SELECT c.id, c.status AS previous_status, i.* FROM ${input} i JOIN cases c ON c.case_number = i.case_number
      WHERE (${cols.map((x) => `c.${x}`).join(', ')}) IS DISTINCT FROM (${cols.map((x) => `i.${x}`).join(', ')})`,
  );
  s.changed = await run.update(
    `UPDATE cases c SET (${cols.join(', ')}, updated_at) = (${cols.map((x) => `i.${x}`).join(', ')}, $1::timestamptz)
       FROM ${changed} i WHERE i.id = c.id`,
  );
  s.unchanged = (await run.count(`SELECT count(*)::int AS n FROM ${input}`)) - s.inserted - s.changed;
  s.missing = await run.count(
    `SELECT count(*)::int AS n FROM cases c WHERE NOT EXISTS (SELECT 1 FROM ${e} e WHERE e.case_number = c.case_number)`,
  );
  await caseEvents(run, newIds.table, changed);
}

/**
 * The cases to apply, one row per staged case with its conclusion, penalty and facilities, in a
 * temp table; facility rows naming no known facility and cases left without any are rejected.
 */
async function caseInput(run: UnitRun, e: string, cf: string): Promise<string> {
  const cc = run.stagedTable('CASE_ENFORCEMENT_CONCLUSIONS.csv') ?? (await run.emptyStage('case_concl'));
  const cp = run.stagedTable('CASE_PENALTIES.csv') ?? (await run.emptyStage('case_pen'));
  const s = run.summary('CASE_ENFORCEMENTS.csv');
  const sf = run.summary('CASE_FACILITIES.csv');
  await run.rejectDuplicates('CASE_ENFORCEMENTS.csv', 'case_number', 'CASE_NUMBER');
  const unknown = await run.client.query<{ line: number; registry_id: string }>(
    `SELECT line, registry_id FROM ${cf} c WHERE NOT EXISTS (SELECT 1 FROM facilities f WHERE f.registry_id = c.registry_id) ORDER BY line`,
  );
  for (const u of unknown.rows) {
    sf.rejected++;
    run.problem(sf.origin, u.line, `REGISTRY_ID '${u.registry_id}' names no known facility`);
  }
  const input = run.tmp('cases');
  await run.client.query(
    `CREATE TEMP TABLE ${input} ON COMMIT DROP AS
     SELECT e.line, e.case_number, e.case_type, e.status, e.lead_agency, e.filed_date, c.settled_date,
            round(coalesce(p.penalty, e.penalty), 2) AS penalty_amount_usd, fa.ids AS facility_ids
       FROM ${e} e
       LEFT JOIN (SELECT cf.case_number, array_agg(DISTINCT f.id ORDER BY f.id) AS ids
                    FROM ${cf} cf JOIN facilities f ON f.registry_id = cf.registry_id GROUP BY 1) fa ON fa.case_number = e.case_number
       LEFT JOIN (SELECT case_number, min(settled_date) AS settled_date FROM ${cc} GROUP BY 1) c ON c.case_number = e.case_number
       LEFT JOIN (SELECT case_number, sum(penalty) AS penalty FROM ${cp} GROUP BY 1) p ON p.case_number = e.case_number`,
  );
  const orphan = await run.client.query<{ line: number; case_number: string }>(
    `DELETE FROM ${input} WHERE facility_ids IS NULL RETURNING line, case_number`,
  );
  for (const o of orphan.rows.sort((a, b) => a.line - b.line)) {
    s.rejected++;
    run.problem(s.origin, o.line, `case ${o.case_number} has no known facility in CASE_FACILITIES.csv`);
  }
  return input;
}

/** case.new for the new cases (in file order), case.updated for each changed case whose status moved. */
async function caseEvents(run: UnitRun, newIds: string | undefined, changed: string): Promise<void> {
  const created = newIds
    ? (
        await run.client.query<CaseRow>(
          `SELECT ${CASE_COLUMNS.replace(/(\w+)/g, 'c.$1')} FROM ${newIds} n JOIN cases c ON c.id = n.id ORDER BY n.seq`,
        )
      ).rows
    : [];
  const updated = run.emit
    ? (
        await run.client.query<CaseRow & { previous_status: CaseStatus }>(
          `SELECT ${CASE_COLUMNS.replace(/(\w+)/g, 'c.$1')}, i.previous_status FROM ${changed} i JOIN cases c ON c.id = i.id
            WHERE i.previous_status <> c.status ORDER BY i.line`,
        )
      ).rows
    : [];
  if (created.length + updated.length === 0) return;
  // The facilities of every case event, read once in this unit's transaction.
  const snapshot = await facilitySnapshots(
    run.client,
    [...created, ...updated].flatMap((c) => c.facility_ids),
  );
  for (const c of created) run.event('CASE_ENFORCEMENTS.csv', events.caseNew(toCase(c), snapshot, run.now, run.opts.ids));
  for (const c of updated) {
    run.event('CASE_ENFORCEMENTS.csv', events.caseUpdated(toCase(c), c.previous_status, snapshot, run.now, run.opts.ids));
  }
}
