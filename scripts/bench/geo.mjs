#!/usr/bin/env node
// Geo-query benchmark: the facility service answering a search by place
// (`near=<lat>,<lon>&radius_km=25`, GiST index on facility_point) beside the plain state list
// (`state=TX`, B-tree index), 25 rows a page, on BENCH_GEO_ROWS demo facilities (default 20,000).
// The facility service is called directly with the gateway's signed header (metering is measured
// by the usage benchmark). Rounds alternate the two queries; the facility's CPU µs per request of
// each query from /proc/<pid>/stat over its rounds. Writes bench-results/geo-<date>.json.
import pg from 'pg';
import { cpuMeter, usPerUnit } from './cpu.mjs';
import {
  alternatingRounds,
  benchDatabase,
  CONNECTIONS,
  DURATION,
  machine,
  medianRound,
  seedFacilities,
  signAccount,
  startFacility,
  stopAll,
  writeResult,
} from './http-bench.mjs';

const ROWS = Number(process.env.BENCH_GEO_ROWS ?? 20_000);

const db = await benchDatabase('geo');
try {
  seedFacilities(db, ROWS, 'bench-geo');
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query('ANALYZE facility.facilities');
  // The centre: a Texas facility (demo facilities cluster around real cities).
  const { rows } = await client.query(
    "SELECT latitude, longitude FROM facility.facilities WHERE state = 'TX' AND latitude IS NOT NULL ORDER BY registry_id LIMIT 1",
  );
  await client.end();
  const { latitude, longitude } = rows[0];
  const facility = await startFacility(db);
  const base = `http://127.0.0.1:${facility.port}`;
  const plain = '/v1/facilities?state=TX&limit=25';
  const geo = `/v1/facilities?near=${latitude},${longitude}&radius_km=25&limit=25`;
  const found = await (await fetch(`${base}${geo}`, { headers: { 'x-fcd-account': signAccount(geo) } })).json();
  console.log(`geo: ${found.data.length} facilities within 25 km of ${latitude},${longitude} on the first page`);
  const side = (name, path) => ({ name, url: `${base}${path}`, headers: () => ({ 'x-fcd-account': signAccount(path) }) });
  const sides = { plain: side('GET /v1/facilities?state=TX', plain), geo: side('GET /v1/facilities?near=…&radius_km=25', geo) };
  const meters = { plain: cpuMeter({ facility: facility.pid }), geo: cpuMeter({ facility: facility.pid }) };
  const { all: rounds, requests } = await alternatingRounds(sides, meters);
  const median = medianRound(rounds);
  console.table([median.plain, median.geo]);
  const facilityCpuUsPerRequest = {
    plain: usPerUnit(meters.plain.seconds('facility'), requests.plain),
    geo: usPerUnit(meters.geo.seconds('facility'), requests.geo),
  };
  console.log(`facility CPU per request: state list ${facilityCpuUsPerRequest.plain} µs, geo ${facilityCpuUsPerRequest.geo} µs`);
  const result = {
    date: new Date().toISOString(),
    machine: machine(),
    facilities: ROWS,
    connections: CONNECTIONS,
    durationSeconds: DURATION,
    firstPageRows: found.data.length,
    plain: median.plain,
    geo: median.geo,
    ratio: median.ratio,
    facilityCpuUsPerRequest,
    rounds,
  };
  writeResult('geo', result);
} finally {
  await stopAll();
  await db.drop();
}
