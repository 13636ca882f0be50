#!/usr/bin/env node
// ECHO sync benchmark: the facility CLI's `sync-echo` loading a generated ECHO download
// (scripts/bench/echo-generate.mjs: N facilities in ECHO_EXPORTER.csv, 2N violations over the
// ICIS-Air, RCRA and NPDES files, N/100 cases) into a fresh database, then a no-change re-sync of
// the same files, against the machine's ceiling for loading the same bytes into Postgres:
// psql's `\copy` of every file into a plain table of text columns (one per header column), in the
// same run. Peak RSS of each sync process comes from /usr/bin/time -v (else VmHWM sampled from
// /proc/<pid>/status); the CPU µs per row of each process (psql, each sync) from the CPU of
// waited-for children (/proc/self/stat cutime + cstime) around it. Targets (docs/benchmarks.md,
// "Current figures"): first load ≥ 0.25 × the \copy throughput; re-sync ≤ half the first load's
// time; peak RSS ≤ 300 MiB. Also the floor of any loader of the served
// tables (echo-floor.mjs: the stored rows COPYed into them, every index built after), so the
// figures say how much of the gap to `\copy` is the loader's. Writes bench-results/echo-<date>.json.
//
// env: BENCH_ECHO_FACILITIES (default 1,000,000), BENCH_ECHO_LOG_LEVEL=debug (the sync's log of
// each staged file and SQL statement with its duration, to bench-results/echo-<run>.log), BENCH_ECHO_DIR (generate into / reuse this
// folder and keep it; default a temp folder, removed), DATABASE_URL (the server; a database
// bench_echo_<hex> is created and dropped).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { childrenCpuSeconds, usPerUnit } from './cpu.mjs';
import { measureFloor } from './echo-floor.mjs';
import { generate } from './echo-generate.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FACILITIES = Number(process.env.BENCH_ECHO_FACILITIES ?? 1_000_000);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const cli = resolve(root, 'services/facility/dist/cli.js');
const dbName = `bench_echo_${randomBytes(4).toString('hex')}`;
const keepDir = process.env.BENCH_ECHO_DIR;
const dir = keepDir ? resolve(keepDir) : mkdtempSync(join(tmpdir(), 'fcd-bench-echo-'));
/** The floor's exported tables (always a temp folder, removed). */
const floorDir = mkdtempSync(join(tmpdir(), 'fcd-bench-echo-floor-'));
const TIME = '/usr/bin/time';
const MiB = 1024 * 1024;

const url = new URL(DB_URL);
url.pathname = `/${dbName}`;
const floorUrl = new URL(DB_URL);
floorUrl.pathname = `/${dbName}_floor`;
const env = { PATH: process.env.PATH, DATABASE_URL: url.toString(), LOG_LEVEL: process.env.BENCH_ECHO_LOG_LEVEL ?? 'warn' };

/**
 * Runs a command, timing it and measuring the peak RSS of the process: /usr/bin/time -v's
 * "Maximum resident set size" when available, else VmHWM polled from /proc/<pid>/status, and its
 * CPU seconds (user + system; the commands run one at a time, so the children's CPU is its own).
 */
function run(cmd, args, { input, databaseUrl } = {}) {
  const viaTime = existsSync(TIME);
  const [file, argv] = viaTime ? [TIME, ['-v', cmd, ...args]] : [cmd, args];
  return new Promise((resolveRun, reject) => {
    const started = performance.now();
    const cpuFrom = childrenCpuSeconds();
    const childEnv = databaseUrl ? { ...env, DATABASE_URL: databaseUrl } : env;
    const child = spawn(file, argv, { env: childEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let hwmKiB = 0;
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const poll = viaTime
      ? undefined
      : setInterval(() => {
          try {
            const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
            if (m) hwmKiB = Math.max(hwmKiB, Number(m[1]));
          } catch {}
        }, 100);
    child.stdin.end(input ?? '');
    child.once('error', reject);
    child.once('close', (code) => {
      const ms = performance.now() - started;
      if (poll) clearInterval(poll);
      if (viaTime) {
        const m = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
        if (m) hwmKiB = Number(m[1]);
        stderr = stderr.replace(/\n?\tCommand being timed:[\s\S]*$/, '').replace(/Command exited with non-zero status \d+\n?/, '');
      }
      const cpuS = childrenCpuSeconds() - cpuFrom;
      resolveRun({ code, ms, cpuS, stdout, stderr, peakRssMiB: Number((hwmKiB / 1024).toFixed(1)) });
    });
  });
}

/** A file's header line (the files are far too big to read whole). */
function firstLine(path) {
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(16384);
  const n = readSync(fd, buf, 0, buf.length, 0);
  closeSync(fd);
  return buf.subarray(0, n).toString('utf8').split(/\r?\n/)[0];
}

async function syncEcho(label) {
  const r = await run(process.execPath, [cli, 'sync-echo', '--from', dir, '--json']);
  if (r.code !== 0) throw new Error(`${label}: sync-echo exited with ${r.code}: ${r.stderr.trim()}`);
  // BENCH_ECHO_LOG_LEVEL=debug: the sync logs each staged file and statement with its duration.
  if (r.stderr.trim() !== '') writeFileSync(resolve(root, `bench-results/echo-${label.replace(/\W+/g, '-')}.log`), r.stderr);
  const summary = JSON.parse(r.stdout);
  const total = (k) => summary.files.reduce((a, f) => a + f[k], 0);
  return {
    ...r,
    summary,
    totals: {
      read: total('read'),
      inserted: total('inserted'),
      changed: total('changed'),
      unchanged: total('unchanged'),
      rejected: total('rejected'),
      events: total('events'),
    },
  };
}

mkdirSync(resolve(root, 'bench-results'), { recursive: true });
const admin = new pg.Client({ connectionString: DB_URL });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
try {
  const migrate = await run(process.execPath, [cli, 'migrate']);
  if (migrate.code !== 0) throw new Error(`migrate exited with ${migrate.code}: ${migrate.stderr}`);

  const started = performance.now();
  const marker = join(dir, 'generated.json');
  let data = existsSync(marker) ? JSON.parse(readFileSync(marker, 'utf8')) : undefined;
  if (!data || data.facilities !== FACILITIES) {
    data = await generate(dir, { facilities: FACILITIES });
    writeFileSync(marker, JSON.stringify(data));
  }
  const generateMs = performance.now() - started;
  const names = Object.keys(data.files);
  console.log(
    `echo bench: ${FACILITIES} facilities, ${data.violations} violations, ${data.cases} cases; ` +
      `${names.length} files, ${(data.bytes / MiB).toFixed(1)} MiB (generated in ${(generateMs / 1000).toFixed(1)} s)`,
  );

  // Baseline: psql's \copy of the same files into plain tables of text columns (no parsing beyond
  // CSV, no mapping, no index), one psql process for all files.
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  const tables = names.map((_name, i) => `bench_copy_${i}`);
  for (const [i, name] of names.entries()) {
    const header = firstLine(join(dir, name)).split(',');
    await db.query(`CREATE TABLE ${tables[i]} (${header.map((h) => `"${h.toLowerCase()}" text`).join(', ')})`);
  }
  const copy = await run('psql', [
    url.toString(),
    '-qX',
    '-v',
    'ON_ERROR_STOP=1',
    ...names.flatMap((name, i) => ['-c', `\\copy ${tables[i]} FROM '${join(dir, name)}' WITH (FORMAT csv, HEADER true)`]),
  ]);
  if (copy.code !== 0) throw new Error(`psql \\copy exited with ${copy.code}: ${copy.stderr}`);
  const copiedRows = (await db.query(`SELECT (${tables.map((t) => `(SELECT count(*) FROM ${t})`).join(' + ')})::int AS n`)).rows[0].n;
  await db.query(tables.map((t) => `DROP TABLE ${t};`).join(' '));
  await db.query('CHECKPOINT');

  const first = await syncEcho('first load');
  // What a week between two syncs gives the tables anyway (autovacuum): without it, the re-sync
  // would be timed against autovacuum's first pass over the millions of rows just loaded.
  await db.query('VACUUM (ANALYZE)');
  await db.query('CHECKPOINT');
  const again = await syncEcho('re-sync');
  await db.end();

  // The floor of any first load here (echo-floor.mjs): the stored rows COPYed into the served
  // tables of a fresh database, every index and key built after.
  await admin.query(`CREATE DATABASE ${dbName}_floor`);
  const floor = await measureFloor({
    loadedUrl: url.toString(),
    floorUrl: floorUrl.toString(),
    dir: floorDir,
    schema: 'facility',
    run,
    migrate: async () => {
      const m = await run(process.execPath, [cli, 'migrate'], { databaseUrl: floorUrl.toString() });
      if (m.code !== 0) throw new Error(`migrate (floor) exited with ${m.code}: ${m.stderr}`);
    },
  });

  const expected = { facilities: FACILITIES, violations: data.violations };
  const byKind = (s, files) => s.files.filter((f) => files.includes(f.file)).reduce((a, f) => a + f.inserted, 0);
  const violationFiles = ['ICIS-AIR_VIOLATION_HISTORY.csv', 'RCRA_VIOLATIONS.csv', 'NPDES_SE_VIOLATIONS.csv'];
  if (
    byKind(first.summary, ['ECHO_EXPORTER.csv']) !== expected.facilities ||
    byKind(first.summary, violationFiles) !== expected.violations ||
    byKind(first.summary, ['CASE_ENFORCEMENTS.csv']) !== data.cases ||
    first.totals.rejected !== 0 ||
    again.totals.inserted + again.totals.changed + again.totals.rejected + again.totals.events !== 0
  ) {
    throw new Error(`unexpected sync result: ${JSON.stringify({ first: first.totals, again: again.totals, expected })}`);
  }
  if (copiedRows !== first.totals.read) throw new Error(`\\copy loaded ${copiedRows} rows, sync read ${first.totals.read}`);

  const mibPerS = (ms) => Number((data.bytes / MiB / (ms / 1000)).toFixed(1));
  const ratio = Number((copy.ms / first.ms).toFixed(3));
  const floorRatio = Number((copy.ms / floor.ms).toFixed(3));
  const loadToFloor = Number((floor.ms / first.ms).toFixed(3));
  const resyncRatio = Number((again.ms / first.ms).toFixed(3));
  const peak = Math.max(first.peakRssMiB, again.peakRssMiB);
  const result = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
    facilities: FACILITIES,
    violations: data.violations,
    cases: data.cases,
    rows: first.totals.read,
    bytes: data.bytes,
    files: data.files,
    psql_copy_ms: Math.round(copy.ms),
    first_load_ms: Math.round(first.ms),
    resync_ms: Math.round(again.ms),
    floor_ms: Math.round(floor.ms),
    floor_rows: floor.rows,
    psql_copy_mib_per_s: mibPerS(copy.ms),
    first_load_mib_per_s: mibPerS(first.ms),
    ratio_load_to_copy: ratio,
    ratio_resync_to_load: resyncRatio,
    ratio_floor_to_copy: floorRatio,
    ratio_load_to_floor: loadToFloor,
    peak_rss_mib: { first_load: first.peakRssMiB, resync: again.peakRssMiB },
    cpu_us_per_row: {
      psql_copy: usPerUnit(copy.cpuS, first.totals.read),
      first_load: usPerUnit(first.cpuS, first.totals.read),
      resync: usPerUnit(again.cpuS, first.totals.read),
      floor: usPerUnit(floor.cpuS, first.totals.read),
    },
    targets: {
      load_at_least_0_25_of_copy: ratio >= 0.25,
      resync_at_most_half_of_load: resyncRatio <= 0.5,
      peak_rss_at_most_300_mib: peak <= 300,
    },
    sync_seconds_reported: { first_load: first.summary.seconds, resync: again.summary.seconds },
  };
  const pass = (ok) => (ok ? 'pass' : 'FAIL');
  console.log(
    [
      `psql \\copy of the same ${(data.bytes / MiB).toFixed(1)} MiB: ${(copy.ms / 1000).toFixed(1)} s (${result.psql_copy_mib_per_s} MiB/s)`,
      `first load (sync-echo, process start included): ${(first.ms / 1000).toFixed(1)} s (${result.first_load_mib_per_s} MiB/s); ` +
        `ratio load/\\copy throughput ${ratio} (target ≥ 0.25: ${pass(result.targets.load_at_least_0_25_of_copy)})`,
      `floor (the stored ${floor.rows} rows COPYed into the served tables, every index and key built after): ` +
        `${(floor.ms / 1000).toFixed(1)} s; ratio floor/\\copy throughput ${floorRatio} (no loader of these tables gets above it here); ` +
        `ratio load/floor throughput ${loadToFloor}`,
      `no-change re-sync: ${(again.ms / 1000).toFixed(1)} s; ratio re-sync/first load ${resyncRatio} (target ≤ 0.5: ${pass(result.targets.resync_at_most_half_of_load)})`,
      `peak RSS of the sync process: first load ${first.peakRssMiB} MiB, re-sync ${again.peakRssMiB} MiB (target ≤ 300: ${pass(result.targets.peak_rss_at_most_300_mib)})`,
      `CPU per row: psql ${result.cpu_us_per_row.psql_copy} µs (Postgres's own not counted), first load ${result.cpu_us_per_row.first_load} µs, re-sync ${result.cpu_us_per_row.resync} µs`,
    ].join('\n'),
  );
  mkdirSync(resolve(root, 'bench-results'), { recursive: true });
  writeFileSync(resolve(root, `bench-results/echo-${result.date.slice(0, 10)}.json`), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  if (!keepDir) rmSync(dir, { recursive: true, force: true });
  rmSync(floorDir, { recursive: true, force: true });
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.query(`DROP DATABASE IF EXISTS ${dbName}_floor WITH (FORCE)`);
  await admin.end();
}
