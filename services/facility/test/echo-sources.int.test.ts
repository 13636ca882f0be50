import { createWriteStream, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPool, ManualClock, uuidSource } from '@fcd/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { generateDemoData } from '../src/demo/demo-data';
import type { Facility } from '../src/domain/model';
import type { EchoFileName } from '../src/echo/layouts';
import { type EchoSource, openSource } from '../src/echo/source';
import type { SourceFile } from '../src/echo/sources';
import { syncEcho } from '../src/echo/sync';
import type { SyncOptions } from '../src/echo/sync-types';
import { csvText, type Download, download1, download2, F, ZIPS } from './echo-fixtures';
import { accountHeader, buildTestApp, setupDb, silentLogger, type TestApp, type TestDb } from './helpers';

/**
 * GET /v1/sources on the facility service (the route the gateway forwards to): after syncs of
 * the ECHO fixtures, each file the syncs applied with its name, its zip entry's date, when it was
 * synced, its rows and its rejected rows; data_as_of of the facilities from the same record; an
 * empty list before any sync (demo data); files of a refused unit, an unfinished sync and a dry
 * run; errors in the documented envelope. The syncs run in-process with a manual clock, so every
 * timestamp is exact.
 */
let db: TestDb;
let t: TestApp;

const T1 = Date.parse('2026-11-27T06:00:00.000Z');
const T2 = Date.parse('2026-11-28T06:00:00.000Z');
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** Zip entry dates of the first download: one per file, all distinct, as EPA's files differ. */
const DATES1: Partial<Record<EchoFileName, string>> = {
  'ECHO_EXPORTER.csv': '2026-11-22T23:41:12.000Z',
  'ICIS-AIR_FACILITIES.csv': '2026-11-23T02:10:00.000Z',
  'ICIS-AIR_VIOLATION_HISTORY.csv': '2026-11-23T02:10:30.000Z',
  'RCRA_FACILITIES.csv': '2026-11-21T04:00:00.000Z',
  'RCRA_VIOLATIONS.csv': '2026-11-21T04:00:02.000Z',
  'CASE_ENFORCEMENTS.csv': '2026-11-16T11:05:00.000Z',
  'CASE_FACILITIES.csv': '2026-11-16T11:05:04.000Z',
  'CASE_ENFORCEMENT_CONCLUSIONS.csv': '2026-11-16T11:05:06.000Z',
  'CASE_PENALTIES.csv': '2026-11-16T11:05:08.000Z',
};
/**
 * npdes_downloads.zip is written with MS-DOS times only (no extended timestamp): its entry's date
 * has no zone and is read as UTC. The Date is built from local fields so the DOS fields written are
 * 2026-11-20 03:04:06 whatever the test's time zone.
 */
const NPDES_DOS_LOCAL = new Date(2026, 10, 20, 3, 4, 6);
const NPDES_DOS_AS_UTC = '2026-11-20T03:04:06.000Z';

/** Writes a download as EPA's zips, each entry with its own date. */
async function writeDatedDownload(
  d: Download,
  dates: Partial<Record<EchoFileName, string>>,
  overrides: Partial<Record<EchoFileName, string>> = {},
) {
  const out = mkdtempSync(join(tmpdir(), 'echo-sources-'));
  for (const [zipName, files] of Object.entries(ZIPS)) {
    const present = files.filter((f) => d[f] !== undefined);
    if (present.length === 0) continue;
    const zip = new yazl.ZipFile();
    const dos = zipName === 'npdes_downloads.zip';
    for (const f of present) {
      const mtime = dos ? NPDES_DOS_LOCAL : new Date(dates[f] as string);
      zip.addBuffer(Buffer.from(overrides[f] ?? csvText(f, d[f] ?? [])), f, { mtime, forceDosTimestamp: dos });
    }
    zip.end();
    await new Promise<void>((resolve, reject) => {
      zip.outputStream
        .pipe(createWriteStream(join(out, zipName)))
        .once('close', () => resolve())
        .once('error', reject);
    });
  }
  return out;
}

/** One in-process sync with the manual clock: each unit is applied at the clock's time, then the clock moves a minute on. */
async function sync(from: string, clock: ManualClock, extra: Partial<SyncOptions> = {}) {
  const source: EchoSource = await openSource(from);
  try {
    return await syncEcho({
      pool: db.pool,
      clock,
      ids: uuidSource,
      logger: silentLogger,
      retry: (fn) => fn(),
      ensureLock: async () => undefined,
      source,
      sourceName: from,
      onUnitApplied: () => clock.advance(MINUTE),
      ...extra,
    });
  } finally {
    source.close();
  }
}

async function get<T>(url: string) {
  const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
  return { status: res.statusCode, body: res.json() as T, headers: res.headers };
}

const sources = async () => {
  const res = await get<{ data: SourceFile[] }>('/v1/sources');
  expect(res.status).toBe(200);
  return res.body.data;
};

/** An expected entry: rows and rejected rows as the fixtures have them (test/echo-sync.int.test.ts counts the same). */
function entry(name: EchoFileName, archive: string, fileDate: string, syncedAt: number, rows: number, rejected: number): SourceFile {
  return { name, archive, file_date: fileDate, synced_at: iso(syncedAt), rows, rejected_rows: rejected };
}

beforeAll(async () => {
  db = await setupDb('echo_sources');
  t = await buildTestApp(db.pool);
});

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('GET /v1/sources', () => {
  it('is an empty list before any ECHO sync, also with demo data in the database', async () => {
    expect(await get('/v1/sources')).toMatchObject({ status: 200, body: { data: [] } });
    const demo = generateDemoData({ facilities: 5, seed: 'sources-test' });
    const report = await t.ingestion.ingestAll({
      facilities: demo.facilities.map((raw, index) => ({ ref: { index }, raw: { ...raw } })),
      violations: [],
      cases: [],
    });
    expect(report.errors).toEqual([]);
    expect(await get('/v1/sources')).toEqual(expect.objectContaining({ status: 200, body: { data: [] } }));
    await db.pool.query('TRUNCATE facilities CASCADE');
  });

  it('after a first load: each file applied, its zip entry date, synced_at of its unit, rows and rejected rows', async () => {
    const clock = new ManualClock(T1);
    await sync(await writeDatedDownload(download1(), DATES1), clock);
    // The first load: links at T1, then the facilities and the three violation units in one
    // transaction (T1 + 1 min), then the cases (four callbacks later: T1 + 5 min).
    expect(await sources()).toEqual([
      entry('CASE_ENFORCEMENTS.csv', 'case_downloads.zip', '2026-11-16T11:05:00.000Z', T1 + 5 * MINUTE, 3, 1),
      entry('CASE_ENFORCEMENT_CONCLUSIONS.csv', 'case_downloads.zip', '2026-11-16T11:05:06.000Z', T1 + 5 * MINUTE, 2, 0),
      entry('CASE_FACILITIES.csv', 'case_downloads.zip', '2026-11-16T11:05:04.000Z', T1 + 5 * MINUTE, 4, 1),
      entry('CASE_PENALTIES.csv', 'case_downloads.zip', '2026-11-16T11:05:08.000Z', T1 + 5 * MINUTE, 2, 0),
      entry('ECHO_EXPORTER.csv', 'echo_exporter.zip', '2026-11-22T23:41:12.000Z', T1 + MINUTE, 6, 2),
      entry('ICIS-AIR_FACILITIES.csv', 'ICIS-AIR_downloads.zip', '2026-11-23T02:10:00.000Z', T1, 2, 0),
      entry('ICIS-AIR_VIOLATION_HISTORY.csv', 'ICIS-AIR_downloads.zip', '2026-11-23T02:10:30.000Z', T1 + MINUTE, 4, 2),
      entry('NPDES_SE_VIOLATIONS.csv', 'npdes_downloads.zip', NPDES_DOS_AS_UTC, T1 + MINUTE, 2, 0),
      entry('RCRA_VIOLATIONS.csv', 'rcra_downloads.zip', '2026-11-21T04:00:02.000Z', T1 + MINUTE, 3, 1),
    ]);
  });

  it("data_as_of of each facility the sync wrote is its ECHO_EXPORTER.csv entry's synced_at", async () => {
    const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facilities ORDER BY registry_id');
    expect(rows).toHaveLength(4);
    for (const { id } of rows) {
      const f = await get<{ data: Facility }>(`/v1/facilities/${id}`);
      expect(f.body.data.data_as_of).toBe(iso(T1 + MINUTE));
    }
  });

  it('after the next download: every entry is the new one; data_as_of moves only for the facility that changed', async () => {
    const dates2 = Object.fromEntries(Object.entries(DATES1).map(([k, v]) => [k, iso(Date.parse(v) + 7 * 24 * 60 * MINUTE)]));
    const clock = new ManualClock(T2);
    await sync(await writeDatedDownload(download2(), dates2), clock);
    const week = (f: EchoFileName) => dates2[f] as string;
    // Not a first load: one transaction per unit, in order links, facilities, icis-air, rcra, npdes, cases.
    expect(await sources()).toEqual([
      entry('CASE_ENFORCEMENTS.csv', 'case_downloads.zip', week('CASE_ENFORCEMENTS.csv'), T2 + 5 * MINUTE, 4, 1),
      entry('CASE_ENFORCEMENT_CONCLUSIONS.csv', 'case_downloads.zip', week('CASE_ENFORCEMENT_CONCLUSIONS.csv'), T2 + 5 * MINUTE, 2, 0),
      entry('CASE_FACILITIES.csv', 'case_downloads.zip', week('CASE_FACILITIES.csv'), T2 + 5 * MINUTE, 5, 1),
      entry('CASE_PENALTIES.csv', 'case_downloads.zip', week('CASE_PENALTIES.csv'), T2 + 5 * MINUTE, 2, 0),
      entry('ECHO_EXPORTER.csv', 'echo_exporter.zip', week('ECHO_EXPORTER.csv'), T2 + MINUTE, 6, 2),
      entry('ICIS-AIR_FACILITIES.csv', 'ICIS-AIR_downloads.zip', week('ICIS-AIR_FACILITIES.csv'), T2, 2, 0),
      entry('ICIS-AIR_VIOLATION_HISTORY.csv', 'ICIS-AIR_downloads.zip', week('ICIS-AIR_VIOLATION_HISTORY.csv'), T2 + 2 * MINUTE, 5, 2),
      entry('NPDES_SE_VIOLATIONS.csv', 'npdes_downloads.zip', NPDES_DOS_AS_UTC, T2 + 4 * MINUTE, 2, 0),
      entry('RCRA_VIOLATIONS.csv', 'rcra_downloads.zip', week('RCRA_VIOLATIONS.csv'), T2 + 3 * MINUTE, 3, 1),
    ]);
    const { rows } = await db.pool.query<{ registry_id: string; data_as_of: Date }>(
      'SELECT registry_id, data_as_of FROM facilities ORDER BY registry_id',
    );
    // download2 changes only the plating shop's row; the others keep the time of the sync that wrote them.
    expect(Object.fromEntries(rows.map((r) => [r.registry_id, r.data_as_of.toISOString()]))).toEqual({
      [F.plating]: iso(T2 + MINUTE),
      [F.alafab]: iso(T1 + MINUTE),
      [F.riverside]: iso(T1 + MINUTE),
      [F.acme]: iso(T1 + MINUTE),
    });
  });

  it('a file whose unit is refused keeps the entry of the last sync that applied it; the others move on', async () => {
    const before = await sources();
    const T3 = Date.parse('2026-11-29T06:00:00.000Z');
    const badHeader = `${csvText('RCRA_VIOLATIONS.csv', []).replace('DATE_VIOLATION_DETERMINED', 'DATE_DETERMINED')}`;
    const dir = await writeDatedDownload(download2(), DATES1, { 'RCRA_VIOLATIONS.csv': badHeader });
    const summary = await sync(dir, new ManualClock(T3));
    expect(summary.files.find((f) => f.file === 'RCRA_VIOLATIONS.csv')?.error).toContain('header has no column DATE_VIOLATION_DETERMINED');
    const after = await sources();
    expect(after.find((s) => s.name === 'RCRA_VIOLATIONS.csv')).toEqual(before.find((s) => s.name === 'RCRA_VIOLATIONS.csv'));
    expect(after.filter((s) => s.name !== 'RCRA_VIOLATIONS.csv').map((s) => [s.name, s.file_date, s.synced_at])).toEqual([
      ['CASE_ENFORCEMENTS.csv', DATES1['CASE_ENFORCEMENTS.csv'], iso(T3 + 5 * MINUTE)],
      ['CASE_ENFORCEMENT_CONCLUSIONS.csv', DATES1['CASE_ENFORCEMENT_CONCLUSIONS.csv'], iso(T3 + 5 * MINUTE)],
      ['CASE_FACILITIES.csv', DATES1['CASE_FACILITIES.csv'], iso(T3 + 5 * MINUTE)],
      ['CASE_PENALTIES.csv', DATES1['CASE_PENALTIES.csv'], iso(T3 + 5 * MINUTE)],
      ['ECHO_EXPORTER.csv', DATES1['ECHO_EXPORTER.csv'], iso(T3 + MINUTE)],
      ['ICIS-AIR_FACILITIES.csv', DATES1['ICIS-AIR_FACILITIES.csv'], iso(T3)],
      ['ICIS-AIR_VIOLATION_HISTORY.csv', DATES1['ICIS-AIR_VIOLATION_HISTORY.csv'], iso(T3 + 2 * MINUTE)],
      ['NPDES_SE_VIOLATIONS.csv', NPDES_DOS_AS_UTC, iso(T3 + 4 * MINUTE)],
    ]);
  });

  it('a sync stopped part-way lists the files of the units it committed, and only those; a dry run lists nothing', async () => {
    const before = await sources();
    const T4 = Date.parse('2026-11-30T06:00:00.000Z');
    const clock = new ManualClock(T4);
    const dir = await writeDatedDownload(download2(), DATES1);
    await expect(
      sync(dir, clock, {
        onUnitApplied: (unit) => {
          clock.advance(MINUTE);
          if (unit === 'facilities') throw new Error('stopped after the facilities unit');
        },
      }),
    ).rejects.toThrow('stopped after the facilities unit');
    const after = await sources();
    const moved = after
      .filter((s) => JSON.stringify(s) !== JSON.stringify(before.find((b) => b.name === s.name)))
      .map((s) => [s.name, s.synced_at]);
    expect(moved).toEqual([
      ['ECHO_EXPORTER.csv', iso(T4 + MINUTE)],
      ['ICIS-AIR_FACILITIES.csv', iso(T4)],
    ]);
    const dry = await sync(dir, new ManualClock(Date.parse('2026-12-01T06:00:00.000Z')), { dryRun: true });
    expect(dry.dry_run).toBe(true);
    expect(await sources()).toEqual(after);
  });

  it('reads a plain CSV file with its modification time as the file date and no archive', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'echo-sources-csv-'));
    const path = join(dir, 'ICIS-AIR_FACILITIES.csv');
    writeFileSync(path, csvText('ICIS-AIR_FACILITIES.csv', download1()['ICIS-AIR_FACILITIES.csv'] ?? []));
    const mtime = new Date('2026-11-25T17:30:45.000Z');
    utimesSync(path, mtime, mtime);
    const T5 = Date.parse('2026-12-02T06:00:00.000Z');
    await sync(dir, new ManualClock(T5));
    expect((await sources()).find((s) => s.name === 'ICIS-AIR_FACILITIES.csv')).toEqual({
      name: 'ICIS-AIR_FACILITIES.csv',
      archive: null,
      file_date: '2026-11-25T17:30:45.000Z',
      synced_at: iso(T5),
      rows: 2,
      rejected_rows: 0,
    });
  });
});

describe('GET /v1/sources: errors in the documented envelope', () => {
  it('an unknown query parameter is 400 VALIDATION_ERROR naming it', async () => {
    const res = await get<{ error: { code: string; details: { fields: Array<{ field: string }> } } }>('/v1/sources?limit=5');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.fields.map((f) => f.field)).toEqual(['limit']);
  });

  it('another method is 405 METHOD_NOT_ALLOWED with Allow: GET, HEAD', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/sources',
      headers: { 'x-fcd-account': accountHeader('POST', '/v1/sources') },
    });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(res.json()).toMatchObject({ error: { code: 'METHOD_NOT_ALLOWED' } });
  });

  it('without the gateway-signed account header: 401 UNAUTHORIZED', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/sources' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
  });

  it('Postgres unreachable: 503 SERVICE_UNAVAILABLE with Retry-After', async () => {
    const dead = createPool({
      connectionString: 'postgres://postgres@127.0.0.1:1/none',
      max: 1,
      applicationName: 'test-dead',
      logger: silentLogger,
    });
    const down = await buildTestApp(dead);
    try {
      const res = await down.app.inject({
        method: 'GET',
        url: '/v1/sources',
        headers: { 'x-fcd-account': accountHeader('GET', '/v1/sources') },
      });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.json()).toMatchObject({ error: { code: 'SERVICE_UNAVAILABLE' } });
    } finally {
      await down.app.close();
      await dead.end();
    }
  });
});
