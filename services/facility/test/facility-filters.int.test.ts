import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FacilityFilter, type FacilitySort, facilityQuery } from '../src/store/queries';
import { accountHeader, buildTestApp, setupDb, type TestApp, type TestDb } from './helpers';

/**
 * Filters and sorting of GET /v1/facilities and GET /v1/exports/facilities (docs/api.md, "Filters
 * and sorting") on a small fixture set inserted into a database of its own: each filter and sort
 * returns exactly the expected facilities, bad values are a 400 naming the parameter, each order
 * pages with its own cursor, and (fast-check) any combination of filters returns exactly the
 * facilities satisfying all of them, each once, across a page walk.
 */
let db: TestDb;
let t: TestApp;

interface Fixture {
  registry_id: string;
  name: string;
  state: string;
  city: string | null;
  county: string | null;
  zip: string | null;
  epa_region: string | null;
  latitude: number | null;
  longitude: number | null;
  naics_codes: string[];
  sic_codes: string[];
  major: boolean;
  quarters_nc: number | null;
  snc: boolean;
  penalties_total: number | null;
  penalized: string | null;
  inspected: string | null;
}

const fixture = (
  registry_id: string,
  name: string,
  place: [string | null, string | null, string | null, string | null, number | null, number | null],
  industry: [string[], string[]],
  profile: [boolean, number | null, boolean, number | null, string | null, string | null],
): Fixture => {
  const [city, county, zip, epa_region, latitude, longitude] = place;
  const [naics_codes, sic_codes] = industry;
  const [major, quarters_nc, snc, penalties_total, penalized, inspected] = profile;
  return {
    registry_id,
    name,
    state: 'TX',
    city,
    county,
    zip,
    epa_region,
    latitude,
    longitude,
    naics_codes,
    sic_codes,
    major,
    quarters_nc,
    snc,
    penalties_total,
    penalized,
    inspected,
  };
};

const FIXTURES: Fixture[] = [
  fixture(
    'F01',
    'Acme Refinery',
    ['Houston', 'Harris', '77001', '06', 29.76, -95.37],
    [['324110'], ['2911']],
    [true, 12, true, 187500, '2025-08-19', '2024-03-01'],
  ),
  fixture(
    'F02',
    'Bayou Chemicals',
    ['houston', 'Harris', '77002-1234', '06', 29.7, -95.3],
    [['325110', '424690'], ['2869']],
    [false, 4, false, 5000, '2023-01-10', '2021-06-30'],
  ),
  fixture(
    'F03',
    'Cedar Plant',
    ['Dallas', 'Dallas', '75201', '06', 32.78, -96.8],
    [['325199'], ['2869']],
    [true, 0, false, null, null, null],
  ),
  fixture(
    'F04',
    'Delta Mill',
    ['Austin', 'Travis', '78701', '06', 30.27, -97.74],
    [['322121'], ['2621']],
    [false, 7, true, 1000000.5, '2024-06-01', '2020-01-15'],
  ),
  fixture(
    'F05',
    'Erie Works',
    ['Cleveland', 'Cuyahoga', '44101', '05', 41.5, -81.69],
    [['331110'], ['3312']],
    [true, 2, false, 250, '2019-05-05', '2025-11-01'],
  ),
  fixture(
    'F06',
    'Falls Power',
    ['Buffalo', 'Erie', '14201', '02', 42.89, -78.88],
    [['221112'], ['4911']],
    [false, 0, false, null, null, '2022-02-02'],
  ),
  fixture('F07', 'Gamma Labs', [null, null, null, null, null, null], [[], []], [false, null, false, null, null, null]),
  fixture(
    'F08',
    'Harbor Terminal',
    ['Seattle', 'King', '98101', '10', 47.61, -122.33],
    [['488320', '3251'], ['4491']],
    [true, 9, false, 0, '2024-12-31', '2023-07-04'],
  ),
  fixture(
    'F09',
    'Alpha Foods',
    ['Houston', 'Harris', '77003', '06', 29.75, -95.36],
    [['311412'], ['2038']],
    [false, 1, false, null, null, '2024-03-01'],
  ),
];

/**
 * More facilities for the property test (state OH; the tests above ask for state TX): every
 * combination of a few values of each field, deterministic, so that random filter combinations
 * select varied, non-empty sets.
 */
const MORE: Fixture[] = Array.from({ length: 48 }, (_, n) => {
  const pick = <T>(values: readonly T[], k: number): T => values[(n * k + (n >> 2)) % values.length] as T;
  const f = fixture(
    `P${String(n).padStart(3, '0')}`,
    `Plant ${pick(['North', 'South', 'East', 'West', 'Acme', 'Zeta'], 5)} ${n}`,
    [
      pick(['Houston', 'Dallas', 'Seattle', null], 3),
      pick(['Harris', 'Erie', 'King', null], 7),
      pick(['77001', '77002-0001', '44101', '98101', null], 11),
      pick(['02', '05', '06', '10', null], 13),
      pick([29.5, 30.1, 41, 45.5, null], 17),
      pick([-95.5, -97, -81, -122, null], 19),
    ],
    [pick([['324110'], ['325110', '488320'], ['3251'], [], ['221112']], 23), pick([['2869'], ['2911', '4491'], [], ['9999']], 29)],
    [
      pick([true, false], 31) as boolean,
      pick([0, 1, 4, 7, 12, null], 37),
      pick([true, false, false], 41) as boolean,
      pick([0, 250, 5000, 187500, 1000000, null], 43),
      pick(['2019-05-05', '2023-01-10', '2024-06-01', '2025-08-19', null], 47),
      pick(['2020-01-15', '2021-06-30', '2024-03-01', '2025-11-01', null], 53),
    ],
  );
  return { ...f, state: 'OH' };
});

async function insert(f: Fixture): Promise<void> {
  await db.pool.query(
    `INSERT INTO facilities (id, registry_id, name, state, city, county, zip, epa_region, latitude, longitude, naics_codes,
                             sic_codes, major, compliance, penalties, inspections, compliance_status, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
             jsonb_build_object('quarters_with_noncompliance', $14::int, 'programs_with_snc', 0, 'snc', $15::boolean),
             jsonb_build_object('count', 0, 'total_usd', $16::numeric, 'last_amount_usd', NULL, 'last_date', $17::text),
             jsonb_build_object('count', 0, 'last_date', $18::text), 'violation', now())`,
    [
      randomUUID(),
      f.registry_id,
      f.name,
      f.state,
      f.city,
      f.county,
      f.zip,
      f.epa_region,
      f.latitude,
      f.longitude,
      f.naics_codes,
      f.sic_codes,
      f.major,
      f.quarters_nc,
      f.snc,
      f.penalties_total,
      f.penalized,
      f.inspected,
    ],
  );
}

type Listed = { registry_id: string; distance_km?: number };
type Body = {
  data: Listed[];
  pagination: { limit: number; next_cursor: string | null; has_more: boolean };
  error?: { code: string; details: { fields: Array<{ field: string; message: string }> } };
};

async function get(url: string): Promise<{ status: number; body: Body }> {
  const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
  return { status: res.statusCode, body: res.json() as Body };
}

/** Every facility of a query, walking its pages of `limit`; fails on a repeated facility or a runaway walk. */
async function walk(query: string, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let n = 0; n < 200; n++) {
    const url = `/v1/facilities?${query}${query ? '&' : ''}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
    const res = await get(url);
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(res.body)}`);
    seen.push(...res.body.data.map((f) => f.registry_id));
    cursor = res.body.pagination.next_cursor;
    if (!res.body.pagination.has_more) return seen;
  }
  throw new Error(`the walk of ${query} did not end`);
}

async function ids(query: string): Promise<string[]> {
  const res = await get(`/v1/facilities?${query}&limit=100`);
  expect(res.status, query).toBe(200);
  return res.body.data.map((f) => f.registry_id);
}

beforeAll(async () => {
  db = await setupDb('facility_filters');
  t = await buildTestApp(db.pool);
  for (const f of [...FIXTURES, ...MORE]) await insert(f);
});

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('facility filters', () => {
  const cases: Array<[string, string[]]> = [
    ['city=HOUSTON', ['F01', 'F02', 'F09']],
    ['county=harris', ['F01', 'F02', 'F09']],
    ['zip=77002', ['F02']],
    ['zip=77001', ['F01']],
    ['epa_region=06', ['F01', 'F02', 'F03', 'F04', 'F09']],
    ['epa_region=10', ['F08']],
    ['bbox=-96,29,-95,30', ['F01', 'F02', 'F09']],
    ['bbox=-95.37,29.76,-95.37,29.76', ['F01']],
    ['naics=3251', ['F02', 'F03', 'F08']],
    ['naics=32', ['F01', 'F02', 'F03', 'F04', 'F08']],
    ['naics=325110', ['F02']],
    ['sic=2869', ['F02', 'F03']],
    ['major=true', ['F01', 'F03', 'F05', 'F08']],
    ['major=false', ['F02', 'F04', 'F06', 'F07', 'F09']],
    ['min_quarters_nc=4', ['F01', 'F02', 'F04', 'F08']],
    ['min_quarters_nc=0', ['F01', 'F02', 'F03', 'F04', 'F05', 'F06', 'F08', 'F09']],
    ['snc=true', ['F01', 'F04']],
    ['snc=false', ['F02', 'F03', 'F05', 'F06', 'F07', 'F08', 'F09']],
    ['min_penalties_usd=5000', ['F01', 'F02', 'F04']],
    ['min_penalties_usd=0', ['F01', 'F02', 'F04', 'F05', 'F08']],
    ['min_penalties_usd=187500', ['F01', 'F04']],
    ['min_penalties_usd=187501', ['F04']],
    ['penalized_since=2024-01-01', ['F01', 'F04', 'F08']],
    ['inspected_since=2024-03-01', ['F01', 'F05', 'F09']],
    ['not_inspected_since=2023-01-01', ['F02', 'F03', 'F04', 'F06', 'F07']],
    ['epa_region=06&major=true', ['F01', 'F03']],
    ['city=houston&min_penalties_usd=1&naics=32', ['F01', 'F02']],
  ];
  for (const [query, expected] of cases) {
    it(`${query} returns exactly its facilities`, async () => {
      expect(await ids(`${query}&state=TX`)).toEqual(expected);
    });
  }

  it('the export takes the same filters', async () => {
    const url = '/internal/v1/exports/facilities?state=TX&epa_region=06&major=true&bbox=-100,25,-90,35';
    const res = await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': accountHeader('GET', url) } });
    expect(res.statusCode).toBe(200);
    const rows = res.body
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as Listed).registry_id);
    expect(rows.sort()).toEqual(['F01', 'F03']);
    const badUrl = '/internal/v1/exports/facilities?bbox=1,2,3';
    const bad = await t.app.inject({ method: 'GET', url: badUrl, headers: { 'x-fcd-account': accountHeader('GET', badUrl) } });
    expect([bad.statusCode, bad.json().error.code, bad.json().error.details.fields.map((f: { field: string }) => f.field)]).toEqual([
      400,
      'VALIDATION_ERROR',
      ['bbox'],
    ]);
  });

  it('answers a bad value with 400 VALIDATION_ERROR naming the parameter', async () => {
    const bad: Array<[string, string]> = [
      ['city=', 'city'],
      ['city=Hou%00ston', 'city'],
      ['county=%00', 'county'],
      ['zip=7700', 'zip'],
      ['zip=77002-1234', 'zip'],
      ['epa_region=6', 'epa_region'],
      ['epa_region=11', 'epa_region'],
      ['bbox=1,2,3', 'bbox'],
      ['bbox=10,0,5,1', 'bbox'],
      ['bbox=-181,0,0,1', 'bbox'],
      ['bbox=a,b,c,d', 'bbox'],
      ['naics=3', 'naics'],
      ['naics=3251101', 'naics'],
      ['naics=32a', 'naics'],
      ['sic=286', 'sic'],
      ['major=yes', 'major'],
      ['snc=maybe', 'snc'],
      ['min_quarters_nc=-1', 'min_quarters_nc'],
      ['min_quarters_nc=1.5', 'min_quarters_nc'],
      ['min_quarters_nc=x', 'min_quarters_nc'],
      ['min_penalties_usd=-5', 'min_penalties_usd'],
      ['min_penalties_usd=abc', 'min_penalties_usd'],
      ['min_penalties_usd=1.5', 'min_penalties_usd'],
      ['min_penalties_usd=1e400', 'min_penalties_usd'],
      ['penalized_since=2024-13-01', 'penalized_since'],
      ['inspected_since=yesterday', 'inspected_since'],
      ['not_inspected_since=2024-02-30', 'not_inspected_since'],
      ['sort=bogus', 'sort'],
      ['sort=distance', 'sort'],
    ];
    for (const [query, field] of bad) {
      const res = await get(`/v1/facilities?${query}`);
      expect([res.status, res.body.error?.code, res.body.error?.details.fields.map((f) => f.field)], query).toEqual([
        400,
        'VALIDATION_ERROR',
        [field],
      ]);
    }
  });
});

describe('facility sorts', () => {
  const orders: Array<[string, string[]]> = [
    ['sort=name', ['F01', 'F09', 'F02', 'F03', 'F04', 'F05', 'F06', 'F07', 'F08']],
    ['sort=-penalties_total', ['F04', 'F01', 'F02', 'F05', 'F08', 'F09', 'F07', 'F06', 'F03']],
    ['sort=-quarters_nc', ['F01', 'F08', 'F04', 'F02', 'F05', 'F09', 'F06', 'F03', 'F07']],
    ['sort=last_inspection', ['F04', 'F02', 'F06', 'F08', 'F01', 'F09', 'F05', 'F03', 'F07']],
    ['near=29.76,-95.37&radius_km=50&sort=distance', ['F01', 'F09', 'F02']],
    ['near=29.76,-95.37&radius_km=50&sort=name', ['F01', 'F09', 'F02']],
    ['epa_region=06&sort=-penalties_total', ['F04', 'F01', 'F02', 'F09', 'F03']],
  ];
  for (const [query, expected] of orders) {
    it(`${query} orders its facilities, without a value last, and pages of 2 see each once`, async () => {
      expect(await ids(`${query}&state=TX`)).toEqual(expected);
      expect(await walk(`${query}&state=TX`, 2)).toEqual(expected);
    });
  }

  it('carries the distance with near in any order', async () => {
    const res = await get('/v1/facilities?near=29.76,-95.37&radius_km=50&sort=-quarters_nc&state=TX');
    expect(res.body.data.map((f) => [f.registry_id, typeof f.distance_km])).toEqual([
      ['F01', 'number'],
      ['F02', 'number'],
      ['F09', 'number'],
    ]);
    expect(res.body.data[0]?.distance_km).toBe(0);
  });

  it("refuses one order's cursor under another with 400 VALIDATION_ERROR", async () => {
    const sorts = ['', 'sort=name', 'sort=-penalties_total', 'sort=-quarters_nc', 'sort=last_inspection'];
    for (const from of sorts) {
      const cursor = (await get(`/v1/facilities?${from}&limit=1`)).body.pagination.next_cursor as string;
      for (const to of sorts.filter((s) => s !== from)) {
        const res = await get(`/v1/facilities?${to}&limit=1&cursor=${cursor}`);
        expect([res.status, res.body.error?.details.fields], `${from} → ${to}`).toEqual([
          400,
          [{ field: 'cursor', message: 'is not a valid cursor for this list' }],
        ]);
      }
    }
  });
});

/** The plan of one page of `query`, with the planner kept off the scans that need no index. */
async function plan(
  query: Parameters<typeof facilityQuery>[0],
  off: string[],
  after?: Parameters<typeof facilityQuery>[2],
): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    for (const setting of off) await client.query(`SET LOCAL ${setting} = off`);
    const { text, values } = facilityQuery(query, 25, after);
    const { rows } = await client.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
    return JSON.stringify(rows[0]?.['QUERY PLAN']);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

describe('indexes (query plans)', () => {
  const filters: Array<[FacilityFilter, string]> = [
    [{ city: 'Houston' }, 'facilities_city_idx'],
    [{ county: 'Harris' }, 'facilities_county_idx'],
    [{ zip: '77002' }, 'facilities_zip5_idx'],
    [{ epa_region: '06' }, 'facilities_epa_region_idx'],
    [{ bbox: { min_lon: -96, min_lat: 29, max_lon: -95, max_lat: 30 } }, 'facilities_lat_lon_idx'],
    [{ naics: '3251' }, 'facilities_naics_prefix_idx'],
    [{ sic: '2869' }, 'facilities_sic_idx'],
    [{ major: true }, 'facilities_major_idx'],
    [{ min_quarters_nc: 4 }, 'facilities_quarters_nc_idx'],
    [{ snc: true }, 'facilities_snc_idx'],
    [{ min_penalties_usd: 5000 }, 'facilities_penalties_total_idx'],
    [{ penalized_since: '2024-01-01' }, 'facilities_penalized_idx'],
    [{ inspected_since: '2024-01-01' }, 'facilities_last_inspection_idx'],
    [{ not_inspected_since: '2024-01-01' }, 'facilities_last_inspection_idx'],
  ];
  for (const [filter, index] of filters) {
    it(`${Object.keys(filter)[0]} is served by ${index}`, async () => {
      // Without sequential and plain index scans, only an index whose expression matches the filter's can serve it.
      expect(await plan({ filter }, ['enable_seqscan', 'enable_indexscan'])).toContain(`"Index Name":"${index}"`);
    });
  }

  const sorts: Array<[FacilitySort, string, string | number]> = [
    ['name', 'facilities_name_idx', 'Bayou Chemicals'],
    ['-penalties_total', 'facilities_penalties_total_idx', '5000'],
    ['-quarters_nc', 'facilities_quarters_nc_idx', 4],
    ['last_inspection', 'facilities_last_inspection_idx', '2021-06-30'],
  ];
  for (const [sort, index, value] of sorts) {
    it(`sort=${sort} reads ${index} in order, from the cursor's position on`, async () => {
      const first = await plan({ filter: {}, sort }, ['enable_seqscan', 'enable_sort']);
      expect(first).toContain(`"Index Name":"${index}"`);
      const next = await plan({ filter: {}, sort }, ['enable_seqscan', 'enable_sort'], { value, registry_id: 'F02' });
      expect(next).toContain(`"Index Name":"${index}"`);
      expect(next).toContain('"Index Cond"');
    });
  }
});

/** The filters as the model reads them: what each means, written once more in TypeScript. */
type Filters = {
  city?: string;
  county?: string;
  zip?: string;
  epa_region?: string;
  bbox?: [number, number, number, number];
  naics?: string;
  sic?: string;
  major?: boolean;
  min_quarters_nc?: number;
  snc?: boolean;
  min_penalties_usd?: number;
  penalized_since?: string;
  inspected_since?: string;
  not_inspected_since?: string;
};

const FILTER_NAMES: Array<keyof Filters> = [
  'city',
  'county',
  'zip',
  'epa_region',
  'bbox',
  'naics',
  'sic',
  'major',
  'min_quarters_nc',
  'snc',
  'min_penalties_usd',
  'penalized_since',
  'inspected_since',
  'not_inspected_since',
];

function satisfies(f: Fixture, q: Filters): boolean {
  const checks: boolean[] = [
    q.city === undefined || f.city?.toLowerCase() === q.city.toLowerCase(),
    q.county === undefined || f.county?.toLowerCase() === q.county.toLowerCase(),
    q.zip === undefined || f.zip?.slice(0, 5) === q.zip,
    q.epa_region === undefined || f.epa_region === q.epa_region,
    q.bbox === undefined ||
      (f.latitude !== null &&
        f.longitude !== null &&
        f.longitude >= q.bbox[0] &&
        f.latitude >= q.bbox[1] &&
        f.longitude <= q.bbox[2] &&
        f.latitude <= q.bbox[3]),
    q.naics === undefined || f.naics_codes.some((c) => c.startsWith(q.naics as string)),
    q.sic === undefined || f.sic_codes.includes(q.sic),
    q.major === undefined || f.major === q.major,
    q.min_quarters_nc === undefined || (f.quarters_nc !== null && f.quarters_nc >= q.min_quarters_nc),
    q.snc === undefined || f.snc === q.snc,
    q.min_penalties_usd === undefined || (f.penalties_total !== null && f.penalties_total >= q.min_penalties_usd),
    q.penalized_since === undefined || (f.penalized !== null && f.penalized >= q.penalized_since),
    q.inspected_since === undefined || (f.inspected !== null && f.inspected >= q.inspected_since),
    q.not_inspected_since === undefined || f.inspected === null || f.inspected < q.not_inspected_since,
  ];
  return checks.every(Boolean);
}

function queryOf(q: Filters): string {
  return Object.entries(q)
    .map(([k, v]) => `${k}=${encodeURIComponent(Array.isArray(v) ? v.join(',') : String(v))}`)
    .join('&');
}

describe('any combination of filters (fast-check)', () => {
  const date = fc.constantFrom('2019-01-01', '2021-06-30', '2023-01-10', '2024-03-01', '2024-06-02', '2026-01-01');
  const everyFilter: fc.Arbitrary<Required<Filters>> = fc.record({
    city: fc.constantFrom('Houston', 'HOUSTON', 'Dallas', 'Seattle', 'Nowhere'),
    county: fc.constantFrom('Harris', 'erie', 'King'),
    zip: fc.constantFrom('77001', '77002', '44101', '00000'),
    epa_region: fc.constantFrom('02', '05', '06', '10'),
    bbox: fc.constantFrom<[number, number, number, number]>([-100, 25, -90, 35], [-125, 40, -75, 50], [-180, -90, 180, 90], [0, 0, 1, 1]),
    naics: fc.constantFrom('32', '325', '3251', '325110', '48', '11'),
    sic: fc.constantFrom('2869', '2911', '4491', '9999'),
    major: fc.boolean(),
    min_quarters_nc: fc.integer({ min: 0, max: 13 }),
    snc: fc.boolean(),
    min_penalties_usd: fc.constantFrom(0, 1, 250, 5000, 187500, 187501, 1000000, 2000000),
    penalized_since: date,
    inspected_since: date,
    not_inspected_since: date,
  });
  /** Up to four filters at once: more than that rarely leaves a facility to check. */
  const filters: fc.Arbitrary<Filters> = fc
    .tuple(everyFilter, fc.shuffledSubarray(FILTER_NAMES, { maxLength: 4 }))
    .map(([all, names]) => Object.fromEntries(names.map((name) => [name, all[name]])) as Filters);
  const sort = fc.constantFrom('', 'sort=name', 'sort=-penalties_total', 'sort=-quarters_nc', 'sort=last_inspection');

  it('returns exactly the facilities satisfying every filter given, each once across a page walk', async () => {
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(filters, sort, fc.integer({ min: 1, max: 4 }), async (q, order, limit) => {
        const query = [queryOf(q), order].filter(Boolean).join('&');
        const walked = await walk(query, limit);
        expect(new Set(walked).size).toBe(walked.length);
        const all = [...FIXTURES, ...MORE].filter((f) => satisfies(f, q)).map((f) => f.registry_id);
        expect([...walked].sort()).toEqual(all.sort());
        if (all.length > 0) nonEmpty++;
        // The walk keeps the order of the whole list in one page.
        expect(walked).toEqual(await ids(query));
      }),
      { numRuns: 150 },
    );
    // The combinations drawn select facilities, not only empty sets.
    expect(nonEmpty).toBeGreaterThan(30);
  });
});
