/**
 * The code lists of the event contract, in one place: the values the facility snapshots and
 * records inside events carry (a facility's `state`, `programs` and `epa_region`, a violation's
 * `program` and `severity`), which the facility service validates and publishes and webhook
 * subscription filters name (docs/webhooks.md "Filters"). Grounded in EPA ECHO.
 */

/** The 50 states and DC (the demo data covers all of them). */
// biome-ignore format: the codes in rows, not one a line
export const STATES_AND_DC = [
  'AL', 'AK', 'AZ', 'AR', 'CA', 'CO', 'CT', 'DE', 'DC', 'FL', 'GA', 'HI', 'ID', 'IL', 'IN', 'IA', 'KS', 'KY', 'LA',
  'ME', 'MD', 'MA', 'MI', 'MN', 'MS', 'MO', 'MT', 'NE', 'NV', 'NH', 'NJ', 'NM', 'NY', 'NC', 'ND', 'OH', 'OK', 'OR',
  'PA', 'RI', 'SC', 'SD', 'TN', 'TX', 'UT', 'VT', 'VA', 'WA', 'WV', 'WI', 'WY',
] as const;

/** Territories with USPS codes that ECHO also covers. */
const TERRITORIES = ['AS', 'GU', 'MP', 'PR', 'VI'] as const;

/** USPS codes of the states, DC and the territories, in that order. */
export const STATE_CODES: readonly string[] = [...STATES_AND_DC, ...TERRITORIES];

/** ECHO media programs: Clean Air Act, Clean Water Act, RCRA (hazardous waste), Safe Drinking Water Act. */
export const PROGRAMS = ['CAA', 'CWA', 'RCRA', 'SDWA'] as const;
export type Program = (typeof PROGRAMS)[number];

/**
 * Violation severity. `significant` corresponds to ECHO's High Priority
 * Violation (CAA), Significant Noncompliance (CWA, RCRA) and Serious Violator (SDWA).
 */
export const SEVERITIES = ['minor', 'moderate', 'significant'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** EPA regions: two digits, "01" to "10". */
export const EPA_REGIONS = ['01', '02', '03', '04', '05', '06', '07', '08', '09', '10'] as const;
