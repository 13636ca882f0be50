import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import { nearQuery } from '../src/store/queries';
import { accountHeader, buildTestApp, setupDb, type TestApp, type TestDb } from './helpers';

/**
 * Search by place (near + radius_km) against the real Postgres with cube + earthdistance: the
 * exact set within the radius, nearest first, its own stable cursor, the other filters, the index.
 */
let db: TestDb;
let t: TestApp;

/** earthdistance's sphere: earth() = 6378168 m. */
const R_KM = 6378.168;
const CENTRE = { lat: 30, lon: -140 }; // the Pacific: no demo facility is near it

function greatCircleKm(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const rad = Math.PI / 180;
  const a =
    Math.sin(((lat2 - lat1) * rad) / 2) ** 2 + Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin(((lon2 - lon1) * rad) / 2) ** 2;
  return 2 * R_KM * Math.asin(Math.sqrt(a));
}

/** Seeded around the centre: registry id, offsets in degrees, compliance status. */
const SEEDS: Array<[string, number, number, string]> = [
  ['GEO-N1', 0.005, 0, 'violation'],
  ['GEO-N2', 0.02, 0, 'no_violation'],
  ['GEO-E1', 0, 0.03, 'violation'],
  ['GEO-N3', 0.04, 0, 'no_violation'],
  ['GEO-S1', -0.044, 0, 'violation'],
  ['GEO-T1', 0.03, 0.01, 'no_violation'],
  ['GEO-T2', 0.03, 0.01, 'violation'], // the same place as T1: ties are ordered by registry_id
  ['GEO-N4', 0.05, 0, 'violation'], // 5.57 km: outside 5 km
  ['GEO-E2', 0, 0.1, 'violation'], // 9.6 km
];
const expected = SEEDS.map(([id, dLat, dLon, status]) => ({
  id,
  status,
  km: greatCircleKm(CENTRE.lat, CENTRE.lon, CENTRE.lat + dLat, CENTRE.lon + dLon),
}))
  .filter((s) => s.km <= 5)
  .sort((a, b) => a.km - b.km || a.id.localeCompare(b.id));

type Row = { registry_id: string; distance_km: number; compliance_status: string };
type List = { data: Row[]; pagination: { limit: number; next_cursor: string | null; has_more: boolean } };

async function get(url: string) {
  const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
  return { status: res.statusCode, body: res.json() as List & { error?: { code: string; details: { fields: unknown[] } } } };
}

beforeAll(async () => {
  db = await setupDb('facility_geo');
  t = await buildTestApp(db.pool);
  const demo = generateDemoData({ facilities: 3000, seed: 'geo-test' });
  const seeds = SEEDS.map(([registry_id, dLat, dLon, compliance_status]) => ({
    registry_id,
    name: `Geo ${registry_id}`,
    state: 'HI',
    compliance_status,
    latitude: CENTRE.lat + dLat,
    longitude: CENTRE.lon + dLon,
  }));
  const report = await t.ingestion.ingestAll({
    facilities: [...demo.facilities, ...seeds].map((raw, index) => ({ ref: { index }, raw: { ...raw } })),
    violations: [],
    cases: [],
  });
  expect(report.errors).toEqual([]);
  await db.pool.query('ANALYZE facilities');
}, 120_000);

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('GET /v1/facilities?near=…&radius_km=…', () => {
  it('returns exactly the facilities within the radius, nearest first, each with its distance', async () => {
    expect(expected.map((e) => e.id)).toEqual(['GEO-N1', 'GEO-N2', 'GEO-E1', 'GEO-T1', 'GEO-T2', 'GEO-N3', 'GEO-S1']);
    const res = await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&limit=100`);
    expect(res.status).toBe(200);
    expect(res.body.data.map((f) => f.registry_id)).toEqual(expected.map((e) => e.id));
    res.body.data.forEach((f, i) => {
      expect(Math.abs(f.distance_km - (expected[i]?.km as number))).toBeLessThan(0.002);
    });
    expect(res.body.pagination).toEqual({ limit: 100, next_cursor: null, has_more: false });
    // A radius just past N4 takes it in; a radius of 0.1 km none.
    const wider = await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5.6`);
    expect(wider.body.data.map((f) => f.registry_id)).toEqual([...expected.map((e) => e.id), 'GEO-N4']);
    expect((await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=0.1`)).body.data).toEqual([]);
    // Without near there is no distance.
    const plain = await get('/v1/facilities?state=HI&limit=1');
    expect(plain.body.data[0]).not.toHaveProperty('distance_km');
  });

  it('pages with a stable cursor (no gap, no duplicate) and combines with the other filters', async () => {
    const ids: string[] = [];
    let url = `/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&limit=2`;
    for (let pages = 0; pages < 10; pages++) {
      const res = await get(url);
      expect(res.status).toBe(200);
      ids.push(...res.body.data.map((f) => f.registry_id));
      const next = res.body.pagination.next_cursor;
      if (!next) break;
      url = `/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&limit=2&cursor=${next}`;
    }
    expect(ids).toEqual(expected.map((e) => e.id));

    const violations = await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&compliance_status=violation&state=hi`);
    expect(violations.body.data.map((f) => f.registry_id)).toEqual(expected.filter((e) => e.status === 'violation').map((e) => e.id));
    const named = await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&q=geo-t`);
    expect(named.body.data.map((f) => f.registry_id)).toEqual(['GEO-T1', 'GEO-T2']);
    expect((await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=5&state=TX`)).body.data).toEqual([]);
  });

  it('answers bad coordinates and radii with 400 naming the field', async () => {
    const cases: Array<[string, string[]]> = [
      ['near=91,0&radius_km=5', ['near']],
      ['near=0,181&radius_km=5', ['near']],
      ['near=abc&radius_km=5', ['near']],
      ['near=1,2,3&radius_km=5', ['near']],
      ['near=1e1,2&radius_km=5', ['near']],
      ['near=30,-140&radius_km=0.05', ['radius_km']],
      ['near=30,-140&radius_km=100.5', ['radius_km']],
      ['near=30,-140&radius_km=Infinity', ['radius_km']],
      ['near=30,-140', ['radius_km']],
      ['radius_km=5', ['near']],
      ['near=x&radius_km=0', ['near', 'radius_km']],
    ];
    for (const [query, fields] of cases) {
      const res = await get(`/v1/facilities?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error?.code).toBe('VALIDATION_ERROR');
      expect(
        ((res.body.error?.details.fields ?? []) as Array<{ field: string }>).map((f) => f.field),
        query,
      ).toEqual(fields);
    }
    // A cursor of the plain list is not a cursor of a search by place.
    const plain = await get('/v1/facilities?limit=1');
    const mixed = await get(`/v1/facilities?near=30,-140&radius_km=5&cursor=${plain.body.pagination.next_cursor}`);
    expect(mixed.status).toBe(400);
    expect(mixed.body.error?.details.fields).toEqual([{ field: 'cursor', message: 'is not a valid cursor for this list' }]);
  });

  it('uses the GiST index on facility_point(latitude, longitude) (query plan), and rows written from any search_path', async () => {
    const { text, values } = nearQuery({ latitude: CENTRE.lat, longitude: CENTRE.lon, radius_km: 5, limit: 25 });
    const { rows } = await db.pool.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
    const plan = JSON.stringify(rows[0]?.['QUERY PLAN']);
    expect(plan).toContain('"Index Name":"facilities_earth_idx"');
    expect(plan).not.toContain('"Node Type":"Seq Scan"');

    // A row written from a session without the facility schema on its search_path (psql, a restore).
    const client = new pg.Client({ connectionString: db.database.url });
    await client.connect();
    try {
      await client.query(
        `INSERT INTO facility.facilities (id, registry_id, name, state, compliance_status, latitude, longitude, updated_at)
         VALUES (gen_random_uuid(), 'GEO-PSQL', 'From psql', 'HI', 'violation', $1, $2, now())`,
        [CENTRE.lat + 0.001, CENTRE.lon],
      );
    } finally {
      await client.end();
    }
    const found = await get(`/v1/facilities?near=${CENTRE.lat},${CENTRE.lon}&radius_km=0.2`);
    expect(found.body.data.map((f) => f.registry_id)).toEqual(['GEO-PSQL']);
  });

  it('inlines facility_point (no SET clause; the same point as ll_to_earth, NULL for NULL)', async () => {
    const { rows: fn } = await db.pool.query<{ proconfig: string[] | null; provolatile: string; proparallel: string }>(
      `SELECT proconfig, provolatile, proparallel FROM pg_proc WHERE oid = 'facility_point(float8, float8)'::regprocedure`,
    );
    expect(fn).toEqual([{ proconfig: null, provolatile: 'i', proparallel: 's' }]);
    // Columns, not constants: an immutable call on constants is folded either way.
    const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>(
      'EXPLAIN (VERBOSE) SELECT facility_point(latitude, longitude) FROM facilities',
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).not.toContain('facility_point(');
    expect(plan).toContain('cube(cube(cube(');
    // The same point as ll_to_earth (what the index held before 0006), NULL for a NULL coordinate.
    const { rows: same } = await db.pool.query<{ compared: number; differ: number; nulls: boolean }>(
      `SELECT count(*)::int AS compared, count(*) FILTER (WHERE facility_point(latitude, longitude)::text IS DISTINCT FROM ll_to_earth(latitude, longitude)::text) AS differ,
              bool_and(facility_point(NULL, longitude) IS NULL AND facility_point(latitude, NULL) IS NULL) AS nulls
         FROM facilities WHERE latitude IS NOT NULL AND longitude IS NOT NULL`,
    );
    expect(same).toEqual([{ compared: expect.any(Number), differ: 0, nulls: true }]);
    expect(same[0]?.compared).toBeGreaterThan(SEEDS.length);
    // Inlined from a session whose search_path lacks the extensions' schema, too (psql, a restore).
    const client = new pg.Client({ connectionString: db.database.url });
    await client.connect();
    try {
      const { rows: other } = await client.query<{ 'QUERY PLAN': string }>(
        'EXPLAIN (VERBOSE) SELECT facility.facility_point(latitude, longitude) FROM facility.facilities',
      );
      expect(other.map((r) => r['QUERY PLAN']).join('\n')).not.toContain('facility_point(');
    } finally {
      await client.end();
    }
  });
});
