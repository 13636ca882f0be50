import { CaseId, FacilityId, type IdKind, listBody, notFound, type PageRequest, validationError } from '@fcd/service-kit';
import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, preValidationAsyncHookHandler } from 'fastify';
import type { CaseStatus, CaseType, Program, Severity } from '../domain/codes';
import { facilityExists, getCase, getFacility, listCases, listFacilities, listViolations, type Queryable } from '../store/queries';
import { facilityFilter } from './facility-query';
import {
  CaseListQuerySchema,
  CaseSchema,
  dataOf,
  FacilityCasesQuerySchema,
  FacilityListQuerySchema,
  FacilityNearSchema,
  FacilitySchema,
  FacilityViolationsQuerySchema,
  IdParams,
  listOf,
  NoQuery,
  ViolationListQuerySchema,
  ViolationSchema,
} from './schemas';
import { rejectInvalid } from './validation';

/**
 * The public read API (/v1), reached through the gateway. Thin: schema in,
 * query, schema out. A path id that is not a UUID is 404 NOT_FOUND, exactly
 * like an unknown one.
 */
export interface PublicRoutesOptions {
  db: Queryable;
}

/** state and program are matched case-insensitively. */
const normalizeCodes: preValidationAsyncHookHandler = async (request) => {
  const q = request.query as Record<string, unknown>;
  if (typeof q.state === 'string') q.state = q.state.trim().toUpperCase();
  if (typeof q.program === 'string') q.program = q.program.trim().toUpperCase();
};

const DECIMAL = /^[+-]?(\d{1,3}(\.\d{1,12})?|\.\d{1,12})$/;

/** near=<lat>,<lon> and radius_km, checked together; every problem is reported at once. */
function nearParams(
  near: string | undefined,
  radius: string | undefined,
): { latitude: number; longitude: number; radius_km: number } | undefined {
  if (near === undefined && radius === undefined) return undefined;
  const problems: Array<{ field: string; message: string }> = [];
  let latitude = Number.NaN;
  let longitude = Number.NaN;
  if (near === undefined) {
    problems.push({ field: 'near', message: 'is required with radius_km' });
  } else {
    const [lat, lon, ...rest] = near.split(',').map((p) => p.trim());
    if (rest.length === 0 && lat !== undefined && lon !== undefined && DECIMAL.test(lat) && DECIMAL.test(lon)) {
      latitude = Number(lat);
      longitude = Number(lon);
    }
    if (!(latitude >= -90 && latitude <= 90 && longitude >= -180 && longitude <= 180)) {
      problems.push({
        field: 'near',
        message: 'must be <latitude>,<longitude> in decimal degrees, latitude -90 to 90 and longitude -180 to 180',
      });
    }
  }
  let radius_km = Number.NaN;
  if (radius === undefined) {
    problems.push({ field: 'radius_km', message: 'is required with near' });
  } else {
    if (DECIMAL.test(radius.trim())) radius_km = Number(radius);
    if (!(radius_km >= 0.1 && radius_km <= 100))
      problems.push({ field: 'radius_km', message: 'must be a decimal number of km from 0.1 to 100' });
  }
  if (problems.length > 0) throw validationError(problems);
  return { latitude, longitude, radius_km };
}

/** A path id of `kind`, lower-cased; one that is not such an id is 404 NOT_FOUND, like an unknown one. */
function pathId<B extends string>(kind: IdKind<B>, id: string, what: string) {
  const parsed = kind.parse(id);
  if (parsed === undefined) throw notFound(what);
  return parsed;
}

/** The facility_id filter (the schema's uuid format, which allows a `urn:uuid:` prefix), lower-cased. */
function queryFacilityId(id: string | undefined) {
  if (id === undefined) return undefined;
  const parsed = FacilityId.parse(id.replace(/^urn:uuid:/i, ''));
  if (parsed === undefined) throw validationError([{ field: 'facility_id', message: 'must be a UUID' }]);
  return parsed;
}

/** The request's limit and cursor, for keysetPage. */
function pageRequest(q: PageRequest): PageRequest {
  return { limit: q.limit, cursor: q.cursor };
}

const asIs = <T>(item: T) => item;

type ViolationFilters = Pick<Static<typeof ViolationListQuerySchema>, 'program' | 'severity' | 'since'>;
type CaseFilters = Pick<Static<typeof CaseListQuerySchema>, 'status' | 'case_type' | 'since'>;

/** The violation lists' filters that were given. */
function violationFilters(q: ViolationFilters) {
  return {
    ...(q.program ? { program: q.program as Program } : {}),
    ...(q.severity ? { severity: q.severity as Severity } : {}),
    ...(q.since ? { since: q.since } : {}),
  };
}

/** The case lists' filters that were given. */
function caseFilters(q: CaseFilters) {
  return {
    ...(q.status ? { status: q.status as CaseStatus } : {}),
    ...(q.case_type ? { case_type: q.case_type as CaseType } : {}),
    ...(q.since ? { since: q.since } : {}),
  };
}

export async function publicRoutes(app: FastifyInstance, opts: PublicRoutesOptions): Promise<void> {
  const { db } = opts;
  // Schema errors are attached, then reported by rejectInvalid with clearer messages.
  app.addHook('onRoute', (route) => {
    route.attachValidation = true;
  });
  app.addHook('preHandler', rejectInvalid);
  facilityRoutes(app, db);
  recordRoutes(app, db);
}

/** /v1/facilities, one facility, and its violations and cases. */
function facilityRoutes(app: FastifyInstance, db: Queryable): void {
  app.get<{ Querystring: Static<typeof FacilityListQuerySchema> }>(
    '/v1/facilities',
    {
      preValidation: normalizeCodes,
      schema: { querystring: FacilityListQuerySchema, response: { 200: listOf(FacilityNearSchema) } },
    },
    async (request) => {
      const q = request.query;
      const near = nearParams(q.near, q.radius_km);
      // Each order has its own cursor; a search by place is nearest first unless sorted otherwise.
      const found = await listFacilities(db, { filter: facilityFilter(q), near, sort: q.sort }, pageRequest(q));
      return listBody(found, asIs);
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/facilities/:id',
    { schema: { params: IdParams, querystring: NoQuery, response: { 200: dataOf(FacilitySchema) } } },
    async (request) => {
      const facility = await getFacility(db, pathId(FacilityId, request.params.id, 'facility'));
      if (!facility) throw notFound('facility');
      return { data: facility };
    },
  );

  app.get<{ Params: Static<typeof IdParams>; Querystring: Static<typeof FacilityViolationsQuerySchema> }>(
    '/v1/facilities/:id/violations',
    {
      preValidation: normalizeCodes,
      schema: { params: IdParams, querystring: FacilityViolationsQuerySchema, response: { 200: listOf(ViolationSchema) } },
    },
    async (request) => {
      const id = pathId(FacilityId, request.params.id, 'facility');
      const q = request.query;
      const page = await listViolations(db, { facility_id: id, ...violationFilters(q) }, pageRequest(q));
      if (page.items.length === 0 && !(await facilityExists(db, id))) throw notFound('facility');
      return listBody(page, asIs);
    },
  );

  app.get<{ Params: Static<typeof IdParams>; Querystring: Static<typeof FacilityCasesQuerySchema> }>(
    '/v1/facilities/:id/cases',
    { schema: { params: IdParams, querystring: FacilityCasesQuerySchema, response: { 200: listOf(CaseSchema) } } },
    async (request) => {
      const id = pathId(FacilityId, request.params.id, 'facility');
      const q = request.query;
      const page = await listCases(db, { facility_id: id, ...caseFilters(q) }, pageRequest(q));
      if (page.items.length === 0 && !(await facilityExists(db, id))) throw notFound('facility');
      return listBody(page, asIs);
    },
  );
}

/** /v1/violations, /v1/cases and one case. */
function recordRoutes(app: FastifyInstance, db: Queryable): void {
  app.get<{ Querystring: Static<typeof ViolationListQuerySchema> }>(
    '/v1/violations',
    { preValidation: normalizeCodes, schema: { querystring: ViolationListQuerySchema, response: { 200: listOf(ViolationSchema) } } },
    async (request) => {
      const q = request.query;
      const facilityId = queryFacilityId(q.facility_id);
      const filters = { ...(facilityId ? { facility_id: facilityId } : {}), ...violationFilters(q) };
      return listBody(await listViolations(db, filters, pageRequest(q)), asIs);
    },
  );

  app.get<{ Querystring: Static<typeof CaseListQuerySchema> }>(
    '/v1/cases',
    { schema: { querystring: CaseListQuerySchema, response: { 200: listOf(CaseSchema) } } },
    async (request) => {
      const q = request.query;
      const facilityId = queryFacilityId(q.facility_id);
      const filters = { ...(facilityId ? { facility_id: facilityId } : {}), ...caseFilters(q) };
      return listBody(await listCases(db, filters, pageRequest(q)), asIs);
    },
  );

  app.get<{ Params: Static<typeof IdParams> }>(
    '/v1/cases/:id',
    { schema: { params: IdParams, querystring: NoQuery, response: { 200: dataOf(CaseSchema) } } },
    async (request) => {
      const found = await getCase(db, pathId(CaseId, request.params.id, 'case'));
      if (!found) throw notFound('case');
      return { data: found };
    },
  );
}
