import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Pool } from '@fcd/service-kit';
import { repoRoot } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KeyRebuilds } from '../src/echo/rebuild';
import type { SyncSummary } from '../src/echo/sync';
import { createFacilityMetrics } from '../src/metrics';
import { SCHEMA, schemaConnectionString } from '../src/store/db';
import { echoSyncStats } from '../src/store/outbox';
import { getFacility } from '../src/store/queries';
import { csvText, download1, download2, F, writeCsvFolder, writeDownload, writeSingleZip, ZIPS } from './echo-fixtures';
import { setupDb, type TestDb, waitFor } from './helpers';

/**
 * `sync-echo` (the built CLI) against fixtures shaped like EPA's ECHO downloads: the exact
 * records of a first load and its row errors, the exact events of a second download, nothing
 * on a re-run, a SIGKILL part-way, refused files, corrupt zips, an http source, dry runs and
 * the one-sync-at-a-time lock.
 */
const execFileP = promisify(execFile);
const cli = resolve(repoRoot, 'services/facility/dist/cli.js');
let db: TestDb;
let d1: string;
let d2: string;

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function sync(args: string[], url = db.database.url): Promise<CliResult> {
  try {
    const { stdout, stderr } = await execFileP(process.execPath, [cli, 'sync-echo', ...args], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: url, CLI_RETRY_FOR: '5s' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function syncJson(args: string[], url?: string): Promise<{ code: number; summary: SyncSummary; stderr: string }> {
  const r = await sync([...args, '--json'], url);
  expect(r.stdout, r.stderr).not.toBe('');
  return { code: r.code, summary: JSON.parse(r.stdout) as SyncSummary, stderr: r.stderr };
}

type Counts = [read: number, inserted: number, changed: number, unchanged: number, rejected: number, missing: number, events: number];
function counts(s: SyncSummary): Record<string, Counts | string> {
  return Object.fromEntries(
    s.files.map((f) => [f.file, f.error ?? [f.read, f.inserted, f.changed, f.unchanged, f.rejected, f.missing, f.events]]),
  );
}

/** The stored records, without generated ids and timestamps (facilities named by registry id). */
async function stateOf(pool: Pool) {
  const q = async (sql: string) => (await pool.query(sql)).rows;
  return {
    facilities: await q(`SELECT registry_id, name, street, city, state, zip, county, latitude, longitude, naics_codes, programs,
                                compliance_status, last_inspection_date FROM facilities ORDER BY registry_id`),
    violations: await q(`SELECT v.source_id, f.registry_id, v.program, v.violation_type, v.violation_date, v.severity, v.description,
                                v.resolved_date FROM violations v JOIN facilities f ON f.id = v.facility_id ORDER BY v.source_id`),
    cases: await q(`SELECT c.case_number, c.case_type, c.status, c.lead_agency, c.filed_date, c.settled_date, c.penalty_amount_usd,
                           (SELECT array_agg(f.registry_id ORDER BY f.registry_id) FROM facilities f WHERE f.id = ANY (c.facility_ids)) AS registry_ids
                      FROM cases c ORDER BY c.case_number`),
  };
}

async function outboxEvents(pool: Pool): Promise<Array<{ type: string; key: string; id: string }>> {
  const { rows } = await pool.query<{ type: string; payload: string }>('SELECT type, payload FROM outbox ORDER BY seq');
  return rows.map((r) => {
    const e = JSON.parse(r.payload) as { id: string; data: Record<string, Record<string, string>> };
    const d = e.data;
    const key =
      r.type === 'violation.new'
        ? `${d.violation?.violation_type} ${d.violation?.violation_date}`
        : r.type === 'facility.status_changed'
          ? `${d.facility?.registry_id} ${d.previous_status} -> ${d.facility?.compliance_status}`
          : `${d.case?.case_number} ${r.type === 'case.updated' ? `${d.previous_status} -> ` : ''}${d.case?.status}`;
    return { type: r.type, key, id: e.id };
  });
}

/**
 * The facility snapshots of every outbox event against the facilities as the API reads them now
 * (no facility changed after the sync that wrote the events): `violation.new` carries its
 * violation's facility, `case.*` one facility per `case.facility_ids` in that order. Returns how
 * many snapshots were compared.
 */
async function expectSnapshots(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ payload: string }>('SELECT payload FROM outbox ORDER BY seq');
  let compared = 0;
  for (const r of rows) {
    const e = JSON.parse(r.payload) as { type: string; data: Record<string, unknown> };
    const d = e.data as {
      violation?: { facility_id: string };
      case?: { facility_ids: string[] };
      facility?: { id: string };
      facilities?: unknown[];
    };
    if (e.type === 'violation.new') {
      expect(Object.keys(d)).toEqual(['violation', 'facility']);
      expect(d.facility).toEqual(await getFacility(pool, d.violation?.facility_id as string));
      compared++;
    } else if (e.type === 'case.new' || e.type === 'case.updated') {
      expect(Object.keys(d)).toEqual(e.type === 'case.new' ? ['case', 'facilities'] : ['case', 'previous_status', 'facilities']);
      const ids = d.case?.facility_ids as string[];
      expect(ids.length).toBeGreaterThan(0);
      expect(d.facilities).toEqual(await Promise.all(ids.map((id) => getFacility(pool, id))));
      compared += ids.length;
    }
  }
  return compared;
}

async function reset(pool: Pool): Promise<void> {
  await pool.query('TRUNCATE facilities, violations, cases, outbox, echo_program_links, echo_sync_runs');
}

/**
 * Runs a sync that stops in its last unit (the test holds the cases table), SIGKILLs it there,
 * after the earlier units committed, and waits until its Postgres sessions are gone.
 */
async function syncKilledInCasesUnit(from: string): Promise<void> {
  const blocker = new pg.Client({ connectionString: schemaConnectionString(db.database.url) });
  await blocker.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query(`LOCK TABLE ${SCHEMA}.cases IN SHARE MODE`);
    const proc = spawn(process.execPath, [cli, 'sync-echo', '--from', from], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.database.url },
      stdio: 'ignore',
    });
    const exited = new Promise((r) => proc.once('exit', r));
    // Polled outside the blocker's transaction: pg_stat_activity is a snapshot within one.
    await waitFor(
      async () => {
        const { rows } = await db.pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'facility-cli' AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO cases%'",
        );
        return rows.length > 0 ? true : undefined;
      },
      30_000,
      'the sync to wait on the cases table',
    );
    proc.kill('SIGKILL');
    await exited;
  } finally {
    await blocker.query('ROLLBACK');
    await blocker.end();
  }
  // The killed run's backends end once they notice their client is gone.
  await waitFor(
    async () => {
      const { rows } = await db.pool.query(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'facility-%'",
      );
      return rows.length === 0 ? true : undefined;
    },
    30_000,
    'the killed sync to leave Postgres',
  );
}

const FIRST_LOAD: Record<string, Counts> = {
  'ICIS-AIR_FACILITIES.csv': [2, 2, 0, 0, 0, 0, 0],
  'ECHO_EXPORTER.csv': [6, 4, 0, 0, 2, 0, 0],
  'ICIS-AIR_VIOLATION_HISTORY.csv': [4, 2, 0, 0, 2, 0, 0],
  'RCRA_VIOLATIONS.csv': [3, 2, 0, 0, 1, 0, 0],
  'NPDES_SE_VIOLATIONS.csv': [2, 2, 0, 0, 0, 0, 0],
  'CASE_ENFORCEMENTS.csv': [3, 2, 0, 0, 1, 0, 0],
  'CASE_FACILITIES.csv': [4, 0, 0, 0, 1, 0, 0],
  'CASE_ENFORCEMENT_CONCLUSIONS.csv': [2, 0, 0, 0, 0, 0, 0],
  'CASE_PENALTIES.csv': [2, 0, 0, 0, 0, 0, 0],
};

const ROW_ERRORS = [
  "echo_exporter.zip:ECHO_EXPORTER.csv:7: FAC_STATE: unknown state code 'XX'",
  "echo_exporter.zip:ECHO_EXPORTER.csv:8: FAC_DATE_LAST_INSPECTION: not a date (MM/DD/YYYY): '13/45/2020'",
  "ICIS-AIR_downloads.zip:ICIS-AIR_VIOLATION_HISTORY.csv:4: PGM_SYS_ID 'NY0000009999999' links to no known facility",
  "ICIS-AIR_downloads.zip:ICIS-AIR_VIOLATION_HISTORY.csv:5: EARLIEST_FRV_DETERM_DATE: not a date (MM/DD/YYYY): '2023-03-01'",
  "rcra_downloads.zip:RCRA_VIOLATIONS.csv:4: ACTIVITY_LOCATION: unknown state code 'ZZ'",
  'case_downloads.zip:CASE_ENFORCEMENTS.csv:5: case 05-2022-0100 has no known facility in CASE_FACILITIES.csv',
  "case_downloads.zip:CASE_FACILITIES.csv:5: REGISTRY_ID '110099999999' names no known facility",
];

const errorLines = (s: SyncSummary) => s.errors.map((e) => `${e.origin}:${e.line}: ${e.reason}`);

beforeAll(async () => {
  db = await setupDb('echo_sync');
  d1 = await writeDownload(download1());
  d2 = await writeDownload(download2());
}, 120_000);

afterAll(async () => {
  await db?.close();
});

beforeEach(async () => {
  await reset(db.pool);
});

describe('sync-echo: loading and syncing', () => {
  it('a first load gives exactly the expected facilities, violations and cases, reports bad rows as file:line, and emits no events', async () => {
    const { code, summary } = await syncJson(['--from', d1]);
    expect(code).toBe(2);
    expect(summary.initial_load).toBe(true);
    expect(summary.events_emitted).toBe(false);
    expect(counts(summary)).toEqual(FIRST_LOAD);
    expect(errorLines(summary)).toEqual(ROW_ERRORS);
    expect(summary.ignored).toEqual(['rcra_downloads.zip:RCRA_FACILITIES.csv']);
    const state = await stateOf(db.pool);
    expect(state.facilities).toEqual([
      {
        registry_id: F.plating,
        name: 'Sample "Bright Finish" Plating, Inc.',
        street: '12 Mill St',
        city: 'BRISTOL',
        state: 'CT',
        zip: '06010',
        county: 'HARTFORD',
        latitude: 41.673,
        longitude: -72.946,
        naics_codes: ['332813'],
        programs: ['CAA'],
        compliance_status: 'no_violation',
        last_inspection_date: '2023-04-12',
      },
      {
        registry_id: F.alafab,
        name: 'ALAFAB, INC',
        street: '2100 1ST AVE N',
        city: 'BIRMINGHAM',
        state: 'AL',
        zip: '35203-4201',
        county: 'JEFFERSON',
        latitude: 33.518,
        longitude: -86.81,
        naics_codes: ['332312', '332710'],
        programs: ['RCRA'],
        compliance_status: 'violation',
        last_inspection_date: null,
      },
      {
        registry_id: F.riverside,
        name: 'RIVERSIDE WATER RECLAMATION PLANT',
        street: '900 RIVER RD',
        city: 'AUSTIN',
        state: 'TX',
        zip: '78701',
        county: 'Travis',
        latitude: 30.26,
        longitude: -97.74,
        naics_codes: ['221320'],
        programs: ['CWA'],
        compliance_status: 'significant_violation',
        last_inspection_date: '2024-09-30',
      },
      {
        registry_id: F.acme,
        name: 'ACME METALS, DIVISION OF\r\nACME CORP',
        street: '1 FOUNDRY WAY',
        city: 'CLEVELAND',
        state: 'OH',
        zip: '44114',
        county: null,
        latitude: null,
        longitude: null,
        naics_codes: [],
        programs: ['CAA', 'RCRA'],
        compliance_status: 'no_violation',
        last_inspection_date: null,
      },
    ]);
    expect(state.violations).toEqual([
      {
        source_id: 'ICIS-AIR:3600123456',
        registry_id: F.plating,
        program: 'CAA',
        violation_type: 'FRV',
        violation_date: '2022-10-28',
        severity: 'moderate',
        description:
          'State Implementation Plan for National Primary and Secondary Ambient Air Quality Standards, Title V Permits. Pollutants: VOLATILE ORGANIC COMPOUNDS (VOCS)',
        resolved_date: null,
      },
      {
        source_id: 'ICIS-AIR:3600200001',
        registry_id: F.acme,
        program: 'CAA',
        violation_type: 'HPV',
        violation_date: '2023-01-15',
        severity: 'significant',
        description: 'MACT Standards',
        resolved_date: '2023-06-30',
      },
      {
        source_id: 'NPDES:1000000001',
        registry_id: F.riverside,
        program: 'CWA',
        violation_type: 'A0011',
        violation_date: '2022-07-04',
        severity: 'significant',
        description: 'Sanitary Sewer Overflow',
        resolved_date: null,
      },
      {
        source_id: 'NPDES:1000000002',
        registry_id: F.riverside,
        program: 'CWA',
        violation_type: 'C0021',
        violation_date: '2022-08-15',
        severity: 'moderate',
        description: 'Failure to Notify',
        resolved_date: '2022-09-01',
      },
      {
        source_id: 'RCRA:ALD004001715:AL:262.A:S:2000-03-09',
        registry_id: F.alafab,
        program: 'RCRA',
        violation_type: '262.A',
        violation_date: '2000-03-09',
        severity: 'moderate',
        description: 'Standards Applicable to Generators of HW: General',
        resolved_date: '2001-01-10',
      },
      {
        source_id: 'RCRA:OHD000123456:OH:268.A:E:2021-05-17',
        registry_id: F.acme,
        program: 'RCRA',
        violation_type: '268.A',
        violation_date: '2021-05-17',
        severity: 'moderate',
        description: 'Land Disposal Restrictions: General',
        resolved_date: null,
      },
    ]);
    expect(state.cases).toEqual([
      {
        case_number: '01-2023-0042',
        case_type: 'judicial',
        status: 'closed',
        lead_agency: 'EPA',
        filed_date: '2022-10-01',
        settled_date: '2023-11-02',
        penalty_amount_usd: '250000.00',
        registry_ids: [F.plating, F.acme],
      },
      {
        case_number: '06-2024-0311',
        case_type: 'administrative_formal',
        status: 'settled',
        lead_agency: 'EPA',
        filed_date: '2023-10-01',
        settled_date: '2024-03-15',
        penalty_amount_usd: '12500.00',
        registry_ids: [F.riverside],
      },
    ]);
    expect(await outboxEvents(db.pool)).toEqual([]);
    const runs = await db.pool.query('SELECT initial_load, outcome FROM echo_sync_runs');
    expect(runs.rows).toEqual([{ initial_load: true, outcome: 'rows_rejected' }]);
  }, 60_000);

  it("a first load ends with the served tables' keys, foreign keys and indexes exactly as migrated", async () => {
    // The first load drops them around its bulk inserts and adds them back (src/echo/rebuild.ts).
    const definitions = async () =>
      (
        await db.pool.query<{ table: string; name: string; def: string }>(
          `SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS def
             FROM pg_constraint WHERE connamespace = $1::text::regnamespace AND contype IN ('p', 'u', 'f')
           UNION ALL
           SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1::text
           ORDER BY 1, 2, 3`,
          [SCHEMA],
        )
      ).rows;
    const before = await definitions();
    expect(before.filter((d) => d.table === 'violations').map((d) => d.name)).toEqual([
      'violations_date_idx',
      'violations_facility_id_fkey',
      'violations_facility_idx',
      'violations_pkey',
      'violations_pkey',
      'violations_program_idx',
      'violations_severity_idx',
      'violations_source_id_key',
      'violations_source_id_key',
    ]);
    const { summary } = await syncJson(['--from', d1]);
    expect(summary.initial_load).toBe(true);
    expect(await definitions()).toEqual(before);
  }, 60_000);

  it('a first load drops the keys of the facilities and violations once, the foreign key between them once, and restores them all', async () => {
    const definitions = async (client: pg.PoolClient) =>
      (
        await client.query<{ name: string; def: string }>(
          `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
            WHERE conrelid IN ('facilities'::regclass, 'violations'::regclass) AND contype IN ('p', 'u', 'f')
           UNION ALL
           SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('facilities', 'violations') AND schemaname = $1::text
           ORDER BY 1, 2`,
          [SCHEMA],
        )
      ).rows;
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const before = await definitions(client);
      const keys = new KeyRebuilds(client);
      await keys.drop('violations');
      await keys.drop('facilities');
      await keys.drop('violations');
      // Only the GiST geo index is left (a GiST build costs what maintaining it does).
      expect((await definitions(client)).map((d) => d.name)).toEqual(['facilities_earth_idx']);
      await keys.restore();
      expect(await definitions(client)).toEqual(before);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  }, 60_000);

  it('a first load with --emit-events emits the events of every new violation and case', async () => {
    const { summary } = await syncJson(['--from', d1, '--emit-events']);
    expect(summary.events_emitted).toBe(true);
    expect(summary.events).toEqual({ 'violation.new': 6, 'case.new': 2, 'case.updated': 0, 'facility.status_changed': 0 });
    expect((await outboxEvents(db.pool)).map((e) => e.type)).toEqual([
      'violation.new',
      'violation.new',
      'violation.new',
      'violation.new',
      'violation.new',
      'violation.new',
      'case.new',
      'case.new',
    ]);
    // 6 violations, one facility each; 06-2024-0311 has one facility, 01-2023-0042 two.
    expect(await expectSnapshots(db.pool)).toBe(9);
  }, 60_000);

  it('a second download yields exactly its 5 events; the same download again changes nothing and emits nothing', async () => {
    await syncJson(['--from', d1]);
    const second = await syncJson(['--from', d2]);
    expect(second.code).toBe(2);
    expect(second.summary.initial_load).toBe(false);
    expect(counts(second.summary)).toEqual({
      'ICIS-AIR_FACILITIES.csv': [2, 0, 0, 2, 0, 0, 0],
      'ECHO_EXPORTER.csv': [6, 0, 1, 3, 2, 0, 1],
      'ICIS-AIR_VIOLATION_HISTORY.csv': [5, 1, 0, 2, 2, 0, 1],
      'RCRA_VIOLATIONS.csv': [3, 1, 0, 1, 1, 1, 1],
      'NPDES_SE_VIOLATIONS.csv': [2, 0, 0, 2, 0, 0, 0],
      'CASE_ENFORCEMENTS.csv': [4, 1, 1, 1, 1, 0, 2],
      'CASE_FACILITIES.csv': [5, 0, 0, 0, 1, 0, 0],
      'CASE_ENFORCEMENT_CONCLUSIONS.csv': [2, 0, 0, 0, 0, 0, 0],
      'CASE_PENALTIES.csv': [2, 0, 0, 0, 0, 0, 0],
    });
    const events = await outboxEvents(db.pool);
    expect(events.map(({ type, key }) => ({ type, key }))).toEqual([
      { type: 'facility.status_changed', key: `${F.plating} no_violation -> violation` },
      { type: 'violation.new', key: 'FRV 2026-09-02' },
      { type: 'violation.new', key: '262.D 2026-10-06' },
      { type: 'case.new', key: '04-2027-0007 active' },
      { type: 'case.updated', key: '06-2024-0311 settled -> closed' },
    ]);
    // 2 violations and 2 cases, one facility each.
    expect(await expectSnapshots(db.pool)).toBe(4);
    // The RCRA violation the second download no longer has is kept.
    const kept = await db.pool.query(
      "SELECT count(*)::int AS n FROM violations WHERE source_id = 'RCRA:ALD004001715:AL:262.A:S:2000-03-09'",
    );
    expect(kept.rows[0].n).toBe(1);

    const before = await stateOf(db.pool);
    const third = await syncJson(['--from', d2]);
    expect(counts(third.summary)).toEqual({
      'ICIS-AIR_FACILITIES.csv': [2, 0, 0, 2, 0, 0, 0],
      'ECHO_EXPORTER.csv': [6, 0, 0, 4, 2, 0, 0],
      'ICIS-AIR_VIOLATION_HISTORY.csv': [5, 0, 0, 3, 2, 0, 0],
      'RCRA_VIOLATIONS.csv': [3, 0, 0, 2, 1, 1, 0],
      'NPDES_SE_VIOLATIONS.csv': [2, 0, 0, 2, 0, 0, 0],
      'CASE_ENFORCEMENTS.csv': [4, 0, 0, 3, 1, 0, 0],
      'CASE_FACILITIES.csv': [5, 0, 0, 0, 1, 0, 0],
      'CASE_ENFORCEMENT_CONCLUSIONS.csv': [2, 0, 0, 0, 0, 0, 0],
      'CASE_PENALTIES.csv': [2, 0, 0, 0, 0, 0, 0],
    });
    expect(Object.values(third.summary.events).reduce((a, b) => a + b, 0)).toBe(0);
    expect(await outboxEvents(db.pool)).toHaveLength(5);
    expect(await stateOf(db.pool)).toEqual(before);
  }, 60_000);

  it('SIGKILL part-way, then a re-run: the same end state as an uninterrupted run, and each event exactly once', async () => {
    // The reference: an uninterrupted run of both downloads.
    await syncJson(['--from', d1]);
    await syncJson(['--from', d2]);
    const expected = await stateOf(db.pool);
    const expectedEvents = (await outboxEvents(db.pool)).map(({ type, key }) => ({ type, key }));
    await reset(db.pool);

    await syncJson(['--from', d1]);
    await syncKilledInCasesUnit(d2);
    const partial = await outboxEvents(db.pool);
    expect(partial.map((e) => e.type)).toEqual(['facility.status_changed', 'violation.new', 'violation.new']);

    const rerun = await syncJson(['--from', d2]);
    expect(rerun.summary.initial_load).toBe(false);
    expect(rerun.summary.events).toEqual({ 'violation.new': 0, 'case.new': 1, 'case.updated': 1, 'facility.status_changed': 0 });
    expect(await stateOf(db.pool)).toEqual(expected);
    const all = await outboxEvents(db.pool);
    expect(all.map(({ type, key }) => ({ type, key }))).toEqual(expectedEvents);
    expect(new Set(all.map((e) => e.id)).size).toBe(5);
  }, 90_000);

  it('a later download updates a changed violation without an event and rejects a repeated violation id with its line', async () => {
    await syncJson(['--from', d1]);
    const d = download1();
    const npdes = d['NPDES_SE_VIOLATIONS.csv'] ?? [];
    d['NPDES_SE_VIOLATIONS.csv'] = [
      ...npdes.map((r) => (r.NPDES_VIOLATION_ID === '1000000001' ? { ...r, SINGLE_EVENT_END_DATE: '08/10/2022' } : r)),
      { ...(npdes[1] as Record<string, string>), VIOLATION_DESC: 'Failure to Notify (repeated)' },
    ];
    const { summary } = await syncJson(['--from', await writeDownload(d)]);
    expect(counts(summary)['NPDES_SE_VIOLATIONS.csv']).toEqual([3, 0, 1, 1, 1, 0, 0]);
    expect(errorLines(summary).filter((l) => l.includes('NPDES'))).toEqual([
      'npdes_downloads.zip:NPDES_SE_VIOLATIONS.csv:5: violation NPDES:1000000002 repeats line 4',
    ]);
    const { rows } = await db.pool.query(
      "SELECT source_id, to_char(resolved_date, 'YYYY-MM-DD') AS resolved, description FROM violations WHERE source_id LIKE 'NPDES:%' ORDER BY 1",
    );
    expect(rows).toEqual([
      { source_id: 'NPDES:1000000001', resolved: '2022-08-10', description: 'Sanitary Sewer Overflow' },
      { source_id: 'NPDES:1000000002', resolved: '2022-09-01', description: 'Failure to Notify' },
    ]);
    expect(await outboxEvents(db.pool)).toEqual([]);
  }, 60_000);

  it('a first load killed part-way stays a first load when run again (no events)', async () => {
    await syncKilledInCasesUnit(d1);
    const rerun = await syncJson(['--from', d1]);
    expect(rerun.summary.initial_load).toBe(true);
    expect(counts(rerun.summary)['CASE_ENFORCEMENTS.csv']).toEqual([3, 2, 0, 0, 1, 0, 0]);
    expect(await outboxEvents(db.pool)).toEqual([]);
  }, 90_000);

  it('the last successful sync is exported as metrics: last-success time, duration, rows by file and outcome', async () => {
    const metricsOf = async () => {
      const m = createFacilityMetrics(
        async () => ({ pending: 0, oldest_age_seconds: 0 }),
        () => echoSyncStats(db.pool),
      );
      return m.registry.metrics();
    };
    expect(await metricsOf()).toContain('fcd_facility_echo_sync_last_success_timestamp_seconds{service="facility"} 0\n');
    await syncJson(['--from', d1]);
    const { rows } = await db.pool.query<{ t: number }>('SELECT EXTRACT(EPOCH FROM finished_at)::float8 AS t FROM echo_sync_runs');
    const text = await metricsOf();
    expect(text).toContain(`fcd_facility_echo_sync_last_success_timestamp_seconds{service="facility"} ${rows[0]?.t}\n`);
    expect(text).toMatch(/^fcd_facility_echo_sync_duration_seconds\{service="facility"\} \d+(\.\d+)?$/m);
    const series = text.split('\n').filter((l) => l.startsWith('fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv"'));
    expect(series).toEqual([
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="read",service="facility"} 6',
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="inserted",service="facility"} 4',
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="changed",service="facility"} 0',
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="unchanged",service="facility"} 0',
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="rejected",service="facility"} 2',
      'fcd_facility_echo_sync_rows{file="ECHO_EXPORTER.csv",outcome="missing",service="facility"} 0',
    ]);
    // A failed run is not a success.
    await db.pool.query(
      "INSERT INTO echo_sync_runs (source, initial_load, started_at, finished_at, outcome) VALUES ('x', false, now(), now(), 'failed')",
    );
    expect(await metricsOf()).toContain(`fcd_facility_echo_sync_last_success_timestamp_seconds{service="facility"} ${rows[0]?.t}\n`);
  }, 60_000);

  it('--only applies just the named units', async () => {
    const { summary } = await syncJson(['--from', d1, '--only', 'facilities,links']);
    expect(summary.files.map((f) => f.file)).toEqual(['ICIS-AIR_FACILITIES.csv', 'ECHO_EXPORTER.csv']);
    const n = await db.pool.query('SELECT (SELECT count(*) FROM facilities)::int AS f, (SELECT count(*) FROM violations)::int AS v');
    expect(n.rows[0]).toEqual({ f: 4, v: 0 });
  }, 60_000);

  it('reads a folder of the CSV files and a single zip of them as well as the zips', async () => {
    const folder = join(mkdtempSync(join(tmpdir(), 'echo-single-')), 'single.zip');
    await writeSingleZip(download1(), folder);
    const { summary } = await syncJson(['--from', folder]);
    expect(counts(summary)).toEqual(FIRST_LOAD);
    const csvState = await stateOf(db.pool);
    await reset(db.pool);
    const csv = await syncJson(['--from', writeCsvFolder(download1())]);
    expect(counts(csv.summary)).toEqual(FIRST_LOAD);
    expect(csv.summary.errors[0]).toEqual({ origin: 'ECHO_EXPORTER.csv', line: 7, reason: "FAC_STATE: unknown state code 'XX'" });
    expect(await stateOf(db.pool)).toEqual(csvState);
  }, 60_000);
});

describe('sync-echo: bad input', () => {
  it('a file with a missing or renamed column is refused with one line naming file and column; nothing of it is written', async () => {
    const d = download1();
    const header = [...csvText('RCRA_VIOLATIONS.csv', []).trim().split(',')].map((h) =>
      h === 'DATE_VIOLATION_DETERMINED' ? 'DATE_VIOL_DETERMINED' : h,
    );
    const renamed = csvText('RCRA_VIOLATIONS.csv', d['RCRA_VIOLATIONS.csv'] ?? []).replace(/^[^\r]*/, header.join(','));
    const dir = await writeDownload(d, { 'RCRA_VIOLATIONS.csv': renamed });
    const r = await sync(['--from', dir]);
    expect(r.code).toBe(2);
    expect(r.stdout.split('\n').filter((l) => l.includes('RCRA_VIOLATIONS.csv'))).toEqual([
      'rcra_downloads.zip:RCRA_VIOLATIONS.csv: refused: rcra_downloads.zip:RCRA_VIOLATIONS.csv: header has no column DATE_VIOLATION_DETERMINED (missing or renamed)',
    ]);
    expect(r.stderr).toBe('');
    const v = await db.pool.query("SELECT count(*)::int AS n FROM violations WHERE source_id LIKE 'RCRA:%'");
    expect(v.rows[0].n).toBe(0);
    // The other files loaded.
    const f = await db.pool.query('SELECT count(*)::int AS n FROM violations');
    expect(f.rows[0].n).toBe(4);
  }, 60_000);

  it('a truncated zip fails with one clear line, exit 1, nothing written; a corrupt entry likewise', async () => {
    const dir = await writeDownload(download1());
    const zip = join(dir, 'echo_exporter.zip');
    truncateSync(zip, Math.floor(statSync(zip).size / 2));
    const r = await sync(['--from', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr.trim()).toMatch(/^facility: echo_exporter\.zip: not a readable zip archive \(truncated or corrupt\): /);
    const n = await db.pool.query('SELECT (SELECT count(*) FROM facilities)::int AS f, (SELECT count(*) FROM echo_sync_runs)::int AS runs');
    expect(n.rows[0]).toEqual({ f: 0, runs: 0 });

    // A damaged compressed body: the central directory is intact, the deflate stream is not.
    const dir2 = await writeDownload(download1());
    const zip2 = join(dir2, 'case_downloads.zip');
    const bytes = readFileSync(zip2);
    bytes.fill(0xff, 60, 200);
    writeFileSync(zip2, bytes);
    const r2 = await sync(['--from', dir2, '--only', 'cases']);
    expect(r2.code).toBe(1);
    expect(r2.stderr.trim().split('\n')).toHaveLength(1);
    expect(r2.stderr.trim()).toMatch(/^facility: case_downloads\.zip:CASE_ENFORCEMENTS\.csv: corrupt zip entry: /);
    const c = await db.pool.query('SELECT count(*)::int AS n FROM cases');
    expect(c.rows[0].n).toBe(0);
  }, 60_000);

  it('a second sync while one runs exits at once with a clear message', async () => {
    const holder = new pg.Client({ connectionString: db.database.url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(hashtext('facility:echo-sync'))");
      const r = await sync(['--from', d1]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe('facility: another ECHO sync is running (its lock is held); this one changed nothing');
      const n = await db.pool.query('SELECT count(*)::int AS n FROM facilities');
      expect(n.rows[0].n).toBe(0);
    } finally {
      await holder.end();
    }
  }, 60_000);
});

describe('sync-echo: sources and dry runs', () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    const zip = join(mkdtempSync(join(tmpdir(), 'echo-http-')), 'all.zip');
    await writeSingleZip(download1(), zip);
    const body = readFileSync(zip);
    server = createServer((req, res) => {
      const name = req.url?.replace('/files/echodownloads/', '') ?? '';
      if (req.url === '/files/echodownloads/all.zip') {
        res.writeHead(200, { 'content-type': 'application/zip', 'content-length': body.length });
        res.end(body);
      } else if (Object.keys(ZIPS).includes(name)) {
        res.writeHead(200, { 'content-type': 'application/zip' });
        res.end(readFileSync(join(d1, name)));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('an http source on loopback loads like the same zip on disk, as do the EPA zips as a list of URLs; a 404 is one clear line', async () => {
    const { summary } = await syncJson(['--from', `${base}/files/echodownloads/all.zip`]);
    expect(counts(summary)).toEqual(FIRST_LOAD);
    const n = await db.pool.query('SELECT count(*)::int AS n FROM facilities');
    expect(n.rows[0].n).toBe(4);
    // The EPA's zips as a comma-separated list of URLs, as the chart's CronJob passes them.
    await reset(db.pool);
    const urls = Object.keys(ZIPS).map((z) => `${base}/files/echodownloads/${z}`);
    const several = await sync(['--from', urls.join(','), '--rejected-rows-ok', '--json']);
    expect(several.code, several.stderr).toBe(0);
    expect(counts(JSON.parse(several.stdout) as SyncSummary)).toEqual(FIRST_LOAD);
    const r = await sync(['--from', `${base}/files/echodownloads/missing.zip`]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`facility: GET ${base}/files/echodownloads/missing.zip: HTTP 404`);
  }, 60_000);

  it('--dry-run reports what would change and writes nothing', async () => {
    const dry = await syncJson(['--from', d1, '--dry-run']);
    expect(dry.summary.dry_run).toBe(true);
    expect(counts(dry.summary)).toEqual(FIRST_LOAD);
    // Units see their own staged writes only; later units of a dry run see no facilities.
    const n = await db.pool.query(
      `SELECT (SELECT count(*) FROM facilities)::int AS f, (SELECT count(*) FROM violations)::int AS v, (SELECT count(*) FROM cases)::int AS c,
              (SELECT count(*) FROM outbox)::int AS o, (SELECT count(*) FROM echo_program_links)::int AS l, (SELECT count(*) FROM echo_sync_runs)::int AS r`,
    );
    expect(n.rows[0]).toEqual({ f: 0, v: 0, c: 0, o: 0, l: 0, r: 0 });

    await syncJson(['--from', d1]);
    const before = await stateOf(db.pool);
    const dry2 = await syncJson(['--from', d2, '--dry-run']);
    expect(dry2.summary.events).toEqual({ 'violation.new': 2, 'case.new': 1, 'case.updated': 1, 'facility.status_changed': 1 });
    expect(await stateOf(db.pool)).toEqual(before);
    expect(await outboxEvents(db.pool)).toEqual([]);
  }, 60_000);
});
