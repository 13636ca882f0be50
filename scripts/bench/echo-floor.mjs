// The floor of any ECHO first load on this machine: the rows a first load stored, already in
// their final form (no CSV, no mapping, no diff), COPYed by psql into the served tables of a fresh
// migrated database, with every index, key and foreign key of those tables dropped first and built
// again after the COPY, in one transaction. A loader that writes these tables cannot take less:
// what is left is writing the rows and building the indexes the API needs. echo.mjs reports it
// beside psql's `\copy` of the raw files into plain text tables (the ECHO sync target's
// baseline, docs/benchmarks.md "ECHO sync").
import { join } from 'node:path';
import pg from 'pg';

/** The served tables a first load fills, in an order the foreign keys allow. */
const TABLES = ['echo_program_links', 'facilities', 'violations', 'cases'];

/**
 * The floor's psql script for `schema`: drops (read from the catalogs of the migrated database,
 * so the floor follows the migrations) and recreates every index and constraint of the tables.
 */
async function floorScript(client, schema, dir) {
  const { rows: constraints } = await client.query(
    `SELECT c.conrelid::regclass::text AS tbl, c.conname AS name, c.contype AS type, pg_get_constraintdef(c.oid) AS def
       FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = $1 AND c.contype IN ('p', 'u', 'f') AND c.conrelid::regclass::text = ANY($2)
      ORDER BY c.contype = 'f', c.conname`,
    [schema, TABLES.map((t) => `${schema}.${t}`)],
  );
  const { rows: indexes } = await client.query(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
       FROM pg_index i WHERE i.indrelid::regclass::text = ANY($1)
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
      ORDER BY 1`,
    [TABLES.map((t) => `${schema}.${t}`)],
  );
  const foreign = constraints.filter((c) => c.type === 'f');
  const keys = constraints.filter((c) => c.type !== 'f');
  return [
    'BEGIN;',
    ...foreign.map((c) => `ALTER TABLE ${c.tbl} DROP CONSTRAINT ${c.name};`),
    ...keys.map((c) => `ALTER TABLE ${c.tbl} DROP CONSTRAINT ${c.name};`),
    indexes.length > 0 ? `DROP INDEX ${indexes.map((i) => i.name).join(', ')};` : '',
    ...TABLES.map((t) => `\\copy ${schema}.${t} FROM '${join(dir, `${t}.tsv`)}'`),
    // The same memory the sync gives its index rebuilds (UnitRun.rebuildingIndexes).
    "SET LOCAL maintenance_work_mem = '256MB';",
    ...keys.map((c) => `ALTER TABLE ${c.tbl} ADD CONSTRAINT ${c.name} ${c.def};`),
    ...foreign.map((c) => `ALTER TABLE ${c.tbl} ADD CONSTRAINT ${c.name} ${c.def};`),
    ...indexes.map((i) => `${i.def};`),
    'COMMIT;',
  ]
    .filter((l) => l !== '')
    .join('\n');
}

/**
 * Measures the floor: exports the loaded database's served tables to `dir` (untimed), migrates
 * the empty database at `floorUrl` with `migrate()`, then times one psql process running the
 * floor's script against it. Returns the timed run ({ ms, cpuS, ... } from `run`) and the rows copied.
 */
export async function measureFloor({ loadedUrl, floorUrl, dir, schema, run, migrate }) {
  const source = new pg.Client({ connectionString: loadedUrl });
  await source.connect();
  let rows = 0;
  try {
    for (const t of TABLES) {
      const out = await run('psql', [
        loadedUrl,
        '-qX',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        `\\copy ${schema}.${t} TO '${join(dir, `${t}.tsv`)}'`,
      ]);
      if (out.code !== 0) throw new Error(`floor: exporting ${t} failed: ${out.stderr}`);
      rows += Number((await source.query(`SELECT count(*) AS n FROM ${schema}.${t}`)).rows[0].n);
    }
  } finally {
    await source.end();
  }
  await migrate();
  const target = new pg.Client({ connectionString: floorUrl });
  await target.connect();
  try {
    const script = await floorScript(target, schema, dir);
    const timed = await run('psql', [floorUrl, '-qX', '-v', 'ON_ERROR_STOP=1'], { input: script });
    if (timed.code !== 0) throw new Error(`floor: psql exited with ${timed.code}: ${timed.stderr}`);
    const copied = await target.query(`SELECT (${TABLES.map((t) => `(SELECT count(*) FROM ${schema}.${t})`).join(' + ')})::int AS n`);
    if (copied.rows[0].n !== rows) throw new Error(`floor: copied ${copied.rows[0].n} rows of ${rows}`);
    return { ...timed, rows };
  } finally {
    await target.end();
  }
}
