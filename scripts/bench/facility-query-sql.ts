// The SQL the facility service issues for one GET /v1/facilities (facility-query.mjs's bare side):
// reads [{ params, cursor? }] as JSON on stdin (the query string's parameters, as the route gets
// them after validation) and writes [{ text, values }] to stdout. Each statement is the one
// listFacilities runs, captured from a stand-in connection, so the bench measures the store's own
// statement, cursor decoding included. Run with `npx tsx --conditions=source`.
import { readFileSync } from 'node:fs';
import { facilityFilter } from '../../services/facility/src/routes/facility-query';
import { type FacilitySort, listFacilities } from '../../services/facility/src/store/facility-list';

type FilterParams = Parameters<typeof facilityFilter>[0];

interface Ask {
  params: Record<string, string>;
  cursor?: string;
}

const BOOLEANS = new Set(['major', 'snc']);
const INTEGERS = new Set(['min_quarters_nc', 'min_penalties_usd']);

/** The query string's values, typed as the route's schema coerces them. */
function typed(params: Record<string, string>): FilterParams {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(params)) out[k] = BOOLEANS.has(k) ? v === 'true' : INTEGERS.has(k) ? Number(v) : v;
  return out as FilterParams;
}

async function statementOf(ask: Ask): Promise<{ text: string; values: unknown[] }> {
  const { near, radius_km, sort, limit, ...rest } = ask.params;
  let place: { latitude: number; longitude: number; radius_km: number } | undefined;
  if (near !== undefined) {
    const [latitude, longitude] = near.split(',').map(Number);
    place = { latitude: latitude as number, longitude: longitude as number, radius_km: Number(radius_km) };
  }
  const seen: { text: string; values: unknown[] }[] = [];
  const db = {
    query: async (text: string, values?: unknown[]) => {
      seen.push({ text, values: values ?? [] });
      return { rows: [], rowCount: 0 };
    },
  };
  await listFacilities(
    db as never,
    { filter: facilityFilter(typed(rest)), near: place, sort: sort as FacilitySort | undefined },
    { limit: Number(limit ?? 25), cursor: ask.cursor },
  );
  if (seen.length !== 1) throw new Error(`expected one statement, saw ${seen.length}`);
  return seen[0] as { text: string; values: unknown[] };
}

const asks = JSON.parse(readFileSync(0, 'utf8')) as Ask[];
const out = [];
for (const ask of asks) out.push(await statementOf(ask));
process.stdout.write(JSON.stringify(out));
