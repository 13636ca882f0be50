import { EPA_REGIONS, PROGRAMS, SEVERITIES, STATE_CODES } from '@fcd/events/contract';
import type { FieldProblem } from '@fcd/service-kit/pure';

/**
 * Subscription filters (docs/webhooks.md "Filters"): `{ states?, programs?, severities?, epa_regions? }`.
 * An event passes when it passes every list given. Each list is read against the event's facets
 * (`eventFacets`): what the event's own payload says about its facilities and its record, so the
 * fan-out adds no query. The dispatcher computes them once per event, for the fan-out and for the
 * event log (webhook.events keeps them); what is matched is `subscriptionMatchesSql` (match-sql.ts),
 * this rule in SQL, for the fan-out, recovery and the events API alike.
 */

/** The lists of a filter, in the order they are reported. */
export const FILTER_KEYS = ['states', 'programs', 'severities', 'epa_regions'] as const;
export type FilterKey = (typeof FILTER_KEYS)[number];

/** Longest list a filter takes (every state and territory fits). */
export const MAX_FILTER_LIST = 60;

export type SubscriptionFilter = { [K in FilterKey]?: string[] };

/** The values each list takes: the event contract's code lists (@fcd/events/contract), which the facility service validates too. */
export const FILTER_CODES: Record<FilterKey, readonly string[]> = {
  states: STATE_CODES,
  programs: PROGRAMS,
  severities: SEVERITIES,
  epa_regions: EPA_REGIONS,
};

const ALLOWED: Record<FilterKey, ReadonlySet<string>> = {
  states: new Set(STATE_CODES),
  programs: new Set(PROGRAMS),
  severities: new Set(SEVERITIES),
  epa_regions: new Set(EPA_REGIONS),
};

/** How a client's value is compared: states and programs upper-case, severities lower-case, regions as sent. */
const CANONICAL: Record<FilterKey, (value: string) => string> = {
  states: (v) => v.toUpperCase(),
  programs: (v) => v.toUpperCase(),
  severities: (v) => v.toLowerCase(),
  epa_regions: (v) => v,
};

const MUST_BE: Record<FilterKey, string> = {
  states: 'must be a USPS state code (two letters, e.g. "TX")',
  programs: `must be one of ${PROGRAMS.join(', ')}`,
  severities: `must be one of ${SEVERITIES.join(', ')}`,
  epa_regions: 'must be an EPA region, two digits from "01" to "10"',
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The content problems of a `filter` body field (absent and null have none), named as
 * `filter.states[0]`: empty filter, empty or too long lists, unknown values, duplicates. Like the
 * other content rules it looks only at values of the right shape: an object that is not one, an
 * unknown key, a list that is not an array or a value that is not a string is the JSON schema's
 * to report (it names them the same way), so no problem is reported twice.
 */
export function filterProblems(filter: unknown): FieldProblem[] {
  if (!isRecord(filter)) return [];
  const keys = Object.keys(filter);
  if (keys.length === 0) {
    return [{ field: 'filter', message: `must list at least one of ${FILTER_KEYS.join(', ')}; send null for no filter` }];
  }
  return FILTER_KEYS.flatMap((key) => (key in filter ? listProblems(key, filter[key]) : []));
}

function listProblems(key: FilterKey, list: unknown): FieldProblem[] {
  const field = `filter.${key}`;
  if (!Array.isArray(list)) return [];
  if (list.length === 0) return [{ field, message: 'must not be empty; leave it out to not filter on it' }];
  const problems: FieldProblem[] = [];
  if (list.length > MAX_FILTER_LIST) problems.push({ field, message: `must list at most ${MAX_FILTER_LIST} values (got ${list.length})` });
  const seen = new Map<string, number>();
  list.forEach((value, i) => {
    if (typeof value !== 'string') return;
    const canonical = CANONICAL[key](value);
    if (!ALLOWED[key].has(canonical)) {
      problems.push({ field: `${field}[${i}]`, message: MUST_BE[key] });
      return;
    }
    const first = seen.get(canonical);
    if (first !== undefined) problems.push({ field: `${field}[${i}]`, message: `is a duplicate of ${field}[${first}]` });
    else seen.set(canonical, i);
  });
  return problems;
}

/** A valid `filter` body field (as `filterProblems` accepts) → what is stored: canonical case, keys in order; null for none. */
export function normaliseFilter(filter: unknown): SubscriptionFilter | null {
  if (!isRecord(filter)) return null;
  const out: SubscriptionFilter = {};
  for (const key of FILTER_KEYS) {
    const list = filter[key];
    if (Array.isArray(list)) out[key] = list.map((v) => CANONICAL[key](String(v)));
  }
  return out;
}

/**
 * What an event says about itself, per filter list. `severities` is null for an event that has no
 * severity (every type but `violation.new`): a severities list does not apply to it.
 */
export interface EventFacets {
  states: string[];
  programs: string[];
  severities: string[] | null;
  epa_regions: string[];
}

/** Facet values are codes: anything else in a payload is dropped (and so can never match). */
const TOKEN = /^[A-Za-z0-9_]{1,16}$/;

interface FacilitySnapshot {
  state?: unknown;
  epa_region?: unknown;
  programs?: unknown;
}

/** The facility snapshots an event carries: `data.facility` (one facility), `data.facilities` (a case's). */
function snapshots(data: Record<string, unknown>): FacilitySnapshot[] {
  const out: FacilitySnapshot[] = [];
  if (isRecord(data.facility)) out.push(data.facility);
  if (Array.isArray(data.facilities)) out.push(...data.facilities.filter(isRecord));
  return out;
}

function tokens(values: unknown[], canonical: (v: string) => string): string[] {
  const set = new Set<string>();
  for (const v of values) if (typeof v === 'string' && TOKEN.test(v)) set.add(canonical(v));
  return [...set].sort();
}

/**
 * An event's facets, from its payload only:
 * - `states`, `epa_regions`: of every facility snapshot it carries (`data.facility`, `data.facilities[]`);
 * - `programs`: a `violation.new`'s violation program; otherwise the programs of its facility snapshots;
 * - `severities`: a `violation.new`'s violation severity; null for the other types.
 */
export function eventFacets(event: { type: string; data?: unknown }): EventFacets {
  const data = isRecord(event.data) ? event.data : {};
  const facilities = snapshots(data);
  const violation = isRecord(data.violation) ? data.violation : undefined;
  const isViolation = event.type === 'violation.new';
  return {
    states: tokens(
      facilities.map((f) => f.state),
      CANONICAL.states,
    ),
    epa_regions: tokens(
      facilities.map((f) => f.epa_region),
      CANONICAL.epa_regions,
    ),
    programs: isViolation
      ? tokens([violation?.program], CANONICAL.programs)
      : tokens(
          facilities.flatMap((f) => (Array.isArray(f.programs) ? f.programs : [])),
          CANONICAL.programs,
        ),
    severities: isViolation ? tokens([violation?.severity], CANONICAL.severities) : null,
  };
}

/** The facets of an envelope given only as its body (the fan-out's and the log's fallback); a body that is not JSON has none. */
export function facetsOfBody(body: string): EventFacets {
  try {
    return eventFacets(JSON.parse(body) as { type: string; data?: unknown });
  } catch {
    return eventFacets({ type: '', data: {} });
  }
}

/**
 * True when the facets pass the filter: for every list given, the event has at least one of its
 * values (a severities list is passed by an event without severity). null or {} passes everything.
 */
export function filterPasses(filter: SubscriptionFilter | null, facets: EventFacets): boolean {
  if (filter === null) return true;
  return FILTER_KEYS.every((key) => {
    const wanted = filter[key];
    if (wanted === undefined) return true;
    const have = facets[key];
    if (have === null) return true;
    return wanted.some((v) => have.includes(v));
  });
}
