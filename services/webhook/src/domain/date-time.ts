import { fullFormats } from 'ajv-formats/dist/formats.js';

/** ajv-formats' full `date-time` check, the one Fastify applies to `format: 'date-time'` in query strings. */
const isDateTime = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate;

/**
 * The one reading of an RFC 3339 date-time of this service (`since` of GET /v1/events, `since` and
 * `until` of a recovery): ajv-formats' full `date-time` check (the route schemas' `format`: real
 * calendar dates, hours 00-23, an offset required), then Date.parse; NaN for anything else, also a
 * leap second. `2026-02-29` or `T24:00` are refused, never rolled over.
 */
export function parseDateTime(value: string): number {
  return isDateTime(value) ? Date.parse(value) : Number.NaN;
}
