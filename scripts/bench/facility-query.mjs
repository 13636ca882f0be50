#!/usr/bin/env node
// Facility filter and sort benchmark: GET /v1/facilities?…&limit=100 on 1,000,000 facilities
// (BENCH_FQ_FACILITIES) with each filter and each sort of docs/api.md ("Filters and sorting"), and
// one page deep into a walk of each sort (the cursor after BENCH_FQ_DEEP_PAGES pages, default 5),
// against the facility service directly (the gateway's signed header; metering is the usage
// benchmark's), each beside the bare SQL the service issues for it: the same statement and values
// (scripts/bench/facility-query-sql.ts captures them from the store's own listFacilities) run by
// pgbench (extended protocol, the values as untyped parameters as node-postgres sends them) for the
// same duration at the same concurrency. Warm: one warm-up run of each side first.
//
// The data: one INSERT … SELECT generate_series into a private database migrated by the facility
// CLI, with a skewed spread of cities, counties, ZIPs, codes, flags, counts, amounts and dates (a
// fraction of each null or empty), then ANALYZE. Targets (docs/benchmarks.md, "Current figures"):
// p99 < 50 ms for every page of 100, and requests/s ≥ 0.5 × the bare SQL's transactions/s.
// Also the facility service's CPU µs per request over each measured run (/proc/<pid>/stat). Writes
// bench-results/facility-query-<date>.json with each row's figures and EXPLAIN (ANALYZE, BUFFERS) of
// its statement.
//
// env: BENCH_FQ_FACILITIES (default 1,000,000), BENCH_FQ_CONNECTIONS (HTTP connections and pgbench
// clients, default 10: the facility service's pool size), BENCH_FQ_DURATION (s per measured run,
// default 5), BENCH_FQ_WARMUP (s, default 2), BENCH_FQ_ONLY (comma-separated row names), DATABASE_URL.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { cpuSeconds, usPerUnit } from './cpu.mjs';
import { benchDatabase, facilityCli, machine, root, signAccount, startFacility, stopAll, writeResult } from './http-bench.mjs';

const FACILITIES = Number(process.env.BENCH_FQ_FACILITIES ?? 1_000_000);
const CONNECTIONS = Number(process.env.BENCH_FQ_CONNECTIONS ?? 10);
const DURATION = Number(process.env.BENCH_FQ_DURATION ?? 5);
const WARMUP = Number(process.env.BENCH_FQ_WARMUP ?? 2);
const DEEP_PAGES = Number(process.env.BENCH_FQ_DEEP_PAGES ?? 5);
const ONLY = process.env.BENCH_FQ_ONLY ? new Set(process.env.BENCH_FQ_ONLY.split(',')) : undefined;
const LIMIT = 100;
const TARGET = { p99Ms: 50, ratio: 0.5 };

/**
 * 1,000,000 facilities in one statement. Skewed picks (random()^k) make a few cities, counties and
 * ZIPs common, as in ECHO; the named values the filters ask for are among the common ones.
 */
const FILL = `
SELECT setseed(0.37);
INSERT INTO facilities (id, registry_id, name, street, city, state, zip, county, latitude, longitude,
  naics_codes, programs, compliance_status, last_inspection_date, created_at, updated_at, epa_region,
  sic_codes, major, program_status, compliance, inspections, enforcement, penalties, data_as_of)
SELECT gen_random_uuid(), '110' || lpad(g::text, 9, '0'),
  (ARRAY['Gulf','Acme','Lone Star','Valley','River','Summit','Pioneer','Eagle','Liberty','Delta','Coastal','Prairie'])[1 + floor(random() * 12)::int]
    || ' ' || (ARRAY['Refinery','Chemical Plant','Power Station','Landfill','Steel Works','Water Plant','Terminal','Mill'])[1 + floor(random() * 8)::int]
    || ' ' || g,
  g || ' Industrial Pkwy',
  CASE WHEN random() < 0.02 THEN NULL ELSE
    (ARRAY['Houston','Chicago','Los Angeles','Phoenix','Baton Rouge','Cleveland','Detroit','Pittsburgh','Denver','Tulsa',
           'Memphis','Newark','Toledo','Mobile','Gary','Beaumont','Akron','Dayton','Fresno','Omaha'])[1 + c % 20]
    || CASE WHEN c < 20 THEN '' ELSE ' ' || (c / 20) END END,
  (ARRAY['TX','CA','OH','PA','IL','LA','MI','NY','FL','IN','GA','NC','NJ','WI','MN','MO','AL','KY','TN','OK',
         'IA','KS','SC','VA','WA','OR','CO','AZ','MS','AR','NE','UT','NV','NM','WV','ID','ME','NH','MT','SD',
         'ND','WY','VT','DE','RI','CT','MA','MD','HI','AK'])[1 + floor(50 * random() ^ 1.5)::int],
  CASE WHEN random() < 0.03 THEN NULL ELSE
    lpad((10000 + floor(89999 * random() ^ 2)::int)::text, 5, '0')
    || CASE WHEN random() < 0.2 THEN '-' || lpad(floor(random() * 10000)::int::text, 4, '0') ELSE '' END END,
  CASE WHEN random() < 0.05 THEN NULL ELSE
    (ARRAY['Harris','Cook','Los Angeles','Maricopa','East Baton Rouge','Cuyahoga','Wayne','Allegheny','Denver','Tulsa',
           'Shelby','Essex','Lucas','Mobile','Lake','Jefferson','Summit','Montgomery','Fresno','Douglas'])[1 + k % 20]
    || CASE WHEN k < 20 THEN '' ELSE ' ' || (k / 20) END END,
  CASE WHEN geo THEN 25 + random() * 24 END, CASE WHEN geo THEN -124 + random() * 57 END,
  CASE WHEN random() < 0.05 THEN '{}'::text[] ELSE
    (SELECT array_agg(DISTINCT (ARRAY['325110','325199','325211','325180','324110','221112','221118','562211','562212',
            '331110','331313','212111','211120','327310','322121','336111','311611','486210','424710','332813'])[1 + floor(20 * random() ^ 1.3)::int])
       FROM generate_series(1, 1 + (g % 3)) WHERE g > 0) END,
  CASE g % 4 WHEN 0 THEN ARRAY['CAA','CWA'] WHEN 1 THEN ARRAY['CAA','RCRA'] WHEN 2 THEN ARRAY['CWA','RCRA'] ELSE ARRAY['RCRA','SDWA'] END,
  CASE WHEN snc THEN 'significant_violation' WHEN qnc > 0 THEN 'violation' ELSE 'no_violation' END,
  insp, now() - interval '5 years', now() - random() * interval '3 years',
  CASE WHEN random() < 0.03 THEN NULL ELSE lpad((1 + floor(random() * 10)::int)::text, 2, '0') END,
  CASE WHEN random() < 0.1 THEN '{}'::text[] ELSE
    (SELECT array_agg(DISTINCT (ARRAY['2869','2911','4911','4953','3312','2821','2819','1311','3241','2621',
            '3711','2011','4922','5171','3471'])[1 + floor(15 * random() ^ 1.3)::int])
       FROM generate_series(1, 1 + (g % 2)) WHERE g > 0) END,
  random() < 0.08,
  jsonb_build_object('caa', CASE WHEN snc THEN 'High Priority Violation' END, 'cwa', CASE WHEN qnc > 2 THEN 'Violation Identified' END, 'rcra', NULL),
  jsonb_build_object('quarters_with_noncompliance', qnc, 'programs_with_snc', CASE WHEN snc THEN 1 ELSE 0 END, 'snc', snc),
  jsonb_build_object('count', CASE WHEN insp IS NULL THEN 0 ELSE 1 + floor(random() * 12)::int END, 'last_date', insp::text),
  jsonb_build_object('informal_actions', floor(random() * 4)::int, 'formal_actions', CASE WHEN pen THEN 1 ELSE 0 END,
                     'last_formal_action_date', CASE WHEN pen THEN pdate::text END),
  jsonb_build_object('count', CASE WHEN pen THEN 1 + floor(random() * 3)::int ELSE 0 END,
                     'total_usd', CASE WHEN pen THEN round(500 * exp(random() * 8)) END,
                     'last_amount_usd', CASE WHEN pen THEN round(500 * exp(random() * 6)) END,
                     'last_date', CASE WHEN pen THEN pdate::text END),
  now() - interval '1 day'
FROM (
  SELECT g, floor(2000 * random() ^ 2)::int AS c, floor(3000 * random() ^ 2)::int AS k, random() < 0.95 AS geo,
    random() < 0.03 AS snc, CASE WHEN random() < 0.04 THEN NULL ELSE floor(13 * random() ^ 3)::int END AS qnc,
    CASE WHEN random() < 0.25 THEN NULL ELSE date '1995-01-01' + floor(random() * 11655)::int END AS insp,
    random() < 0.15 AS pen, date '2000-01-01' + floor(random() * 9828)::int AS pdate
  FROM generate_series(1, ${FACILITIES}) AS g
) AS s;
`;

/** The rows: each filter (default order registry_id), each sort's first page, then each sort deep in a walk. */
function cases(since) {
  const near = { near: '29.76,-95.37', radius_km: '100' };
  const filters = [
    ['city', { city: 'Houston' }],
    ['county', { county: 'Harris' }],
    ['zip', { zip: '10000' }],
    ['epa_region', { epa_region: '06' }],
    ['bbox', { bbox: '-96.5,29.0,-94.5,30.5' }],
    ['naics', { naics: '3251' }],
    ['sic', { sic: '2869' }],
    ['major', { major: 'true' }],
    ['min_quarters_nc', { min_quarters_nc: '4' }],
    ['snc', { snc: 'true' }],
    ['min_penalties_usd', { min_penalties_usd: '100000' }],
    ['penalized_since', { penalized_since: '2024-01-01' }],
    ['inspected_since', { inspected_since: '2026-01-01' }],
    ['not_inspected_since', { not_inspected_since: '2023-11-28' }],
    ['updated_since', { updated_since: since }],
  ];
  const sorts = [
    ['sort=name', { sort: 'name' }],
    ['sort=-penalties_total', { sort: '-penalties_total' }],
    ['sort=-quarters_nc', { sort: '-quarters_nc' }],
    ['sort=last_inspection', { sort: 'last_inspection' }],
    ['sort=distance', { sort: 'distance', ...near }],
  ];
  return [
    ...filters.map(([name, params]) => ({ name, params, deep: false })),
    ...sorts.map(([name, params]) => ({ name, params, deep: false })),
    ...sorts.map(([name, params]) => ({ name: `${name} page ${DEEP_PAGES + 1}`, params, deep: true })),
  ].filter((c) => !ONLY || ONLY.has(c.name));
}

const pathOf = (params, cursor) => {
  const q = new URLSearchParams({ ...params, limit: String(LIMIT) });
  if (cursor) q.set('cursor', cursor);
  return `/v1/facilities?${q}`;
};

async function get(base, path) {
  const res = await fetch(`${base}${path}`, { headers: { 'x-fcd-account': signAccount(path) } });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** autocannon on one path for `seconds` (each request signed afresh: the claim is valid 5 s). */
function http(base, path, seconds) {
  const header = { at: 0, value: '' };
  return new Promise((res, rej) => {
    autocannon(
      {
        url: `${base}${path}`,
        connections: CONNECTIONS,
        duration: seconds,
        requests: [
          {
            method: 'GET',
            setupRequest: (req) => {
              if (Date.now() - header.at > 1000) Object.assign(header, { at: Date.now(), value: signAccount(path) });
              return { ...req, headers: { ...req.headers, 'x-fcd-account': header.value } };
            },
          },
        ],
      },
      (err, r) => (err ? rej(err) : res(r)),
    );
  });
}

/** The p-th percentile (0–100) of sorted `xs`. */
const percentile = (xs, p) => xs[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];

/**
 * pgbench running `statement` (its $n as pgbench variables, the values given with -D) on `dbUrl`
 * with the facility schema as search_path: tps, and p50/p99 from its per-transaction log.
 */
function pgbench(dbUrl, statement, seconds, log) {
  const dir = mkdtempSync(join(tmpdir(), 'fcd-bench-fq-'));
  try {
    const script = join(dir, 'query.sql');
    writeFileSync(script, `${statement.text.replace(/\$(\d+)/g, ':p$1').replace(/\s+/g, ' ')};\n`);
    const defines = statement.values.flatMap((v, i) => ['-D', `p${i + 1}=${v}`]);
    const args = ['-n', '-M', 'extended', '-c', String(CONNECTIONS), '-j', '2', '-T', String(seconds), '-f', script, ...defines];
    if (log) args.push('-l', `--log-prefix=${join(dir, 'tx')}`);
    const r = spawnSync('pgbench', [...args, dbUrl], {
      env: { ...process.env, PGOPTIONS: '-c search_path=facility' },
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`pgbench exited with ${r.status}: ${r.stderr}`);
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(r.stdout)?.[1]);
    const failed = Number(/number of failed transactions: (\d+)/.exec(r.stdout)?.[1] ?? 0);
    if (!log) return { tps };
    const us = [];
    for (const f of readdirSync(dir).filter((f) => f.startsWith('tx'))) {
      for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
        const t = line.split(' ')[2];
        if (t) us.push(Number(t));
      }
    }
    us.sort((a, b) => a - b);
    const ms = (x) => Number((x / 1000).toFixed(2));
    return {
      tps: Math.round(tps),
      latencyP50Ms: ms(percentile(us, 50)),
      latencyP99Ms: ms(percentile(us, 99)),
      transactions: us.length,
      failed,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The statements listFacilities issues for each ask (facility-query-sql.ts, through tsx). */
function statements(asks) {
  const out = execFileSync('npx', ['tsx', '--conditions=source', resolve(root, 'scripts/bench/facility-query-sql.ts')], {
    cwd: root,
    input: JSON.stringify(asks),
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

async function explain(client, statement) {
  const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${statement.text}`, statement.values);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

const db = await benchDatabase('facility_query');
const client = new pg.Client({ connectionString: db.url, options: '-c search_path=facility' });
try {
  const started = Date.now();
  facilityCli(db)(['migrate']);
  await client.connect();
  const t0 = performance.now();
  await client.query(FILL);
  const fillS = Number(((performance.now() - t0) / 1000).toFixed(1));
  const t1 = performance.now();
  await client.query('ANALYZE facilities');
  const analyzeS = Number(((performance.now() - t1) / 1000).toFixed(1));
  // updated_since: an instant a day after the oldest write of the spread (~0.1 % of the rows since).
  const since = new Date(Date.now() - 24 * 3600 * 1000).toISOString();
  console.log(`facility-query: ${FACILITIES} facilities inserted in ${fillS} s, ANALYZE ${analyzeS} s`);
  const rows = cases(since);
  const facility = await startFacility(db);
  const base = `http://127.0.0.1:${facility.port}`;
  // Each row's path (a deep row: the cursor after DEEP_PAGES pages of the walk) and rows on the page.
  for (const row of rows) {
    let cursor;
    if (row.deep) {
      for (let p = 0; p < DEEP_PAGES; p++) cursor = (await get(base, pathOf(row.params, cursor))).pagination.next_cursor;
      if (!cursor) throw new Error(`${row.name}: the walk ended before page ${DEEP_PAGES + 1}`);
    }
    row.cursor = cursor;
    row.path = pathOf(row.params, cursor);
    row.pageRows = (await get(base, row.path)).data.length;
  }
  const sql = statements(rows.map((r) => ({ params: { ...r.params, limit: String(LIMIT) }, cursor: r.cursor })));
  const results = [];
  for (const [i, row] of rows.entries()) {
    const statement = sql[i];
    const load = loadavg()[0].toFixed(2);
    await http(base, row.path, WARMUP);
    pgbench(db.url, statement, WARMUP, false);
    const cpuFrom = cpuSeconds(facility.pid);
    const h = await http(base, row.path, DURATION);
    const cpuUs = usPerUnit(cpuSeconds(facility.pid) - cpuFrom, h.requests.total);
    const b = pgbench(db.url, statement, DURATION, true);
    const service = {
      requestsPerSecond: Math.round(h.requests.average),
      latencyP50Ms: h.latency.p50,
      latencyP99Ms: h.latency.p99,
      non2xx: h.non2xx,
      errors: h.errors,
      cpuUsPerRequest: cpuUs,
    };
    const ratio = Number((service.requestsPerSecond / b.tps).toFixed(3));
    const p99Met = service.latencyP99Ms < TARGET.p99Ms && service.non2xx === 0 && service.errors === 0;
    const ratioMet = ratio >= TARGET.ratio;
    const plan = await explain(client, statement);
    const r = {
      name: row.name,
      path: row.path,
      pageRows: row.pageRows,
      loadBefore: Number(load),
      service,
      sql: b,
      ratio,
      p99Met,
      ratioMet,
      statement,
      plan,
    };
    results.push(r);
    console.log(
      `${row.name}: ${row.pageRows} rows; service ${service.requestsPerSecond} req/s p50 ${service.latencyP50Ms} p99 ${service.latencyP99Ms} ms ` +
        `(${cpuUs} µs CPU/request); ` +
        `SQL ${b.tps} tps p50 ${b.latencyP50Ms} p99 ${b.latencyP99Ms} ms; ratio ${ratio}; ${p99Met && ratioMet ? 'pass' : 'FAIL'} (load ${load})`,
    );
  }
  const table = results.map((r) => ({
    query: r.name,
    rows: r.pageRows,
    'req/s': r.service.requestsPerSecond,
    'p50 ms': r.service.latencyP50Ms,
    'p99 ms': r.service.latencyP99Ms,
    'cpu µs': r.service.cpuUsPerRequest,
    'sql tps': r.sql.tps,
    'sql p50': r.sql.latencyP50Ms,
    'sql p99': r.sql.latencyP99Ms,
    ratio: r.ratio,
    'p99 < 50': r.p99Met ? 'pass' : 'FAIL',
    'ratio ≥ 0.5': r.ratioMet ? 'pass' : 'FAIL',
  }));
  console.table(table);
  for (const r of results.filter((r) => !r.p99Met || !r.ratioMet)) console.log(`\n${r.name} (missed a target): ${r.path}\n${r.plan}`);
  writeResult('facility-query', {
    date: new Date().toISOString(),
    machine: machine(),
    facilities: FACILITIES,
    connections: CONNECTIONS,
    durationSeconds: DURATION,
    warmupSeconds: WARMUP,
    limit: LIMIT,
    target: TARGET,
    fillSeconds: fillS,
    analyzeSeconds: analyzeS,
    wallSeconds: Math.round((Date.now() - started) / 1000),
    rows: results,
  });
} finally {
  await client.end().catch(() => undefined);
  await stopAll();
  await db.drop();
}
