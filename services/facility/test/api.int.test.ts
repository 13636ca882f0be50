import { InternalAuth, ManualClock } from '@fcd/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemoData } from '../src/demo/demo-data';
import type { EnforcementCase, Facility, Violation } from '../src/domain/model';
import { AUTH_SECRET, accountHeader, buildTestApp, setupDb, type TestApp, type TestDb } from './helpers';

let db: TestDb;
let t: TestApp;
const demo = generateDemoData({ facilities: 400, seed: 'api-test' });
const auth = (method: string, url: string) => ({ 'x-fcd-account': accountHeader(method, url) });

type List<T> = { data: T[]; pagination: { limit: number; next_cursor: string | null; has_more: boolean } };

async function get<T = unknown>(url: string, headers: Record<string, string> = auth('GET', url)) {
  const res = await t.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, body: res.json() as T, headers: res.headers };
}

async function walk<T>(url: string, onPage?: (page: number) => Promise<void>): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = url.includes('?') ? '&' : '?';
    const res: { status: number; body: List<T> } = await get<List<T>>(cursor ? `${url}${sep}cursor=${cursor}` : url);
    expect(res.status).toBe(200);
    items.push(...res.body.data);
    cursor = res.body.pagination.next_cursor;
    expect(res.body.pagination.has_more).toBe(cursor !== null);
    pages++;
    if (onPage) await onPage(pages);
  } while (cursor);
  return { items, pages };
}

beforeAll(async () => {
  db = await setupDb('facility_api');
  t = await buildTestApp(db.pool);
  const report = await t.ingestion.ingestAll({
    facilities: demo.facilities.map((raw, index) => ({ ref: { index }, raw: { ...raw } })),
    violations: demo.violations.map((raw, index) => ({ ref: { index }, raw: { ...raw } })),
    cases: demo.cases.map((raw, index) => ({ ref: { index }, raw: { ...raw } })),
  });
  expect(report.errors).toEqual([]);
});

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

describe('gateway signature', () => {
  it('refuses a request without the signed account header with 401 UNAUTHORIZED', async () => {
    const res = await get<{ error: { code: string } }>('/v1/facilities', {});
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
  });

  it('refuses a header signed with another secret, and an expired one', async () => {
    const forged = await get<{ error: { code: string } }>('/v1/facilities', {
      'x-fcd-account': accountHeader('GET', '/v1/facilities', 'another-secret-that-is-long-enough-0123456789'),
    });
    expect(forged.status).toBe(401);
    const expired = await get<{ error: { code: string } }>('/v1/facilities', {
      'x-fcd-account': accountHeader('GET', '/v1/facilities', undefined, new ManualClock(Date.now() - 6_000)),
    });
    expect(expired.status).toBe(401);
    const tampered = accountHeader('GET', '/v1/facilities').replace(/^./, (c) => (c === 'e' ? 'f' : 'e'));
    expect((await get('/v1/facilities', { 'x-fcd-account': tampered })).status).toBe(401);
  });

  it('refuses a captured header replayed to another path, query, method or service', async () => {
    const captured = accountHeader('GET', '/v1/facilities?limit=1');
    expect((await get('/v1/facilities?limit=1', { 'x-fcd-account': captured })).status).toBe(200);
    for (const url of ['/v1/facilities?limit=2', '/v1/facilities', '/v1/violations?limit=1', '/v1/cases?limit=1']) {
      const replay = await get<{ error: { code: string } }>(url, { 'x-fcd-account': captured });
      expect(replay.status, url).toBe(401);
      expect(replay.body.error.code).toBe('UNAUTHORIZED');
    }
    const otherMethod = await t.app.inject({
      method: 'POST',
      url: '/internal/v1/facilities/existing',
      headers: { 'x-fcd-account': accountHeader('GET', '/internal/v1/facilities/existing') },
      payload: { ids: [] },
    });
    expect(otherMethod.statusCode).toBe(401);
    const forWebhook = new InternalAuth(AUTH_SECRET).sign(
      { account_id: 'acct_test', tier: 'pro', tier_rank: 1 },
      { audience: 'webhook', method: 'GET', path: '/v1/facilities?limit=1' },
    );
    expect((await get('/v1/facilities?limit=1', { 'x-fcd-account': forWebhook })).status).toBe(401);
  });

  it('accepts a header for a few seconds only', async () => {
    const clock = new ManualClock(Date.now() - 4_000);
    expect((await get('/v1/facilities', { 'x-fcd-account': accountHeader('GET', '/v1/facilities', undefined, clock) })).status).toBe(200);
    clock.set(Date.now() - 5_100);
    expect((await get('/v1/facilities', { 'x-fcd-account': accountHeader('GET', '/v1/facilities', undefined, clock) })).status).toBe(401);
  });

  it('guards every public route and the internal facility check', async () => {
    const f = demo.facilities[0];
    const { body } = await get<List<Facility>>(`/v1/facilities?limit=1`);
    const id = body.data[0]?.id as string;
    expect(f).toBeDefined();
    for (const url of [
      `/v1/facilities/${id}`,
      `/v1/facilities/${id}/violations`,
      `/v1/facilities/${id}/cases`,
      '/v1/violations',
      '/v1/cases',
      `/v1/cases/${id}`,
    ]) {
      expect((await get(url, {})).status, url).toBe(401);
    }
    const res = await t.app.inject({ method: 'POST', url: '/internal/v1/facilities/existing', payload: { ids: [id] } });
    expect(res.statusCode).toBe(401);
  });

  it('refuses an export to a Free claim itself, whatever the gateway decided (the second wall)', async () => {
    const url = '/internal/v1/exports/facilities?state=TX';
    const signed = (tier: string, tier_rank: number) =>
      new InternalAuth(AUTH_SECRET).sign({ account_id: 'acct_free', tier, tier_rank }, { audience: 'facility', method: 'GET', path: url });
    const free = await get(url, { 'x-fcd-account': signed('free', 0) });
    expect(free.status).toBe(403);
    expect(free.body).toEqual({
      error: {
        code: 'FORBIDDEN',
        message: 'Bulk exports are available on the Pro tier and above. Upgrade the account to use them.',
        details: { required_tier: 'pro', tier: 'free' },
      },
    });
    expect((await get(url, {})).status).toBe(401);
    expect((await t.app.inject({ method: 'GET', url, headers: { 'x-fcd-account': signed('pro', 1) } })).statusCode).toBe(200);
  });
});

describe('GET /v1/facilities', () => {
  const texas = demo.facilities.filter((f) => f.state === 'TX').map((f) => f.registry_id);

  it('walking all pages of state=TX with limit 7 returns every Texas facility exactly once, also while facilities are inserted during the walk', async () => {
    expect(texas.length).toBeGreaterThan(14);
    let inserted = 0;
    const { items, pages } = await walk<Facility>('/v1/facilities?state=TX&limit=7', async () => {
      // Between pages: one facility sorting before everything (behind the cursor), one after.
      inserted++;
      const report = await t.ingestion.ingestAll({
        facilities: [
          {
            ref: { index: 0 },
            raw: { registry_id: `0000TX${inserted}`, name: 'Early Plant', state: 'TX', compliance_status: 'no_violation' },
          },
          {
            ref: { index: 1 },
            raw: { registry_id: `9999TX${inserted}`, name: 'Late Plant', state: 'TX', compliance_status: 'no_violation' },
          },
        ],
      });
      expect(report.counts.facilities.inserted).toBe(2);
    });
    const ids = items.map((f) => f.registry_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(items.every((f) => f.state === 'TX')).toBe(true);
    const original = ids.filter((id) => !id.startsWith('0000TX') && !id.startsWith('9999TX'));
    expect(original).toEqual([...texas].sort());
    expect(pages).toBeGreaterThanOrEqual(Math.ceil(texas.length / 7));
    // Everything came in registry_id order.
    expect(ids).toEqual([...ids].sort());
  });

  it('matches state case-insensitively', async () => {
    const lower = await get<List<Facility>>('/v1/facilities?state=ca&limit=100');
    const upper = await get<List<Facility>>('/v1/facilities?state=CA&limit=100');
    expect(lower.status).toBe(200);
    expect(lower.body.data.map((f) => f.id)).toEqual(upper.body.data.map((f) => f.id));
    expect(lower.body.data.map((f) => f.registry_id)).toEqual(
      demo.facilities
        .filter((f) => f.state === 'CA')
        .map((f) => f.registry_id)
        .sort()
        .slice(0, 100),
    );
  });

  it('filters by program, compliance_status and q (name contains, case-insensitive, literal)', async () => {
    const caa = await walk<Facility>('/v1/facilities?program=caa&limit=100');
    expect(caa.items.map((f) => f.registry_id)).toEqual(
      demo.facilities
        .filter((f) => f.programs.includes('CAA'))
        .map((f) => f.registry_id)
        .sort(),
    );
    const sig = await walk<Facility>('/v1/facilities?compliance_status=significant_violation&program=RCRA&limit=100');
    expect(sig.items.map((f) => f.registry_id)).toEqual(
      demo.facilities
        .filter((f) => f.compliance_status === 'significant_violation' && f.programs.includes('RCRA'))
        .map((f) => f.registry_id)
        .sort(),
    );
    expect(sig.items.length).toBeGreaterThan(0);
    const q = await walk<Facility>('/v1/facilities?q=REFIN&limit=100');
    expect(q.items.map((f) => f.registry_id)).toEqual(
      demo.facilities
        .filter((f) => f.name.toLowerCase().includes('refin'))
        .map((f) => f.registry_id)
        .sort(),
    );
    expect(q.items.length).toBeGreaterThan(0);
    const wildcard = await get<List<Facility>>('/v1/facilities?q=%25');
    expect(wildcard.body.data).toEqual([]);
  });

  it('defaults to 25 per page and reports the limit', async () => {
    const res = await get<List<Facility>>('/v1/facilities');
    expect(res.body.data).toHaveLength(25);
    expect(res.body.pagination).toMatchObject({ limit: 25, has_more: true });
  });

  it.each([
    ['state=ZZ', 'state'],
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['cursor=not-a-cursor', 'cursor'],
    ['color=red', 'color'],
    ['program=XYZ', 'program'],
    ['compliance_status=bad', 'compliance_status'],
  ])('rejects %s with 400 VALIDATION_ERROR naming %s', async (query, field) => {
    const res = await get<{ error: { code: string; details: { fields: { field: string }[] } } }>(`/v1/facilities?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.fields.map((f) => f.field)).toEqual([field]);
  });

  it('rejects a cursor of another list, and lists every problem at once', async () => {
    const v = await get<List<Violation>>('/v1/violations?limit=1');
    const foreign = v.body.pagination.next_cursor as string;
    const res = await get<{ error: { details: { fields: { field: string }[] } } }>(`/v1/facilities?cursor=${foreign}`);
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields).toEqual([{ field: 'cursor', message: 'is not a valid cursor for this list' }]);
    const many = await get<{ error: { details: { fields: { field: string }[] } } }>('/v1/facilities?state=ZZ&limit=0&extra=1');
    expect(many.body.error.details.fields.map((f) => f.field).sort()).toEqual(['extra', 'limit', 'state']);
  });

  it('declares its output: a facility carries exactly the documented fields (docs/facility.md)', async () => {
    const res = await get<List<Facility>>('/v1/facilities?limit=1');
    expect(Object.keys(res.body.data[0] as object).sort()).toEqual(
      [
        'id',
        'registry_id',
        'name',
        'street',
        'city',
        'state',
        'zip',
        'county',
        'latitude',
        'longitude',
        'naics_codes',
        'programs',
        'compliance_status',
        'last_inspection_date',
        'epa_region',
        'sic_codes',
        'major',
        'program_status',
        'compliance',
        'inspections',
        'enforcement',
        'penalties',
        'data_as_of',
        'updated_at',
      ].sort(),
    );
    expect(res.headers['content-type']).toContain('application/json');
  });
});

describe('GET /v1/facilities/{id} and its violations and cases', () => {
  const withCase = demo.cases.find((c) => c.registry_ids.length > 1);

  async function facilityByRegistry(registryId: string): Promise<Facility> {
    const all = await walk<Facility>('/v1/facilities?limit=100');
    const f = all.items.find((x) => x.registry_id === registryId);
    if (!f) throw new Error(`no facility ${registryId}`);
    return f;
  }

  it('returns one facility, equal to its listing entry', async () => {
    const listed = (await get<List<Facility>>('/v1/facilities?limit=1')).body.data[0] as Facility;
    const res = await get<{ data: Facility }>(`/v1/facilities/${listed.id}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(listed);
    const source = demo.facilities.find((f) => f.registry_id === listed.registry_id);
    expect(res.body.data).toMatchObject({ ...source });
  });

  it('refuses an unknown query parameter on the by-id routes too, naming it', async () => {
    const listed = (await get<List<Facility>>('/v1/facilities?limit=1')).body.data[0] as Facility;
    const aCase = (await get<List<{ id: string }>>('/v1/cases?limit=1')).body.data[0] as { id: string };
    for (const url of [`/v1/facilities/${listed.id}?expand=violations`, `/v1/cases/${aCase.id}?expand=violations`]) {
      const res = await get<{ error: { code: string; details: { fields: { field: string }[] } } }>(url);
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.details.fields.map((f) => f.field)).toEqual(['expand']);
    }
  });

  it('answers 404 NOT_FOUND for an unknown id and for a malformed one', async () => {
    const unknown = await get<{ error: { code: string } }>('/v1/facilities/7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
    for (const url of ['/v1/facilities/not-a-uuid', '/v1/facilities/123/violations', '/v1/facilities/x/cases', '/v1/cases/x']) {
      const res = await get<{ error: { code: string } }>(url);
      expect(res.status, url).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
    const subUnknown = await get('/v1/facilities/7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f/violations');
    expect(subUnknown.status).toBe(404);
  });

  it('lists a facility’s violations newest first, with the published fields plus description and resolved_date', async () => {
    const counts = new Map<string, number>();
    for (const v of demo.violations) counts.set(v.registry_id, (counts.get(v.registry_id) ?? 0) + 1);
    const [registryId, n] = [...counts].sort((a, b) => b[1] - a[1])[0] as [string, number];
    const facility = await facilityByRegistry(registryId);
    const res = await walk<Violation>(`/v1/facilities/${facility.id}/violations?limit=2`);
    expect(res.items).toHaveLength(n);
    expect(res.items.every((v) => v.facility_id === facility.id && v.facility_name === facility.name)).toBe(true);
    const dates = res.items.map((v) => v.violation_date);
    expect(dates).toEqual([...dates].sort().reverse());
    expect(Object.keys(res.items[0] as object).sort()).toEqual(
      [
        'id',
        'facility_id',
        'facility_name',
        'program',
        'violation_type',
        'violation_date',
        'severity',
        'description',
        'resolved_date',
      ].sort(),
    );
  });

  it('lists a multi-facility case under each of its facilities', async () => {
    expect(withCase).toBeDefined();
    const c = withCase as (typeof demo.cases)[number];
    const facilities = await Promise.all(c.registry_ids.map(facilityByRegistry));
    for (const f of facilities) {
      const res = await walk<EnforcementCase>(`/v1/facilities/${f.id}/cases`);
      const found = res.items.find((x) => x.case_number === c.case_number);
      expect(found?.facility_ids).toEqual(facilities.map((x) => x.id).sort());
    }
  });
});

describe('GET /v1/violations', () => {
  it('walks every violation exactly once, newest first', async () => {
    const res = await walk<Violation>('/v1/violations?limit=100');
    expect(res.items).toHaveLength(demo.violations.length);
    expect(new Set(res.items.map((v) => v.id)).size).toBe(demo.violations.length);
    const keys = res.items.map((v) => `${v.violation_date}|${v.id}`);
    expect(keys).toEqual([...keys].sort().reverse());
  });

  it('filters by facility_id, program, severity and since', async () => {
    const since = '2024-06-01';
    const expected = demo.violations.filter((v) => v.program === 'CWA' && v.severity === 'significant' && v.violation_date >= since);
    const res = await walk<Violation>(`/v1/violations?program=CWA&severity=significant&since=${since}&limit=50`);
    expect(res.items.map((v) => v.violation_date).sort()).toEqual(expected.map((v) => v.violation_date).sort());
    expect(res.items.length).toBeGreaterThan(0);

    const one = res.items[0] as Violation;
    const byFacility = await walk<Violation>(`/v1/violations?facility_id=${one.facility_id}`);
    expect(byFacility.items.every((v) => v.facility_id === one.facility_id)).toBe(true);
    expect(byFacility.items.map((v) => v.id)).toContain(one.id);
  });

  it.each([
    ['facility_id=nope', 'facility_id'],
    ['since=2024-02-30', 'since'],
    ['severity=huge', 'severity'],
    ['state=TX', 'state'],
  ])('rejects %s naming %s', async (query, field) => {
    const res = await get<{ error: { code: string; details: { fields: { field: string }[] } } }>(`/v1/violations?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.error.details.fields.map((f) => f.field)).toEqual([field]);
  });
});

describe('GET /v1/cases', () => {
  it('walks every case once, filed most recently first, and filters by status', async () => {
    const res = await walk<EnforcementCase>('/v1/cases?limit=30');
    expect(res.items.map((c) => c.case_number).sort()).toEqual(demo.cases.map((c) => c.case_number).sort());
    const keys = res.items.map((c) => `${c.filed_date}|${c.id}`);
    expect(keys).toEqual([...keys].sort().reverse());
    const settled = await walk<EnforcementCase>('/v1/cases?status=settled&limit=100');
    expect(settled.items.map((c) => c.case_number).sort()).toEqual(
      demo.cases
        .filter((c) => c.status === 'settled')
        .map((c) => c.case_number)
        .sort(),
    );
  });

  it('returns one case with exactly the documented fields (docs/facility.md)', async () => {
    const listed = (await get<List<EnforcementCase>>('/v1/cases?limit=1')).body.data[0] as EnforcementCase;
    const res = await get<{ data: EnforcementCase }>(`/v1/cases/${listed.id}`);
    expect(res.body.data).toEqual(listed);
    expect(Object.keys(listed).sort()).toEqual(
      [
        'id',
        'case_number',
        'case_type',
        'status',
        'lead_agency',
        'filed_date',
        'settled_date',
        'penalty_amount_usd',
        'facility_ids',
        'updated_at',
      ].sort(),
    );
    const unknown = await get('/v1/cases/7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f');
    expect(unknown.status).toBe(404);
  });
});

describe('POST /internal/v1/facilities/existing', () => {
  it('returns the ids that name existing facilities', async () => {
    const ids = (await get<List<Facility>>('/v1/facilities?limit=3')).body.data.map((f) => f.id);
    const missing = '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f';
    const res = await t.app.inject({
      method: 'POST',
      url: '/internal/v1/facilities/existing',
      headers: auth('POST', '/internal/v1/facilities/existing'),
      payload: { ids: [ids[0], missing, (ids[1] as string).toUpperCase(), ids[2]] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: { existing: [ids[0], ids[1], ids[2]] } });
  });

  it('rejects more than 1000 ids and non-UUIDs', async () => {
    const many = Array.from({ length: 1001 }, () => '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f');
    const res = await t.app.inject({
      method: 'POST',
      url: '/internal/v1/facilities/existing',
      headers: auth('POST', '/internal/v1/facilities/existing'),
      payload: { ids: many },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('VALIDATION_ERROR');
    const bad = await t.app.inject({
      method: 'POST',
      url: '/internal/v1/facilities/existing',
      headers: auth('POST', '/internal/v1/facilities/existing'),
      payload: { ids: ['x'] },
    });
    expect(bad.json().error.details.fields).toEqual([{ field: 'ids[0]', message: 'must match format "uuid"' }]);
  });
});

describe('HTTP conventions', () => {
  it('answers 405 with Allow for a known path and another method, 404 for an unknown path', async () => {
    const res = await t.app.inject({ method: 'DELETE', url: '/v1/facilities', headers: auth('DELETE', '/v1/facilities') });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(res.json().error.code).toBe('METHOD_NOT_ALLOWED');
    const unknown = await get<{ error: { code: string } }>('/v1/nothing-here');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
  });

  it('echoes the gateway’s request id', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/cases?limit=1',
      headers: { ...auth('GET', '/v1/cases?limit=1'), 'x-request-id': 'req_from_gateway_1' },
    });
    expect(res.headers['x-request-id']).toBe('req_from_gateway_1');
  });

  it('serves /healthz and /readyz, and names the failing dependency when not ready', async () => {
    expect((await get('/healthz', {})).body).toEqual({ data: { status: 'ok' } });
    expect((await get('/readyz', {})).status).toBe(200);
    const down = await buildTestApp(db.pool, {
      readiness: {
        postgres: () => db.pool.query('SELECT 1'),
        nats: async () => {
          throw new Error('not connected');
        },
      },
    });
    try {
      const res = await down.app.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.details.checks).toEqual({ postgres: { status: 'up' }, nats: { status: 'down', error: 'not connected' } });
      expect(res.headers['retry-after']).toBe('1');
    } finally {
      await down.app.close();
    }
  });

  it('reports not ready once shutdown began', async () => {
    const closing = await buildTestApp(db.pool, { shuttingDown: () => true });
    try {
      const res = await closing.app.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.details.checks.process.status).toBe('down');
    } finally {
      await closing.app.close();
    }
  });
});
