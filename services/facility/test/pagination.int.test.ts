import { randomUUID } from 'node:crypto';
import type { PageRequest } from '@fcd/service-kit';
import { type ListUnderTest, paginationSuite } from '@fcd/testing/pagination-suite';
import { afterAll, beforeAll } from 'vitest';
import { encodeCursor } from '../src/domain/cursor';
import { listCases, listFacilities, listFacilitiesNear, listViolations } from '../src/store/queries';
import { setupDb, type TestDb } from './helpers';

/**
 * The shared keyset-pagination suite (service-kit's `keysetPage`) against the facility service's
 * lists on the real Postgres: facilities by registry_id, a search by place, and a facility's
 * violations and cases. Each list the suite makes is its own slice of one database: facilities
 * named with a token of their own (the `q` filter), violations and cases of a facility of their own.
 */
let db: TestDb;

beforeAll(async () => {
  db = await setupDb('facility_pagination');
});

afterAll(async () => {
  await db?.close();
});

/** Registry ids that grow with every facility added, whatever the list. */
let serial = 0;
const nextRegistryId = () => `PAG${String(++serial).padStart(9, '0')}`;

/** Every dated row added is newer than the last: one day later. */
let day = Date.parse('2001-01-01T00:00:00Z');
function nextDate(): string {
  day += 86_400_000;
  return new Date(day).toISOString().slice(0, 10);
}

async function addFacility(
  name: string,
  latitude: number | null = null,
  longitude: number | null = null,
): Promise<{ id: string; registry_id: string }> {
  const id = randomUUID();
  const registry_id = nextRegistryId();
  await db.pool.query(
    `INSERT INTO facilities (id, registry_id, name, state, compliance_status, latitude, longitude, updated_at)
     VALUES ($1, $2, $3, 'TX', 'violation', $4, $5, now())`,
    [id, registry_id, name, latitude, longitude],
  );
  return { id, registry_id };
}

const otherListCursor = async () => encodeCursor('cases', { date: '2020-01-01', id: randomUUID() });

paginationSuite<{ registry_id: string }>({
  name: 'facilities by registry_id',
  order: 'oldest first',
  idOf: (f) => f.registry_id,
  async newList(): Promise<ListUnderTest<{ registry_id: string }>> {
    const token = `list-${randomUUID()}`;
    return {
      async add(count) {
        const ids: string[] = [];
        for (let n = 0; n < count; n++) ids.push((await addFacility(`Plant ${token} ${n}`)).registry_id);
        return ids;
      },
      page: (request: PageRequest) => listFacilities(db.pool, { filter: { q: token } }, request),
      foreignCursor: async () => encodeCursor('near', { distance_m: 10, registry_id: 'PAG000000001' }),
    };
  },
});

/** Each near list has a centre of its own, along the equator in the Pacific; items go further east. */
let centres = 0;

paginationSuite<{ registry_id: string }>({
  name: 'facilities near a point',
  order: 'oldest first',
  idOf: (f) => f.registry_id,
  async newList(): Promise<ListUnderTest<{ registry_id: string }>> {
    const centre = { latitude: 0, longitude: -170 + ++centres };
    let added = 0;
    return {
      async add(count) {
        const ids: string[] = [];
        for (let n = 0; n < count; n++) {
          const east = centre.longitude + 0.001 * ++added;
          ids.push((await addFacility(`Near ${added}`, centre.latitude, east)).registry_id);
        }
        return ids;
      },
      page: (request: PageRequest) => listFacilitiesNear(db.pool, { ...centre, radius_km: 50 }, request),
      foreignCursor: async () => encodeCursor('facilities', { registry_id: 'PAG000000001' }),
    };
  },
});

paginationSuite<{ id: string }>({
  name: "a facility's violations",
  order: 'newest first',
  idOf: (v) => v.id,
  async newList(): Promise<ListUnderTest<{ id: string }>> {
    const facility = await addFacility('Violations of one');
    return {
      async add(count) {
        const ids: string[] = [];
        for (let n = 0; n < count; n++) {
          const id = randomUUID();
          await db.pool.query(
            `INSERT INTO violations (id, source_id, facility_id, program, violation_type, violation_date, severity, updated_at)
             VALUES ($1, $2, $3, 'CAA', 'emissions', $4::date, 'minor', now())`,
            [id, `src-${id}`, facility.id, nextDate()],
          );
          ids.push(id);
        }
        return ids;
      },
      page: (request: PageRequest) => listViolations(db.pool, { facility_id: facility.id }, request),
      foreignCursor: otherListCursor,
    };
  },
});

paginationSuite<{ id: string }>({
  name: "a facility's cases",
  order: 'newest first',
  idOf: (c) => c.id,
  async newList(): Promise<ListUnderTest<{ id: string }>> {
    const facility = await addFacility('Cases of one');
    return {
      async add(count) {
        const ids: string[] = [];
        for (let n = 0; n < count; n++) {
          const id = randomUUID();
          await db.pool.query(
            `INSERT INTO cases (id, case_number, case_type, status, lead_agency, filed_date, facility_ids, updated_at)
             VALUES ($1, $2, 'judicial', 'filed', 'EPA', $3::date, ARRAY[$4]::uuid[], now())`,
            [id, `case-${id}`, nextDate(), facility.id],
          );
          ids.push(id);
        }
        return ids;
      },
      page: (request: PageRequest) => listCases(db.pool, { facility_id: facility.id }, request),
      foreignCursor: async () => encodeCursor('violations', { date: '2020-01-01', id: randomUUID() }),
    };
  },
});
