import { EVENT_TYPES } from '@fcd/events';
import { Pagination, StringEnum } from '@fcd/service-kit';
import { type TSchema, Type } from '@sinclair/typebox';
import { CASE_STATUSES, CASE_TYPES, COMPLIANCE_STATUSES, PROGRAMS, SEVERITIES, STATE_CODES } from '../domain/codes';
import { Uuid } from '../domain/fields';
import { FacilitySchema } from '../domain/model';
import { FIELDS } from '../domain/records';
import { FACILITY_FILTER_PARAMS, Since, SortParam } from './facility-query';

/**
 * Request and response schemas. Responses are serialised by these schemas
 * (fast-json-stringify), so fields that are not declared never leave the service.
 */

export { CaseSchema, FacilitySchema, ViolationSchema } from '../domain/model';

/** A facility in a search by place: its distance from the centre, in km rounded to the metre. */
export const FacilityNearSchema = Type.Object({
  ...FacilitySchema.properties,
  distance_km: Type.Optional(
    Type.Number({ description: 'Great-circle distance from `near`, in km (to the metre). Present only with `near`.' }),
  ),
});

export const dataOf = <T extends TSchema>(t: T) => Type.Object({ data: t });
export const listOf = <T extends TSchema>(t: T) => Type.Object({ data: Type.Array(t), pagination: Pagination });

// ---- query strings (unknown parameters are a VALIDATION_ERROR) ----

const Limit = Type.Integer({ minimum: 1, maximum: 100, default: 25 });
const Cursor = Type.String({ minLength: 1, maxLength: 400 });

const optionalObject = <P extends Record<string, TSchema>>(props: P) => Type.Partial(Type.Object(props), { additionalProperties: false });

export const FacilityListQuerySchema = optionalObject({
  state: StringEnum(STATE_CODES),
  program: StringEnum(PROGRAMS),
  compliance_status: StringEnum(COMPLIANCE_STATUSES),
  q: Type.String({ minLength: 1, maxLength: 200 }),
  near: Type.String({ minLength: 1, maxLength: 64, description: '`<latitude>,<longitude>` in decimal degrees' }),
  radius_km: Type.String({ minLength: 1, maxLength: 32, description: 'Radius around `near`, 0.1–100 km' }),
  ...FACILITY_FILTER_PARAMS,
  sort: SortParam,
  limit: Limit,
  cursor: Cursor,
});

export const ViolationListQuerySchema = optionalObject({
  facility_id: Uuid,
  program: StringEnum(PROGRAMS),
  severity: StringEnum(SEVERITIES),
  since: Since,
  limit: Limit,
  cursor: Cursor,
});

export const FacilityViolationsQuerySchema = optionalObject({
  program: StringEnum(PROGRAMS),
  severity: StringEnum(SEVERITIES),
  since: Since,
  limit: Limit,
  cursor: Cursor,
});

export const CaseListQuerySchema = optionalObject({
  facility_id: Uuid,
  status: StringEnum(CASE_STATUSES),
  case_type: StringEnum(CASE_TYPES),
  since: Since,
  limit: Limit,
  cursor: Cursor,
});

export const FacilityCasesQuerySchema = optionalObject({
  status: StringEnum(CASE_STATUSES),
  case_type: StringEnum(CASE_TYPES),
  since: Since,
  limit: Limit,
  cursor: Cursor,
});

/** Path ids are checked by the handler: a malformed id is 404 NOT_FOUND like an unknown one. */
export const IdParams = Type.Object({ id: Type.String() });
/** Routes without query parameters still refuse unknown ones (VALIDATION_ERROR naming the parameter: docs/api.md "Errors"). */
export const NoQuery = Type.Object({}, { additionalProperties: false });

// ---- internal endpoints ----

export const ExistingBody = Type.Object({ ids: Type.Array(Uuid, { maxItems: 1000 }) }, { additionalProperties: false });
export const ExistingResponse = dataOf(Type.Object({ existing: Type.Array(Uuid) }));

const RawRows = Type.Array(Type.Object({}, { additionalProperties: true }));
export const IngestJsonBody = Type.Object(
  {
    facilities: Type.Optional(RawRows),
    violations: Type.Optional(RawRows),
    cases: Type.Optional(RawRows),
  },
  { additionalProperties: false },
);

const KindCounts = Type.Object({
  received: Type.Integer(),
  inserted: Type.Integer(),
  updated: Type.Integer(),
  unchanged: Type.Integer(),
  rejected: Type.Integer(),
});

export const IngestResponse = dataOf(
  Type.Object({
    counts: Type.Object({ facilities: KindCounts, violations: KindCounts, cases: KindCounts }),
    events: Type.Object(Object.fromEntries(EVENT_TYPES.map((t) => [t, Type.Integer()]))),
    errors: Type.Array(
      Type.Object({
        kind: Type.String(),
        line: Type.Optional(Type.Integer()),
        index: Type.Optional(Type.Integer()),
        field: Type.String(),
        message: Type.String(),
      }),
    ),
    errors_truncated: Type.Boolean(),
  }),
);

export const IngestQuery = optionalObject({
  kind: StringEnum(Object.keys(FIELDS) as ['facilities', 'violations', 'cases']),
});

export const HealthResponse = dataOf(Type.Object({ status: Type.String() }));
