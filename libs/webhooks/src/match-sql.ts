import type { EventFacets } from './filter';

/**
 * Which events a subscription is sent, in SQL: the one statement of the rule that the fan-out
 * (deliveries/queue.ts), recovery (recovery.ts) and GET /v1/events?subscription_id= (event-log.ts)
 * all evaluate, so the three cannot disagree. `matches()` (matching.ts) is the same rule in
 * TypeScript, the model the unit tests state it with; test/match-sql.int.test.ts checks that the
 * two agree.
 */

/**
 * True when the subscription row `s` (table webhook.subscriptions) wants the event row `e`: its
 * type is one of `s.events`; `s.facility_ids` is NULL or shares a facility with `e.facility_ids`
 * (uuid[]); and the event passes `s.filter` (`filterPasses`, filter.ts): for each list the filter
 * has, the event's facet of that name (text[]; `e.severities` NULL for an event without severity,
 * which a severities list lets pass) has one of its values (`?|`). Whether `s` is active is the
 * caller's condition. `s` and `e` are aliases in the caller's statement.
 */
export function subscriptionMatchesSql(s: string, e: string): string {
  const list = (key: string, facet: string) => `(NOT ${s}.filter ? '${key}' OR ${s}.filter->'${key}' ?| ${e}.${facet})`;
  return `(${s}.events @> ARRAY[${e}.type]
      AND (${s}.facility_ids IS NULL OR ${s}.facility_ids && ${e}.facility_ids)
      AND (${s}.filter IS NULL OR (${list('states', 'states')}
        AND ${list('programs', 'programs')}
        AND (${e}.severities IS NULL OR ${list('severities', 'severities')})
        AND ${list('epa_regions', 'epa_regions')})))`;
}

/** Facet values are codes (`eventFacets` keeps only [A-Za-z0-9_]), so the literal needs no quoting. */
function arrayLiteral(values: readonly string[]): string {
  return `{${values.join(',')}}`;
}

/** Events' facets as text[] literals per facet, parameters for `unnest` (severities NULL when the event has none). */
export function facetParameters(facets: readonly EventFacets[]) {
  return {
    states: facets.map((f) => arrayLiteral(f.states)),
    programs: facets.map((f) => arrayLiteral(f.programs)),
    severities: facets.map((f) => (f.severities === null ? null : arrayLiteral(f.severities))),
    epaRegions: facets.map((f) => arrayLiteral(f.epa_regions)),
  };
}
