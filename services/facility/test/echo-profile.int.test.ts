import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { repoRoot } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Facility } from '../src/domain/model';
import { FACILITY_COLUMNS, type FacilityRow, toFacility } from '../src/store/rows';
import { download1, F, writeDownload } from './echo-fixtures';
import { setupDb, type TestDb } from './helpers';

/**
 * The compliance profile after a sync of the ECHO fixtures (test/echo-fixtures.ts): each field
 * of each fixture facility equals its ECHO Exporter cells. The river plant has every cell, ALAFAB
 * some (cents, a one-digit region), ACME none (empty cells: null, 0 for counts, false for flags).
 */
const cli = resolve(repoRoot, 'services/facility/dist/cli.js');
let db: TestDb;
let byId: Record<string, Facility>;
let syncedFrom: number;

beforeAll(async () => {
  db = await setupDb('echo_profile');
  const dir = await writeDownload(download1());
  syncedFrom = Date.now();
  const run = spawnSync(process.execPath, [cli, 'sync-echo', '--from', dir], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.database.url, CLI_RETRY_FOR: '5s' },
    encoding: 'utf8',
  });
  // 2: the fixtures' bad rows were rejected (test/echo-sync.int.test.ts checks them).
  expect(run.status, run.stderr).toBe(2);
  const { rows } = await db.pool.query<FacilityRow>(`SELECT ${FACILITY_COLUMNS} FROM facilities`);
  byId = Object.fromEntries(rows.map((r) => [r.registry_id, toFacility(r)]));
}, 120_000);

afterAll(async () => {
  await db?.close();
});

const f = (registryId: string): Facility => byId[registryId] as Facility;

describe('sync-echo: the facility profile equals the ECHO Exporter cells', () => {
  it('epa_region: FAC_EPA_REGION with two digits; empty is null', () => {
    expect([f(F.plating).epa_region, f(F.alafab).epa_region, f(F.riverside).epa_region, f(F.acme).epa_region]).toEqual([
      '01',
      '04',
      '06',
      null,
    ]);
  });

  it('sic_codes: FAC_SIC_CODES split and sorted; empty is []', () => {
    expect([f(F.plating).sic_codes, f(F.riverside).sic_codes, f(F.acme).sic_codes]).toEqual([['3471'], ['4941', '4952'], []]);
  });

  it('major: FAC_MAJOR_FLAG Y is true; N and empty are false', () => {
    expect([f(F.riverside).major, f(F.plating).major, f(F.acme).major]).toEqual([true, false, false]);
  });

  it('program_status: CAA_/CWA_/RCRA_COMPLIANCE_STATUS as written; empty is null', () => {
    expect(f(F.plating).program_status).toEqual({ caa: 'No Violation Identified', cwa: null, rcra: null });
    expect(f(F.alafab).program_status).toEqual({ caa: null, cwa: null, rcra: 'Violation Identified' });
    expect(f(F.riverside).program_status).toEqual({ caa: null, cwa: 'Significant Violation', rcra: null });
    expect(f(F.acme).program_status).toEqual({ caa: null, cwa: null, rcra: null });
  });

  it('compliance: FAC_QTRS_WITH_NC, FAC_PROGRAMS_WITH_SNC, FAC_SNC_FLG; empty counts are 0, an empty flag false', () => {
    expect(f(F.riverside).compliance).toEqual({ quarters_with_noncompliance: 7, programs_with_snc: 1, snc: true });
    expect(f(F.alafab).compliance).toEqual({ quarters_with_noncompliance: 3, programs_with_snc: 0, snc: false });
    expect(f(F.acme).compliance).toEqual({ quarters_with_noncompliance: 0, programs_with_snc: 0, snc: false });
  });

  it('inspections: FAC_INSPECTION_COUNT and FAC_DATE_LAST_INSPECTION as an ISO date; empty is 0 and null', () => {
    expect(f(F.riverside).inspections).toEqual({ count: 6, last_date: '2024-09-30' });
    expect(f(F.plating).inspections).toEqual({ count: 0, last_date: '2023-04-12' });
    expect(f(F.alafab).inspections).toEqual({ count: 2, last_date: null });
    expect(f(F.acme).inspections).toEqual({ count: 0, last_date: null });
  });

  it('enforcement: FAC_INFORMAL_COUNT, FAC_FORMAL_ACTION_COUNT, FAC_DATE_LAST_FORMAL_ACTION; empty is 0 and null', () => {
    expect(f(F.riverside).enforcement).toEqual({ informal_actions: 2, formal_actions: 1, last_formal_action_date: '2024-11-15' });
    expect(f(F.alafab).enforcement).toEqual({ informal_actions: 1, formal_actions: 0, last_formal_action_date: null });
    expect(f(F.acme).enforcement).toEqual({ informal_actions: 0, formal_actions: 0, last_formal_action_date: null });
  });

  it('penalties: FAC_PENALTY_COUNT, FAC_TOTAL_PENALTIES, FAC_LAST_PENALTY_AMT in dollars, FAC_DATE_LAST_PENALTY; empty is 0 and null', () => {
    expect(f(F.riverside).penalties).toEqual({ count: 1, total_usd: 187500, last_amount_usd: 187500, last_date: '2025-08-19' });
    expect(f(F.alafab).penalties).toEqual({ count: 2, total_usd: 12500.5, last_amount_usd: 2500.25, last_date: '2022-03-01' });
    expect(f(F.acme).penalties).toEqual({ count: 0, total_usd: null, last_amount_usd: null, last_date: null });
  });

  it('data_as_of: the time of the sync that wrote the row, the same for every row it wrote', () => {
    const stamps = new Set(Object.values(byId).map((x) => x.data_as_of));
    expect(stamps.size).toBe(1);
    const at = Date.parse([...stamps][0] as string);
    expect(at).toBeGreaterThanOrEqual(syncedFrom - 1000);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(f(F.plating).data_as_of).toBe(f(F.plating).updated_at);
  });
});
