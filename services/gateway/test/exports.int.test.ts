import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { type ApiStack, eventually, startApiStack, type TestAccount } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Bulk export through the whole stack (gateway, usage, facility; real Postgres and Redis): 50,000
 * facilities stream in constant memory, are counted as 50 requests, resume after a cut with no gap
 * and no duplicate; Free accounts are refused.
 */
let stack: ApiStack;
let pro: TestAccount;
const ROWS = 50_000;

/** Peak resident set (VmHWM) of a process, in MiB, from /proc. */
function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
  return kb / 1024;
}

/**
 * Starts a process's peak resident set again from its resident set now (Linux: `5` to clear_refs),
 * so the peak read after the export is the export's, not the start-up's transient one.
 */
function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

async function exportText(path: string, key: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.gateway}${path}`, { headers: { 'x-api-key': key, ...headers } });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

beforeAll(async () => {
  // Without --enable-source-maps, as the chart runs the services: the memory measured is theirs.
  stack = await startApiStack({ label: 'gateway_exports', webhookSecretKey: randomBytes(32).toString('base64'), sourceMaps: false });
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    // 50,000 Wyoming facilities (direct SQL: the ingestion path is not what is tested here), and two elsewhere.
    await client.query(`
      INSERT INTO facility.facilities (id, registry_id, name, city, state, compliance_status, naics_codes, programs, latitude, longitude, updated_at)
      SELECT gen_random_uuid(), 'WY' || lpad(i::text, 10, '0'), 'Export Plant ' || i || ', "Unit" B', 'Casper', 'WY',
             'no_violation', ARRAY['211120'], ARRAY['CAA','CWA'], 42.8, -106.3, now()
        FROM generate_series(1, ${ROWS}) AS i`);
    await client.query(`
      INSERT INTO facility.facilities (id, registry_id, name, state, compliance_status, updated_at)
      VALUES (gen_random_uuid(), 'VT0000000001', 'Vermont One', 'VT', 'violation', now()),
             (gen_random_uuid(), 'VT0000000002', 'Vermont Two', 'VT', 'no_violation', now())`);
  } finally {
    await client.end();
  }
  pro = await stack.createAccount('pro');
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('GET /v1/exports/{kind}', () => {
  it('streams 50,000 facilities as NDJSON one page at a time, counted as 50 requests', async () => {
    const gatewayPid = stack.gateways[0]?.proc.pid as number;
    const facilityPid = stack.facility.proc.pid as number;
    const startup = { gateway: peakRssMiB(gatewayPid), facility: peakRssMiB(facilityPid) };
    resetPeakRss(gatewayPid);
    resetPeakRss(facilityPid);
    const idle = { gateway: peakRssMiB(gatewayPid), facility: peakRssMiB(facilityPid) };
    const res = await exportText('/v1/exports/facilities?state=WY', pro.apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    expect(res.headers.get('etag')).toBeNull();
    const lines = res.text.trimEnd().split('\n');
    expect(lines).toHaveLength(ROWS + 1);
    expect(JSON.parse(lines[ROWS] as string)).toEqual({ export: { complete: true, rows: ROWS, after: null } });
    const ids = lines.slice(0, ROWS).map((l) => (JSON.parse(l) as { id: string; state: string }).id);
    expect(new Set(ids).size).toBe(ROWS);
    expect([...ids].sort()).toEqual(ids); // id order: the resume point is the last id received
    expect(JSON.parse(lines[0] as string)).toMatchObject({ state: 'WY', programs: ['CAA', 'CWA'], naics_codes: ['211120'] });

    // Counted as one request per 1,000 rows: 50. The usage report shows it (and counts itself).
    expect(
      await eventually(
        () => stack.storedCount(pro.accountId),
        (n) => n === 50,
        10_000,
      ),
    ).toBe(50);
    const usage = await exportText('/v1/account/usage', pro.apiKey);
    expect(JSON.parse(usage.text).data.today.request_count).toBe(51);

    // Memory: one page (1,000 rows) is in flight by construction; the whole export is about 35 MB
    // of NDJSON, which a buffering implementation would hold (several times over, as rows, strings
    // and buffers) in one of these processes. The peak RSS during the export (VmHWM, reset just
    // before it: the start-up's own transient peak is not the export's) is printed and bounded at
    // 150 MiB for the gateway (docs/benchmarks.md, "Exports"). This is the gateway's first upstream
    // request, so the bound also covers the one-time cost of undici's HTTP parser (WebAssembly),
    // which the gateway compiles with Liftoff only (ADR 0015). Its young generation is node's
    // default; what holds its peak (121-127 MiB, idle 120-123) is the young collection it asks for
    // after each page, which frees the page's socket reads (export-walk.ts; without it, 159 MiB).
    // The facility, which reads and maps each row with its compliance profile of five objects,
    // runs on node's defaults, whose young generation may grow to two 16 MiB semi-spaces during
    // the export: its peak is 118-129 MiB, or 140-144 MiB in the runs where it grew (most of them;
    // idle 105-120), so its bound is 165 MiB, room for that young generation on top of the idle
    // process (ADR 0015, amended 2026-11-29; docs/benchmarks/history/2026-11-29.md). The
    // processes run with the chart's node flags (values.yaml, nodeOptions) and, like the chart's,
    // without source maps.
    const peak = { gateway: peakRssMiB(gatewayPid), facility: peakRssMiB(facilityPid) };
    console.log(
      `export peak RSS MiB: start-up ${JSON.stringify(startup)}, idle ${JSON.stringify(idle)}, during 50,000 rows ${JSON.stringify(peak)}`,
    );
    expect(peak.gateway).toBeLessThan(150);
    expect(peak.facility).toBeLessThan(165);
  });

  it('resumes a cut-off export from the last row received with no gap and no duplicate', async () => {
    const account = await stack.createAccount('pro');
    const controller = new AbortController();
    const res = await fetch(`${stack.gateway}/v1/exports/facilities?state=WY`, {
      headers: { 'x-api-key': account.apiKey },
      signal: controller.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let received = '';
    while (received.split('\n').length < 2_500) {
      const { value, done } = await reader.read();
      if (done) break;
      received += decoder.decode(value, { stream: true });
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    // The last line may be partial: keep the complete ones.
    const complete = received.slice(0, received.lastIndexOf('\n')).split('\n');
    const firstIds = complete.map((l) => (JSON.parse(l) as { id: string }).id);
    expect(firstIds.length).toBeGreaterThanOrEqual(2_499);
    expect(firstIds.length).toBeLessThan(ROWS);

    const rest = await exportText(`/v1/exports/facilities?state=WY&after=${firstIds[firstIds.length - 1]}`, account.apiKey);
    expect(rest.status).toBe(200);
    const restLines = rest.text.trimEnd().split('\n');
    const trailer = JSON.parse(restLines.pop() as string) as { export: { complete: boolean; rows: number } };
    expect(trailer.export).toEqual({ complete: true, rows: ROWS - firstIds.length, after: null });
    const restIds = restLines.map((l) => (JSON.parse(l) as { id: string }).id);
    const all = [...firstIds, ...restIds];
    expect(all).toHaveLength(ROWS);
    expect(new Set(all).size).toBe(ROWS);
    expect([...all].sort()).toEqual(all);
  });

  it('answers CSV with Accept: text/csv (header row, RFC 4180 quoting), refuses Free with 403 and bad filters with 400', async () => {
    const csv = await exportText('/v1/exports/facilities?state=vt', pro.apiKey, { accept: 'text/csv' });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const lines = csv.text.split('\r\n');
    expect(lines[0]).toBe(
      [
        'id,registry_id,name,street,city,state,zip,county,latitude,longitude,naics_codes,programs,compliance_status,last_inspection_date',
        'epa_region,sic_codes,major,program_status.caa,program_status.cwa,program_status.rcra',
        'compliance.quarters_with_noncompliance,compliance.programs_with_snc,compliance.snc,inspections.count,inspections.last_date',
        'enforcement.informal_actions,enforcement.formal_actions,enforcement.last_formal_action_date',
        'penalties.count,penalties.total_usd,penalties.last_amount_usd,penalties.last_date,data_as_of,updated_at',
      ].join(','),
    );
    expect(lines).toHaveLength(4); // header, two rows, and the empty string after the last CRLF
    expect(lines.slice(1, 3).map((l) => l.split(',')[1])).toEqual(expect.arrayContaining(['VT0000000001', 'VT0000000002']));

    const wy = await exportText('/v1/exports/facilities?state=WY&limit=1', pro.apiKey, { accept: 'text/csv' });
    expect(wy.status).toBe(400);
    expect(JSON.parse(wy.text).error.code).toBe('VALIDATION_ERROR');
    const quoted = await exportText('/v1/exports/facilities?state=WY&q=Plant%2049999%2C', pro.apiKey, { accept: 'text/csv' });
    expect(quoted.text.split('\r\n')[1]).toContain(',"Export Plant 49999, ""Unit"" B",');

    const free = await stack.createAccount('free');
    const refused = await exportText('/v1/exports/facilities?state=WY', free.apiKey);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.text)).toEqual({
      error: {
        code: 'FORBIDDEN',
        message: 'Bulk exports are available on the Pro tier and above. Upgrade the account to use them.',
        details: { required_tier: 'pro', tier: 'free' },
      },
    });

    for (const [query, field] of [
      ['state=ZZ', 'state'],
      ['after=not-a-uuid', 'after'],
      ['page_size=5', 'page_size'],
    ]) {
      const bad = await exportText(`/v1/exports/violations?${query}`, pro.apiKey);
      expect(bad.status, query).toBe(400);
      expect(JSON.parse(bad.text).error.details.fields.map((f: { field: string }) => f.field)).toEqual([field]);
    }
    // Violations and cases export the same way (none seeded: a complete, empty export).
    const none = await exportText('/v1/exports/cases', pro.apiKey);
    expect(none.text).toBe(`${JSON.stringify({ export: { complete: true, rows: 0, after: null } })}\n`);
  });
});
