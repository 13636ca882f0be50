import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { type ApiStack, repoRoot, startApiStack, type TestAccount } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { download1, writeDownload } from '../../facility/test/echo-fixtures';

/**
 * GET /v1/sources through the gateway (table.ts routes it to the facility service): authenticated,
 * counted as one request on every tier, and answered with the files the last `sync-echo` of the
 * ECHO test fixtures applied. The fixture zips date every entry 2026-11-01T00:00:00Z
 * (test/echo-fixtures.ts); services/facility/test/echo-sources.int.test.ts covers distinct dates,
 * refused units and exact sync times with a manual clock.
 */
const execFileP = promisify(execFile);
const facilityCli = resolve(repoRoot, 'services/facility/dist/cli.js');
const FIXTURE_DATE = '2026-11-01T00:00:00.000Z';

let stack: ApiStack;
let free: TestAccount;
let pro: TestAccount;
let syncStarted: number;
let syncEnded: number;

async function call(path: string, apiKey: string | undefined, method = 'GET') {
  const res = await fetch(`${stack.gateway}${path}`, { method, headers: apiKey ? { 'x-api-key': apiKey } : {} });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as any) : undefined };
}

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_sources', webhookSecretKey: randomBytes(32).toString('base64') });
  free = await stack.createAccount('free');
  pro = await stack.createAccount('pro');
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('GET /v1/sources through the gateway', () => {
  it('before any ECHO sync: 200 with an empty list', async () => {
    const res = await call('/v1/sources', pro.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [] });
  });

  it('after a sync of the ECHO fixtures: each file, its zip entry date, synced_at, rows and rejected rows', async () => {
    const dir = await writeDownload(download1());
    syncStarted = Date.now();
    // Exit 2: the fixtures' rejectable rows were rejected (the facility tests check them).
    const run = await execFileP(process.execPath, [facilityCli, 'sync-echo', '--from', dir], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: stack.db.url, ...stack.db.env, CLI_RETRY_FOR: '5s' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );
    syncEnded = Date.now();
    expect(run.code, run.stderr).toBe(2);

    const res = await call('/v1/sources', pro.apiKey);
    expect(res.status).toBe(200);
    const data = res.body.data as Array<{ name: string; synced_at: string }>;
    // [name, archive, rows, rejected_rows]; every entry dated as its zip entry.
    expect(data.map((s: any) => [s.name, s.archive, s.rows, s.rejected_rows])).toEqual([
      ['CASE_ENFORCEMENTS.csv', 'case_downloads.zip', 3, 1],
      ['CASE_ENFORCEMENT_CONCLUSIONS.csv', 'case_downloads.zip', 2, 0],
      ['CASE_FACILITIES.csv', 'case_downloads.zip', 4, 1],
      ['CASE_PENALTIES.csv', 'case_downloads.zip', 2, 0],
      ['ECHO_EXPORTER.csv', 'echo_exporter.zip', 6, 2],
      ['ICIS-AIR_FACILITIES.csv', 'ICIS-AIR_downloads.zip', 2, 0],
      ['ICIS-AIR_VIOLATION_HISTORY.csv', 'ICIS-AIR_downloads.zip', 4, 2],
      ['NPDES_SE_VIOLATIONS.csv', 'npdes_downloads.zip', 2, 0],
      ['RCRA_VIOLATIONS.csv', 'rcra_downloads.zip', 3, 1],
    ]);
    expect(new Set(data.map((s: any) => s.file_date))).toEqual(new Set([FIXTURE_DATE]));
    expect(data.every((s: any) => Object.keys(s).sort().join() === 'archive,file_date,name,rejected_rows,rows,synced_at')).toBe(true);

    // synced_at: the time of each unit's transaction, as the database recorded it, within the run.
    const db = new pg.Pool({ connectionString: stack.db.url, max: 1 });
    try {
      const { rows } = await db.query<{ file: string; synced_at: Date }>(
        'SELECT file, synced_at FROM facility.echo_sync_sources ORDER BY file',
      );
      expect(data.map((s) => [s.name, s.synced_at])).toEqual(rows.map((r) => [r.file, r.synced_at.toISOString()]));
    } finally {
      await db.end();
    }
    for (const s of data) {
      expect(Date.parse(s.synced_at)).toBeGreaterThanOrEqual(syncStarted - 1000);
      expect(Date.parse(s.synced_at)).toBeLessThanOrEqual(syncEnded);
    }

    // Each facility's data_as_of is the ECHO_EXPORTER.csv entry's synced_at (the sync wrote them all).
    const exporter = data.find((s) => s.name === 'ECHO_EXPORTER.csv') as { synced_at: string };
    const facilities = await call('/v1/facilities?limit=100', pro.apiKey);
    expect(facilities.body.data.length).toBe(4);
    expect(new Set(facilities.body.data.map((f: { data_as_of: string }) => f.data_as_of))).toEqual(new Set([exporter.synced_at]));
  }, 60_000);

  it('every tier reads it, and it is counted as one request', async () => {
    const proAnswer = await call('/v1/sources', pro.apiKey);
    const first = await call('/v1/sources', free.apiKey);
    expect(first.status).toBe(200);
    expect(first.body).toEqual(proAnswer.body);
    expect(first.headers.get('x-ratelimit-limit')).toBe('100');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('99');
    expect(first.headers.get('cache-control')).toBe('private, max-age=60');
    const usage = await call('/v1/account/usage', free.apiKey);
    // The sources read and the usage call itself.
    expect(usage.body.data.today.request_count).toBe(2);
  });

  it('refuses a missing key with 401 UNAUTHORIZED (no rate-limit headers), and answers errors in the envelope', async () => {
    const anonymous = await call('/v1/sources', undefined);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('UNAUTHORIZED');
    expect(anonymous.headers.get('x-ratelimit-limit')).toBeNull();

    const unknown = await call('/v1/sources?state=TX', pro.apiKey);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe('VALIDATION_ERROR');
    expect(unknown.body.error.details.fields.map((f: { field: string }) => f.field)).toEqual(['state']);

    const post = await call('/v1/sources', pro.apiKey, 'POST');
    expect(post.status).toBe(405);
    expect(post.body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect(post.headers.get('allow')).toContain('GET');
  });
});
