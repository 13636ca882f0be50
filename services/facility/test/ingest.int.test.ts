import { ManualClock } from '@fcd/service-kit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DomainEvent } from '../src/domain/events';
import { SNAPSHOTS_IN_UPSERT_MAX } from '../src/store/ingest';
import type { IngestReport } from '../src/store/ingestion';
import { accountHeader, buildTestApp, INGEST_TOKEN, sequentialIds, setupDb, type TestApp, type TestDb } from './helpers';

let db: TestDb;
let t: TestApp;
const clock = new ManualClock(Date.parse('2026-03-01T12:00:00.000Z'));
const bearer = { authorization: `Bearer ${INGEST_TOKEN}` };

const plant = {
  registry_id: '110000000101',
  name: 'Gulf Coast Refinery',
  street: '100 Refinery Rd',
  city: 'Beaumont',
  state: 'tx',
  zip: '77701',
  county: 'Jefferson County',
  latitude: 30.08,
  longitude: -94.13,
  naics_codes: ['324110'],
  programs: ['CAA', 'RCRA'],
  compliance_status: 'no_violation',
  last_inspection_date: '2025-11-02',
  epa_region: '06',
  sic_codes: ['2911'],
  major: true,
  program_status: { caa: 'Violation Identified', cwa: null, rcra: 'No Violation Identified' },
  compliance: { quarters_with_noncompliance: 3, programs_with_snc: 0, snc: false },
  inspections: { count: 4, last_date: '2025-11-02' },
  enforcement: { informal_actions: 1, formal_actions: 1, last_formal_action_date: '2026-01-15' },
  penalties: { count: 1, total_usd: 187500, last_amount_usd: 187500, last_date: '2025-08-19' },
};
const mill = { registry_id: '110000000102', name: 'Piedmont Paper Mill', state: 'NC', compliance_status: 'violation', programs: 'CAA;CWA' };

async function ingest(payload: unknown, headers: Record<string, string> = bearer, url = '/internal/v1/ingest') {
  const res = await t.app.inject({ method: 'POST', url, headers: { ...headers }, payload: payload as object });
  return { status: res.statusCode, body: res.json() as { data: IngestReport; error?: { code: string } } };
}

async function ingestText(body: string, contentType: string, kind: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: `/internal/v1/ingest?kind=${kind}`,
    headers: { ...bearer, 'content-type': contentType },
    payload: body,
  });
  return { status: res.statusCode, body: res.json() as { data: IngestReport } };
}

async function outbox(): Promise<DomainEvent[]> {
  const { rows } = await db.pool.query<{ payload: string }>('SELECT payload FROM outbox ORDER BY seq');
  return rows.map((r) => JSON.parse(r.payload) as DomainEvent);
}

async function facilityId(registryId: string): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM facilities WHERE registry_id = $1', [registryId]);
  return rows[0]?.id as string;
}

beforeAll(async () => {
  db = await setupDb('facility_ingest');
  t = await buildTestApp(db.pool, { clock, ids: sequentialIds(7) });
});

afterAll(async () => {
  await t?.app.close();
  await db?.close();
});

beforeEach(async () => {
  await db.pool.query('TRUNCATE outbox, cases, violations, facilities');
});

describe('ingestion API', () => {
  it('refuses a request without the ingestion bearer token, with a wrong one, or with only the gateway header', async () => {
    expect((await ingest({ facilities: [plant] }, {})).status).toBe(401);
    expect((await ingest({ facilities: [plant] }, { authorization: `Bearer ${INGEST_TOKEN}x` })).status).toBe(401);
    expect((await ingest({ facilities: [plant] }, { 'x-fcd-account': accountHeader('POST', '/internal/v1/ingest') })).status).toBe(401);
    const { rows } = await db.pool.query('SELECT 1 FROM facilities');
    expect(rows).toHaveLength(0);
  });

  it('lands the good rows and reports each bad one by index and field', async () => {
    const res = await ingest({
      facilities: [plant, { registry_id: 'BAD 1', name: '', state: 'ZZ', compliance_status: 'clean', extra: 1 }, mill],
      violations: [
        {
          source_id: 'V-1',
          registry_id: plant.registry_id,
          program: 'CAA',
          violation_type: 'Opacity exceedance',
          violation_date: '2026-02-01',
          severity: 'moderate',
        },
        {
          source_id: 'V-2',
          registry_id: 'no-such-facility',
          program: 'CAA',
          violation_type: 'x',
          violation_date: '2026-02-01',
          severity: 'minor',
        },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.data.counts.facilities).toEqual({ received: 3, inserted: 2, updated: 0, unchanged: 0, rejected: 1 });
    expect(res.body.data.counts.violations).toEqual({ received: 2, inserted: 1, updated: 0, unchanged: 0, rejected: 1 });
    expect(res.body.data.errors).toEqual([
      { kind: 'facilities', index: 1, field: 'extra', message: 'is not a known field' },
      { kind: 'facilities', index: 1, field: 'registry_id', message: 'must be letters, digits and . _ : / -' },
      { kind: 'facilities', index: 1, field: 'name', message: 'is required' },
      { kind: 'facilities', index: 1, field: 'state', message: 'must be a USPS state code' },
      {
        kind: 'facilities',
        index: 1,
        field: 'compliance_status',
        message: 'must be one of no_violation, violation, significant_violation',
      },
      { kind: 'violations', index: 1, field: 'registry_id', message: 'names no known facility' },
    ]);
    const { rows } = await db.pool.query('SELECT registry_id, state, programs FROM facilities ORDER BY registry_id');
    expect(rows).toEqual([
      { registry_id: plant.registry_id, state: 'TX', programs: ['CAA', 'RCRA'] },
      { registry_id: mill.registry_id, state: 'NC', programs: ['CAA', 'CWA'] },
    ]);
  });

  it('writes, in the same transaction, exactly the events of what changed: violation.new, case.new, case.updated, facility.status_changed', async () => {
    await ingest({
      facilities: [plant, mill],
      cases: [
        {
          case_number: 'CAA-06-2026-00001',
          case_type: 'administrative_formal',
          status: 'filed',
          lead_agency: 'EPA',
          filed_date: '2026-01-15',
          registry_ids: [plant.registry_id],
        },
      ],
    });
    const before = await outbox();
    expect(before.map((e) => e.type)).toEqual(['case.new']);

    const then = new Date(clock.now()).toISOString();
    clock.advance(60_000);
    const now = new Date(clock.now()).toISOString();
    const res = await ingest({
      facilities: [{ ...plant, compliance_status: 'significant_violation' }, mill],
      violations: [
        {
          source_id: 'CAA-V-9',
          registry_id: plant.registry_id,
          program: 'CAA',
          violation_type: 'Emission limit exceedance',
          violation_date: '2026-02-20',
          severity: 'significant',
          description: 'SO2 above permit limit',
        },
      ],
      cases: [
        {
          case_number: 'CAA-06-2026-00001',
          case_type: 'administrative_formal',
          status: 'active',
          lead_agency: 'EPA',
          filed_date: '2026-01-15',
          registry_ids: [plant.registry_id],
        },
        {
          case_number: 'CWA-04-2026-00002',
          case_type: 'judicial',
          status: 'filed',
          lead_agency: 'State',
          filed_date: '2026-02-25',
          penalty_amount_usd: 12500,
          registry_ids: [mill.registry_id, plant.registry_id],
        },
      ],
    });
    expect(res.body.data.events).toEqual({ 'violation.new': 1, 'case.new': 1, 'case.updated': 1, 'facility.status_changed': 1 });
    expect(res.body.data.counts.facilities).toEqual({ received: 2, inserted: 0, updated: 1, unchanged: 1, rejected: 0 });

    const after = (await outbox()).slice(before.length);
    expect(after.map((e) => e.type)).toEqual(['facility.status_changed', 'violation.new', 'case.updated', 'case.new']);
    const plantId = await facilityId(plant.registry_id);
    const millId = await facilityId(mill.registry_id);
    for (const e of after) {
      expect(e.id).toMatch(/^evt_00000007-0000-4000-8000-\d{12}$/);
      expect(e.created_at).toBe(now);
      expect(Object.keys(e)).toEqual(['id', 'type', 'created_at', 'data']);
    }
    const [status, violation, updated, created] = after;
    // The facility snapshots the events carry: the plant as this request changed it, the mill as
    // the first request wrote it (this one left it unchanged).
    const plantNow = {
      id: plantId,
      ...plant,
      state: 'TX',
      compliance_status: 'significant_violation',
      data_as_of: now,
      updated_at: now,
    };
    const millThen = {
      id: millId,
      registry_id: mill.registry_id,
      name: mill.name,
      street: null,
      city: null,
      state: 'NC',
      zip: null,
      county: null,
      latitude: null,
      longitude: null,
      naics_codes: [],
      programs: ['CAA', 'CWA'],
      compliance_status: 'violation',
      last_inspection_date: null,
      epa_region: null,
      sic_codes: [],
      major: false,
      program_status: { caa: null, cwa: null, rcra: null },
      compliance: { quarters_with_noncompliance: 0, programs_with_snc: 0, snc: false },
      inspections: { count: 0, last_date: null },
      enforcement: { informal_actions: 0, formal_actions: 0, last_formal_action_date: null },
      penalties: { count: 0, total_usd: null, last_amount_usd: null, last_date: null },
      data_as_of: then,
      updated_at: then,
    };
    expect(status?.data).toEqual({
      previous_status: 'no_violation',
      facility: plantNow,
    });
    expect(violation?.data).toEqual({
      violation: {
        id: expect.stringMatching(/^00000007-/),
        facility_id: plantId,
        facility_name: plant.name,
        program: 'CAA',
        violation_type: 'Emission limit exceedance',
        violation_date: '2026-02-20',
        severity: 'significant',
        description: 'SO2 above permit limit',
        resolved_date: null,
      },
      facility: plantNow,
    });
    expect(Object.keys(violation?.data ?? {})).toEqual(['violation', 'facility']);
    expect(updated?.data).toEqual({
      previous_status: 'filed',
      case: {
        id: expect.stringMatching(/^00000007-/),
        case_number: 'CAA-06-2026-00001',
        case_type: 'administrative_formal',
        status: 'active',
        lead_agency: 'EPA',
        filed_date: '2026-01-15',
        settled_date: null,
        penalty_amount_usd: null,
        facility_ids: [plantId],
        updated_at: now,
      },
      facilities: [plantNow],
    });
    expect(Object.keys(updated?.data ?? {})).toEqual(['case', 'previous_status', 'facilities']);
    expect(created?.data).toEqual({
      case: {
        id: expect.stringMatching(/^00000007-/),
        case_number: 'CWA-04-2026-00002',
        case_type: 'judicial',
        status: 'filed',
        lead_agency: 'State',
        filed_date: '2026-02-25',
        settled_date: null,
        penalty_amount_usd: '12500.00',
        facility_ids: [plantId, millId].sort(),
        updated_at: now,
      },
      // One per facility_ids, in that order.
      facilities: plantId < millId ? [plantNow, millThen] : [millThen, plantNow],
    });
    expect(Object.keys(created?.data ?? {})).toEqual(['case', 'facilities']);
    // What the API serves is what the event carried.
    const api = await t.app.inject({
      method: 'GET',
      url: `/v1/facilities/${plantId}`,
      headers: { 'x-fcd-account': accountHeader('GET', `/v1/facilities/${plantId}`) },
    });
    expect(api.json().data).toEqual((status as DomainEvent & { data: { facility: unknown } }).data.facility);
  });

  // A chunk of up to SNAPSHOTS_IN_UPSERT_MAX violations reads its snapshots in the upsert; a larger
  // one with a query after it. Either way each event carries its own violation's facility, as the
  // API serves it, and an updated violation has no event.
  it.each([
    ['a small batch (the upsert reads them)', SNAPSHOTS_IN_UPSERT_MAX],
    ['a large batch (a query after the upsert reads them)', SNAPSHOTS_IN_UPSERT_MAX + 1],
  ])('gives each new violation the snapshot of its own facility, in %s', async (_batch, count) => {
    await ingest({ facilities: [plant, mill] });
    const violation = (i: number) => ({
      source_id: `SNAP-${i}`,
      registry_id: i % 3 === 0 ? mill.registry_id : plant.registry_id,
      program: 'CAA',
      violation_type: 'Emission limit exceedance',
      violation_date: '2026-02-20',
      severity: 'moderate',
      description: `row ${i}`,
    });
    // One violation exists already: the batch updates it (no event) beside the new ones.
    await ingest({ violations: [violation(0)] });
    const before = (await outbox()).length;
    const rows = Array.from({ length: count }, (_, i) => violation(i));
    rows[0] = { ...violation(0), description: 'changed' };
    const res = await ingest({ violations: rows });
    expect(res.body.data.counts.violations).toEqual({ received: count, inserted: count - 1, updated: 1, unchanged: 0, rejected: 0 });
    const served = async (id: string) => {
      const path = `/v1/facilities/${id}`;
      return (await t.app.inject({ method: 'GET', url: path, headers: { 'x-fcd-account': accountHeader('GET', path) } })).json().data;
    };
    const facilities = {
      [plant.registry_id]: await served(await facilityId(plant.registry_id)),
      [mill.registry_id]: await served(await facilityId(mill.registry_id)),
    };
    const events = (await outbox()).slice(before) as Array<
      DomainEvent & { data: { violation: { description: string; facility_id: string }; facility: { id: string } } }
    >;
    expect(events.map((e) => e.data.violation.description)).toEqual(rows.slice(1).map((r) => r.description));
    for (const [i, e] of events.entries()) {
      expect(e.data.facility).toEqual(facilities[(rows[i + 1] as { registry_id: string }).registry_id]);
      expect(e.data.facility.id).toBe(e.data.violation.facility_id);
    }
  });

  it('is idempotent: the same rows again change nothing and write no event', async () => {
    const rows = {
      facilities: [plant, mill],
      violations: [
        {
          source_id: 'V-1',
          registry_id: plant.registry_id,
          program: 'CAA',
          violation_type: 'x',
          violation_date: '2026-02-01',
          severity: 'minor',
        },
      ],
      cases: [
        {
          case_number: 'C-1',
          case_type: 'judicial',
          status: 'settled',
          lead_agency: 'EPA',
          filed_date: '2026-01-01',
          settled_date: '2026-02-01',
          penalty_amount_usd: '1000.5',
          registry_ids: `${mill.registry_id};${plant.registry_id}`,
        },
      ],
    };
    const first = await ingest(rows);
    expect(first.body.data.events).toEqual({ 'violation.new': 1, 'case.new': 1, 'case.updated': 0, 'facility.status_changed': 0 });
    const snapshot = await db.pool.query('SELECT registry_id, updated_at FROM facilities ORDER BY 1');
    const outboxBefore = await outbox();
    clock.advance(1000);
    const second = await ingest(rows);
    expect(second.body.data.counts).toEqual({
      facilities: { received: 2, inserted: 0, updated: 0, unchanged: 2, rejected: 0 },
      violations: { received: 1, inserted: 0, updated: 0, unchanged: 1, rejected: 0 },
      cases: { received: 1, inserted: 0, updated: 0, unchanged: 1, rejected: 0 },
    });
    expect(second.body.data.events).toEqual({ 'violation.new': 0, 'case.new': 0, 'case.updated': 0, 'facility.status_changed': 0 });
    expect(await outbox()).toEqual(outboxBefore);
    expect((await db.pool.query('SELECT registry_id, updated_at FROM facilities ORDER BY 1')).rows).toEqual(snapshot.rows);
  });

  it('updates a record without an event when only fields other than the watched status change', async () => {
    await ingest({ facilities: [plant] });
    clock.advance(1000);
    const res = await ingest({ facilities: [{ ...plant, name: 'Gulf Coast Refinery LLC' }] });
    expect(res.body.data.counts.facilities.updated).toBe(1);
    expect(await outbox()).toEqual([]);
  });

  it('writes nothing when the transaction fails: no change without its event', async () => {
    await ingest({ facilities: [plant] });
    await db.pool.query('ALTER TABLE outbox RENAME TO outbox_away');
    try {
      const res = await ingest({ facilities: [{ ...plant, compliance_status: 'violation' }] });
      expect(res.status).toBe(500);
    } finally {
      await db.pool.query('ALTER TABLE outbox_away RENAME TO outbox');
    }
    const { rows } = await db.pool.query('SELECT compliance_status FROM facilities');
    expect(rows).toEqual([{ compliance_status: 'no_violation' }]);
    expect(await outbox()).toEqual([]);
  });

  it('applies a key seen twice in one file in order (the later row wins and its change is an event)', async () => {
    const res = await ingestText(
      [JSON.stringify(plant), JSON.stringify({ ...plant, compliance_status: 'violation' })].join('\n'),
      'application/x-ndjson',
      'facilities',
    );
    expect(res.body.data.counts.facilities).toEqual({ received: 2, inserted: 1, updated: 1, unchanged: 0, rejected: 0 });
    expect((await outbox()).map((e) => [e.type, (e.data as { previous_status: string }).previous_status])).toEqual([
      ['facility.status_changed', 'no_violation'],
    ]);
  });

  it('reads NDJSON bodies and names bad rows by line', async () => {
    const body = [JSON.stringify(plant), '', '{not json', '[1,2]', JSON.stringify({ ...mill, state: 'XX' }), JSON.stringify(mill)].join(
      '\n',
    );
    const res = await ingestText(body, 'application/x-ndjson', 'facilities');
    expect(res.status).toBe(200);
    expect(res.body.data.counts.facilities).toEqual({ received: 5, inserted: 2, updated: 0, unchanged: 0, rejected: 3 });
    expect(res.body.data.errors).toEqual([
      { kind: 'facilities', line: 3, field: 'line', message: 'is not valid JSON' },
      { kind: 'facilities', line: 4, field: 'line', message: 'must be a JSON object' },
      { kind: 'facilities', line: 5, field: 'state', message: 'must be a USPS state code' },
    ]);
  });

  it('reads CSV bodies (header is line 1; lists separated by ;) and names bad rows by line', async () => {
    await ingest({ facilities: [plant, mill] });
    const csv = [
      'case_number,case_type,status,lead_agency,filed_date,settled_date,penalty_amount_usd,registry_ids',
      `C-10,judicial,filed,EPA,2026-01-05,,,${plant.registry_id};${mill.registry_id}`,
      'C-11,judicial,filed,EPA,2026-01-05,,,999',
      '"C-12",administrative_formal,settled,"State, NC",2026-01-05,2026-01-01,10.123,110000000102',
      'C-13,judicial,filed',
    ].join('\r\n');
    const res = await ingestText(csv, 'text/csv', 'cases');
    expect(res.body.data.counts.cases).toEqual({ received: 4, inserted: 1, updated: 0, unchanged: 0, rejected: 3 });
    expect(res.body.data.errors).toEqual([
      { kind: 'cases', line: 3, field: 'registry_ids', message: 'name no known facility: 999' },
      { kind: 'cases', line: 4, field: 'settled_date', message: 'must not be before filed_date' },
      { kind: 'cases', line: 4, field: 'penalty_amount_usd', message: 'must be a non-negative amount in dollars with at most 2 decimals' },
      { kind: 'cases', line: 5, field: 'line', message: 'has 3 columns, the header has 8' },
    ]);
    const { rows } = await db.pool.query('SELECT cardinality(facility_ids) AS n FROM cases');
    expect(rows).toEqual([{ n: 2 }]);
  });

  it('stops a CSV file whose header names an unknown column, importing nothing', async () => {
    const res = await ingestText('registry_id,name,state,compliance_status,colour\n1,a,TX,violation,red\n', 'text/csv', 'facilities');
    expect(res.body.data.counts.facilities).toEqual({ received: 1, inserted: 0, updated: 0, unchanged: 0, rejected: 1 });
    expect(res.body.data.errors).toEqual([{ kind: 'facilities', line: 1, field: 'colour', message: 'is not a known column' }]);
  });

  it('validates the request itself', async () => {
    const noKind = await t.app.inject({
      method: 'POST',
      url: '/internal/v1/ingest',
      headers: { ...bearer, 'content-type': 'text/csv' },
      payload: 'a',
    });
    expect(noKind.statusCode).toBe(400);
    expect(noKind.json().error.details.fields).toEqual([{ field: 'kind', message: 'is required for NDJSON and CSV bodies' }]);
    const badBody = await ingest({ facilities: {}, vehicles: [] });
    expect(badBody.status).toBe(400);
    expect(badBody.body.error?.code).toBe('VALIDATION_ERROR');
  });

  it('counts ingested rows by outcome and reports the outbox backlog in /metrics', async () => {
    const { metrics } = t;
    metrics.ingestRows.reset();
    await ingest({ facilities: [plant, { registry_id: 'x' }] });
    await ingest({ facilities: [{ ...plant, compliance_status: 'violation' }] });
    clock.advance(90_000);
    const text = await metrics.registry.metrics();
    expect(text).toContain('fcd_facility_ingest_rows_total{kind="facilities",outcome="inserted",service="facility"} 1');
    expect(text).toContain('fcd_facility_ingest_rows_total{kind="facilities",outcome="rejected",service="facility"} 1');
    expect(text).toContain('fcd_facility_ingest_rows_total{kind="facilities",outcome="updated",service="facility"} 1');
    expect(text).toContain('fcd_facility_outbox_pending{service="facility"} 1');
    expect(text).toContain('fcd_facility_outbox_oldest_age_seconds{service="facility"} 90');
  });
});
