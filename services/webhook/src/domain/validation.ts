import { FacilityId, type FieldProblem } from '@fcd/service-kit/pure';
import { EVENT_TYPES, isEventType } from '@fcd/webhooks/pure';

/**
 * The content rules of webhook bodies (docs/webhooks.md) that the JSON schema does not
 * express with a useful message. Pure functions over the raw body: they look
 * only at values of the right type (the schema reports the others), so schema
 * problems and these merge into one list without repeats.
 */

const MAX_FACILITY_IDS = 1000;
/** More problems than this are summarised in one extra entry, so the error stays small. */
export const MAX_REPORTED_PROBLEMS = 100;
const PATCHABLE_FIELDS = ['url', 'events', 'facility_ids', 'filter', 'is_active', 'rate_limit_per_second', 'max_in_flight'] as const;

function isUuid(value: string): boolean {
  return FacilityId.parse(value) !== undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function eventProblems(events: unknown): FieldProblem[] {
  if (!Array.isArray(events)) return [];
  if (events.length === 0) return [{ field: 'events', message: 'must list at least one event type' }];
  const problems: FieldProblem[] = [];
  const seen = new Map<string, number>();
  events.forEach((event, i) => {
    if (typeof event !== 'string') return;
    if (!isEventType(event)) {
      problems.push({ field: `events[${i}]`, message: `must be one of ${EVENT_TYPES.join(', ')}` });
    } else if (seen.has(event)) {
      problems.push({ field: `events[${i}]`, message: `is a duplicate of events[${seen.get(event)}]` });
    } else {
      seen.set(event, i);
    }
  });
  return problems;
}

export interface FacilityIdsCheck {
  problems: FieldProblem[];
  /** Well-formed, distinct, lower-cased ids with the index each first appeared at: what to ask the facility service about. */
  candidates: Map<string, number>;
}

export function facilityIdProblems(facilityIds: unknown): FacilityIdsCheck {
  const candidates = new Map<string, number>();
  if (!Array.isArray(facilityIds)) return { problems: [], candidates };
  if (facilityIds.length === 0) {
    return {
      problems: [{ field: 'facility_ids', message: 'must not be empty; omit it or send null to watch every facility' }],
      candidates,
    };
  }
  const problems: FieldProblem[] = [];
  if (facilityIds.length > MAX_FACILITY_IDS) {
    problems.push({ field: 'facility_ids', message: `must list at most ${MAX_FACILITY_IDS} facility ids (got ${facilityIds.length})` });
  }
  facilityIds.forEach((id, i) => {
    if (typeof id !== 'string') return;
    if (!isUuid(id)) {
      problems.push({ field: `facility_ids[${i}]`, message: 'must be a UUID' });
      return;
    }
    const key = id.toLowerCase();
    const first = candidates.get(key);
    if (first !== undefined) problems.push({ field: `facility_ids[${i}]`, message: `is a duplicate of facility_ids[${first}]` });
    else candidates.set(key, i);
  });
  // Too many ids: not worth asking the facility service about any of them.
  if (facilityIds.length > MAX_FACILITY_IDS) candidates.clear();
  return { problems, candidates };
}

export function unknownFacilityProblems(candidates: Map<string, number>, existing: Set<string>): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const [id, index] of candidates) {
    if (!existing.has(id)) problems.push({ field: `facility_ids[${index}]`, message: `no facility with id ${id} exists` });
  }
  return problems;
}

/** PATCH needs at least one field. */
export function emptyPatchProblems(body: unknown): FieldProblem[] {
  if (isRecord(body) && Object.keys(body).length === 0) {
    return [{ field: 'body', message: `must contain at least one of ${PATCHABLE_FIELDS.join(', ')}` }];
  }
  return [];
}

const fieldOrder = (field: string): number => {
  const root = field.split(/[.[]/)[0] ?? field;
  const i = (PATCHABLE_FIELDS as readonly string[]).indexOf(root);
  return i === -1 ? PATCHABLE_FIELDS.length : i;
};

const indexOf = (field: string): number => {
  const m = /^[^[]+\[(\d+)\]/.exec(field);
  return m ? Number(m[1]) : -1;
};

/**
 * One list for one VALIDATION_ERROR: duplicates removed, ordered by field
 * (url, events, facility_ids, filter, is_active, then the rest) and index, capped.
 */
export function mergeProblems(...lists: FieldProblem[][]): FieldProblem[] {
  const seen = new Set<string>();
  const all: FieldProblem[] = [];
  for (const p of lists.flat()) {
    const key = `${p.field}\0${p.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    all.push(p);
  }
  const sorted = all
    .map((p, i) => ({ p, i }))
    .sort((a, b) => fieldOrder(a.p.field) - fieldOrder(b.p.field) || indexOf(a.p.field) - indexOf(b.p.field) || a.i - b.i)
    .map(({ p }) => p);
  if (sorted.length <= MAX_REPORTED_PROBLEMS) return sorted;
  const shown = sorted.slice(0, MAX_REPORTED_PROBLEMS);
  shown.push({ field: 'body', message: `${sorted.length - MAX_REPORTED_PROBLEMS} more problems not listed` });
  return shown;
}
