import type { Migration } from '@fcd/service-kit';

/**
 * Schema `facility`, applied by migrate(pool, 'facility', migrations) at
 * start-up and by `node dist/cli.js migrate`. Never edit an applied migration;
 * add a new one.
 */
export const migrations: Migration[] = [
  {
    id: '0001_facilities_violations_cases',
    sql: `
CREATE TABLE facilities (
  id uuid PRIMARY KEY,
  registry_id text COLLATE "C" NOT NULL UNIQUE,
  name text NOT NULL,
  street text,
  city text,
  state text NOT NULL,
  zip text,
  county text,
  latitude double precision,
  longitude double precision,
  naics_codes text[] NOT NULL DEFAULT '{}',
  programs text[] NOT NULL DEFAULT '{}',
  compliance_status text NOT NULL CHECK (compliance_status IN ('no_violation', 'violation', 'significant_violation')),
  last_inspection_date date,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL
);
-- Listing order is registry_id (its UNIQUE index); one index per filter.
CREATE INDEX facilities_state_idx ON facilities (state, registry_id);
CREATE INDEX facilities_compliance_status_idx ON facilities (compliance_status, registry_id);
CREATE INDEX facilities_programs_idx ON facilities USING gin (programs);

CREATE TABLE violations (
  id uuid PRIMARY KEY,
  source_id text NOT NULL UNIQUE,
  facility_id uuid NOT NULL REFERENCES facilities (id),
  program text NOT NULL CHECK (program IN ('CAA', 'CWA', 'RCRA', 'SDWA')),
  violation_type text NOT NULL,
  violation_date date NOT NULL,
  severity text NOT NULL CHECK (severity IN ('minor', 'moderate', 'significant')),
  description text,
  resolved_date date,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL
);
-- Listing order is (violation_date, id) descending; "since" uses the first index.
CREATE INDEX violations_date_idx ON violations (violation_date, id);
CREATE INDEX violations_facility_idx ON violations (facility_id, violation_date, id);
CREATE INDEX violations_program_idx ON violations (program, violation_date, id);
CREATE INDEX violations_severity_idx ON violations (severity, violation_date, id);

CREATE TABLE cases (
  id uuid PRIMARY KEY,
  case_number text NOT NULL UNIQUE,
  case_type text NOT NULL CHECK (case_type IN ('administrative_informal', 'administrative_formal', 'judicial')),
  status text NOT NULL CHECK (status IN ('filed', 'active', 'settled', 'closed')),
  lead_agency text NOT NULL,
  filed_date date NOT NULL,
  settled_date date,
  penalty_amount_usd numeric(14, 2) CHECK (penalty_amount_usd >= 0),
  -- Sorted; every element is a facilities.id (resolved from registry ids at ingestion).
  facility_ids uuid[] NOT NULL CHECK (cardinality(facility_ids) >= 1),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL
);
-- Listing order is (filed_date, id) descending.
CREATE INDEX cases_date_idx ON cases (filed_date, id);
CREATE INDEX cases_status_idx ON cases (status, filed_date, id);
CREATE INDEX cases_case_type_idx ON cases (case_type, filed_date, id);
CREATE INDEX cases_facility_ids_idx ON cases USING gin (facility_ids);

-- Transactional outbox: written in the same transaction as the change it
-- announces; the relay publishes in seq order and sets sent_at after the
-- JetStream ack. payload is the exact JSON envelope that is published.
CREATE TABLE outbox (
  id uuid PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  type text NOT NULL,
  payload text NOT NULL,
  created_at timestamptz NOT NULL,
  sent_at timestamptz
);
CREATE INDEX outbox_pending_idx ON outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;
`,
  },
  {
    id: '0002_facility_name_trigram',
    // "q" (name contains) is served by a trigram index. pg_trgm is a trusted
    // extension; it may already be installed in any schema of the database, so
    // the operator class is qualified with wherever it lives.
    sql: `
CREATE EXTENSION IF NOT EXISTS pg_trgm;
DO $$
DECLARE ext_schema text;
BEGIN
  SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
   WHERE e.extname = 'pg_trgm';
  EXECUTE format('CREATE INDEX facilities_name_trgm_idx ON facilities USING gin (name %I.gin_trgm_ops)', ext_schema);
END $$;
`,
  },
  {
    id: '0003_outbox_trace_context',
    // The W3C trace context of the transaction that wrote the row (JSON
    // {traceparent, tracestate}; null when it was not traced): the relay's
    // publish span continues the trace of the request that caused the change.
    sql: 'ALTER TABLE outbox ADD COLUMN trace_context text;',
  },
  {
    id: '0004_facility_geo_search',
    // near=<lat>,<lon>&radius_km=… (docs/facility.md, "Search by place"; ADR 0005): cube and
    // earthdistance ship in postgresql-contrib (PostGIS would need a package every machine lacks).
    // They are created in this schema (the service's search_path) when the database lacks them.
    // The GiST index on the point as an earth cube serves earth_box(centre, radius) @> point.
    // ll_to_earth calls earth() unqualified, so an index on it breaks a write from any session whose
    // search_path lacks the extension (psql, a restore): the index is on facility_point, which pins
    // the extensions' schemas.
    sql: `
CREATE EXTENSION IF NOT EXISTS cube;
CREATE EXTENSION IF NOT EXISTS earthdistance;
DO $$
DECLARE cube_schema text; earth_schema text;
BEGIN
  SELECT n.nspname INTO cube_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cube';
  SELECT n.nspname INTO earth_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'earthdistance';
  EXECUTE format(
    'CREATE FUNCTION facility_point(lat float8, lon float8) RETURNS %1$I.earth
       LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = %1$I, %2$I, pg_catalog
       AS ''SELECT ll_to_earth(lat, lon)''',
    earth_schema, cube_schema);
END $$;
CREATE INDEX facilities_earth_idx ON facilities USING gist (facility_point(latitude, longitude))
  WHERE latitude IS NOT NULL AND longitude IS NOT NULL;
    `,
  },
  {
    id: '0005_echo_sync',
    // ECHO bulk-download sync (docs/echo.md): program id → FRS registry id links (from
    // ECHO_EXPORTER's *_IDS columns, FRS_PROGRAM_LINKS and ICIS-AIR_FACILITIES), used to attach
    // violations to facilities; and one row per sync run (its summary; the last success is
    // exported as a metric and alerted on).
    sql: `
CREATE TABLE echo_program_links (
  system text COLLATE "C" NOT NULL,
  pgm_sys_id text COLLATE "C" NOT NULL,
  registry_id text COLLATE "C" NOT NULL,
  PRIMARY KEY (system, pgm_sys_id, registry_id)
);

CREATE TABLE echo_sync_runs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  source text NOT NULL,
  initial_load boolean NOT NULL,
  started_at timestamptz NOT NULL,
  finished_at timestamptz,
  outcome text CHECK (outcome IN ('applied', 'rows_rejected', 'failed')),
  summary jsonb
);
CREATE INDEX echo_sync_runs_success_idx ON echo_sync_runs (finished_at) WHERE outcome IN ('applied', 'rows_rejected');
`,
  },
  {
    id: '0006_facility_point_inlinable',
    // facility_point (0004) pinned the extensions' schemas with SET search_path, so Postgres could not
    // inline it: every call went through the function manager and set the GUC (42.6 s per 1,000,000
    // rows of an ECHO first load, docs/benchmarks/history/2026-11-25.md, "ECHO sync"). Same signature
    // and result, now inlinable: no SET clause, a single SELECT of ll_to_earth's own expression
    // (earthdistance 1.1) with every function, operator and type schema-qualified (found here, as in
    // 0004), so the body parses the same under any search_path. Not STRICT: earth() is not strict, and
    // a strict SQL function whose body has a non-strict call is not inlined (a NULL argument still
    // gives NULL: cube() is strict and a domain cast passes NULL). The index expression is inlined the
    // same way (the planner simplifies index expressions like the query's), so the index still
    // matches; it is rebuilt because its function's body changed (same values).
    sql: `
DO $$
DECLARE cube_schema text; earth_schema text;
BEGIN
  SELECT n.nspname INTO cube_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'cube';
  SELECT n.nspname INTO earth_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'earthdistance';
  EXECUTE format(
    'CREATE OR REPLACE FUNCTION facility_point(lat float8, lon float8) RETURNS %1$I.earth
       LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
       AS %3$L',
    earth_schema, cube_schema,
    format(
      'SELECT %2$I.cube(%2$I.cube(%2$I.cube('
        '%1$I.earth() OPERATOR(pg_catalog.*) pg_catalog.cos(pg_catalog.radians(lat)) OPERATOR(pg_catalog.*) pg_catalog.cos(pg_catalog.radians(lon))), '
        '%1$I.earth() OPERATOR(pg_catalog.*) pg_catalog.cos(pg_catalog.radians(lat)) OPERATOR(pg_catalog.*) pg_catalog.sin(pg_catalog.radians(lon))), '
        '%1$I.earth() OPERATOR(pg_catalog.*) pg_catalog.sin(pg_catalog.radians(lat)))::%1$I.earth',
      earth_schema, cube_schema));
END $$;
REINDEX INDEX facilities_earth_idx;
`,
  },
  {
    // The compliance profile (domain/records.ts, docs/facility.md). Defaults make existing rows
    // valid: counts 0, everything else null; data_as_of starts at the row's updated_at.
    id: '0007_facility_profile',
    sql: `
ALTER TABLE facilities
  ADD COLUMN epa_region text,
  ADD COLUMN sic_codes text[] NOT NULL DEFAULT '{}',
  ADD COLUMN major boolean NOT NULL DEFAULT false,
  ADD COLUMN program_status jsonb NOT NULL DEFAULT '{"caa": null, "cwa": null, "rcra": null}',
  ADD COLUMN compliance jsonb NOT NULL DEFAULT '{"quarters_with_noncompliance": 0, "programs_with_snc": 0, "snc": false}',
  ADD COLUMN inspections jsonb NOT NULL DEFAULT '{"count": 0, "last_date": null}',
  ADD COLUMN enforcement jsonb NOT NULL DEFAULT '{"informal_actions": 0, "formal_actions": 0, "last_formal_action_date": null}',
  ADD COLUMN penalties jsonb NOT NULL DEFAULT '{"count": 0, "total_usd": null, "last_amount_usd": null, "last_date": null}',
  ADD COLUMN data_as_of timestamptz;
UPDATE facilities SET data_as_of = updated_at, inspections = jsonb_build_object('count', 0, 'last_date', last_inspection_date);
ALTER TABLE facilities ALTER COLUMN data_as_of SET NOT NULL, ALTER COLUMN data_as_of SET DEFAULT now();
`,
  },
  {
    // The ECHO files each sync applied (GET /v1/sources, docs/echo.md "Freshness"): one row per
    // file of a unit, written by that unit in its own transaction, so a file is listed exactly
    // when what it brought is committed. file_date is the file's own date (the zip entry's).
    id: '0008_echo_sync_sources',
    sql: `
CREATE TABLE echo_sync_sources (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id bigint NOT NULL, -- echo_sync_runs.id (not a foreign key: pruning or resetting the runs leaves this list whole)
  file text NOT NULL,
  archive text,
  file_date timestamptz,
  synced_at timestamptz NOT NULL,
  rows_read integer NOT NULL CHECK (rows_read >= 0),
  rows_rejected integer NOT NULL CHECK (rows_rejected >= 0)
);
-- The latest record of each file: DISTINCT ON (file) ... ORDER BY file, synced_at DESC, id DESC.
CREATE INDEX echo_sync_sources_file_idx ON echo_sync_sources (file, synced_at DESC, id DESC);
CREATE INDEX echo_sync_sources_run_idx ON echo_sync_sources (run_id);
`,
  },
  {
    // The facility list's filters and sorts (docs/api.md, "Filters and sorting"): one index per
    // filter or sort, each expression written exactly as store/queries.ts (PROFILE_SQL) writes it,
    // since the planner matches index expressions by their form. Missing values are sentinels that
    // sort last (-1 for counts and amounts, '9999-99-99' for dates); dates compare as C text.
    // naics_prefixes: every 2- to 6-digit prefix of a facility's NAICS codes, so a prefix filter is
    // one GIN lookup (pg_catalog only: the same in any session's search_path).
    id: '0009_facility_filters',
    sql: `
CREATE FUNCTION naics_prefixes(codes text[]) RETURNS text[]
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $fn$
    SELECT coalesce(pg_catalog.array_agg(DISTINCT pg_catalog.left(c, n)), '{}'::text[])
      FROM pg_catalog.unnest(codes) AS c, pg_catalog.generate_series(2, 6) AS n
     WHERE pg_catalog.length(c) >= n
  $fn$;
CREATE INDEX facilities_name_idx ON facilities (name, registry_id);
CREATE INDEX facilities_city_idx ON facilities (lower(city));
CREATE INDEX facilities_county_idx ON facilities (lower(county));
CREATE INDEX facilities_zip5_idx ON facilities (left(zip, 5));
CREATE INDEX facilities_epa_region_idx ON facilities (epa_region, registry_id);
CREATE INDEX facilities_lat_lon_idx ON facilities (latitude, longitude);
CREATE INDEX facilities_naics_prefix_idx ON facilities USING gin (naics_prefixes(naics_codes));
CREATE INDEX facilities_sic_idx ON facilities USING gin (sic_codes);
CREATE INDEX facilities_major_idx ON facilities (major, registry_id);
CREATE INDEX facilities_snc_idx ON facilities (((compliance ->> 'snc')::boolean), registry_id);
CREATE INDEX facilities_quarters_nc_idx
  ON facilities ((coalesce((compliance ->> 'quarters_with_noncompliance')::integer, -1)) DESC, registry_id DESC);
CREATE INDEX facilities_penalties_total_idx
  ON facilities ((coalesce((penalties ->> 'total_usd')::numeric, -1)) DESC, registry_id DESC);
CREATE INDEX facilities_penalized_idx ON facilities (((penalties ->> 'last_date') COLLATE "C"));
CREATE INDEX facilities_last_inspection_idx
  ON facilities ((coalesce(inspections ->> 'last_date', '9999-99-99') COLLATE "C"), registry_id);
`,
  },
  {
    // The change feed of GET /v1/facilities?updated_since= (docs/api.md, "Changes since an
    // instant"): change_xid is the transaction that last wrote the row, set here whatever the
    // writer, so the feed can order rows as their writes committed and hold back those of
    // transactions still running. Rows written before this migration keep 0 (all settled).
    id: '0010_facility_change_feed',
    sql: `
ALTER TABLE facilities ADD COLUMN change_xid xid8 NOT NULL DEFAULT '0';
CREATE FUNCTION facilities_change_xid() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  NEW.change_xid := pg_catalog.pg_current_xact_id();
  RETURN NEW;
END
$fn$;
CREATE TRIGGER facilities_change_xid BEFORE INSERT OR UPDATE ON facilities
  FOR EACH ROW EXECUTE FUNCTION facilities_change_xid();
CREATE INDEX facilities_change_idx ON facilities (change_xid, registry_id);
CREATE INDEX facilities_updated_at_idx ON facilities (updated_at);
`,
  },
  {
    // The relay's wake-up for commits of any process (docs/facility.md, "The outbox relay"): one
    // notification per inserting statement, delivered at commit; Postgres folds a transaction's
    // identical notifications into one. NOTIFY works through PgBouncer's transaction pooling.
    id: '0011_outbox_notify',
    sql: `
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_catalog.pg_notify('fcd_outbox', '');
  RETURN NULL;
END
$fn$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
`,
  },
];
