#!/usr/bin/env node
// Import benchmark: the facility CLI importing a 50,000-row NDJSON file of facilities, twice
// (the second import is idempotent: every row unchanged, no event), against the machine's ceiling
// for loading the same bytes into Postgres: `COPY` of the file's lines into a one-column table.
// Prints the CPU µs per row of each process (psql, each import; /proc/self/stat cutime + cstime
// around it). Writes bench-results/import-<date>.json. BENCH_IMPORT_ROWS changes the row count.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { childrenCpuSeconds, usPerUnit } from './cpu.mjs';
import { benchDatabase, facilityCli, machine, writeResult } from './http-bench.mjs';

const ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 50_000);
const dir = mkdtempSync(join(tmpdir(), 'fcd-bench-import-'));
const db = await benchDatabase('import');
const cli = facilityCli(db);
const facility = (args) => JSON.parse(cli([...args, '--json']));

try {
  cli(['migrate']);
  facility(['seed', '--facilities', String(ROWS), '--seed', 'bench', '--out', dir, '--format', 'ndjson']);
  const file = join(dir, 'facilities.ndjson');

  // Baseline: the same lines into Postgres with COPY (no parsing, no upsert, no index).
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query('CREATE TABLE bench_copy (line text)');
  let started = performance.now();
  let cpuFrom = childrenCpuSeconds();
  copyLines(file);
  const copyMs = performance.now() - started;
  const copyCpuS = childrenCpuSeconds() - cpuFrom;
  const copied = (await client.query('SELECT count(*)::int AS n FROM bench_copy')).rows[0].n;
  await client.end();
  if (copied !== ROWS) throw new Error(`COPY loaded ${copied} rows, expected ${ROWS}`);

  started = performance.now();
  cpuFrom = childrenCpuSeconds();
  const first = facility(['import', file, '--kind', 'facilities']);
  const firstMs = performance.now() - started;
  const firstCpuS = childrenCpuSeconds() - cpuFrom;
  started = performance.now();
  cpuFrom = childrenCpuSeconds();
  const again = facility(['import', file, '--kind', 'facilities']);
  const againMs = performance.now() - started;
  const againCpuS = childrenCpuSeconds() - cpuFrom;
  const events = (r) => Object.values(r.events).reduce((a, b) => a + b, 0);
  if (first.counts.facilities.inserted !== ROWS || again.counts.facilities.unchanged !== ROWS || events(again) !== 0) {
    throw new Error(`unexpected import result: ${JSON.stringify({ first: first.counts, again: again.counts, events: again.events })}`);
  }

  const result = {
    date: new Date().toISOString(),
    machine: machine(),
    rows: ROWS,
    copy_baseline_ms: Math.round(copyMs),
    first_import_ms: Math.round(firstMs),
    reimport_ms: Math.round(againMs),
    first_import_rows_per_s: Math.round(ROWS / (firstMs / 1000)),
    reimport_rows_per_s: Math.round(ROWS / (againMs / 1000)),
    ratio_first: Number((copyMs / firstMs).toFixed(3)),
    ratio_reimport: Number((copyMs / againMs).toFixed(3)),
    cpu_us_per_row: {
      psql_copy: usPerUnit(copyCpuS, ROWS),
      first_import: usPerUnit(firstCpuS, ROWS),
      reimport: usPerUnit(againCpuS, ROWS),
    },
  };
  console.log(
    `import of ${ROWS} facility rows (CLI, process start included): first ${result.first_import_ms} ms, ` +
      `re-import ${result.reimport_ms} ms (unchanged, no events); COPY of the same lines ${result.copy_baseline_ms} ms; ` +
      `ratio COPY/import ${result.ratio_first} (first), ${result.ratio_reimport} (re-import); ` +
      `CPU per row: psql ${result.cpu_us_per_row.psql_copy} µs, first import ${result.cpu_us_per_row.first_import} µs, re-import ${result.cpu_us_per_row.reimport} µs`,
  );
  writeResult('import', result);
} finally {
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
}

/** psql's client-side \copy of the file's lines (CSV with delimiter and quote bytes that never occur in it). */
function copyLines(file) {
  execFileSync('psql', [db.url, '-qc', `\\copy bench_copy FROM '${file}' WITH (FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02')`], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
