import { randomBytes, randomUUID } from 'node:crypto';
import { type ApiStack, startApiStack, type TestAccount } from '@fcd/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The facility list's filters and sorts through the gateway (docs/api.md, "Filters and sorting"):
 * the gateway passes the query string through to the facility service, for the list and for the
 * export, and a bad value is the facility service's 400 naming the parameter.
 * services/facility/test/facility-filters.int.test.ts covers each filter and sort in detail.
 */
let stack: ApiStack;
let pro: TestAccount;

/** registry_id, name, epa_region, naics, total penalties (USD or null). */
const SEEDS: Array<[string, string, string, string, number | null]> = [
  ['GWF1', 'Zinc Works', '06', '331410', 5000],
  ['GWF2', 'Acid Plant', '06', '325188', null],
  ['GWF3', 'Mill Road', '05', '322121', 90000],
  ['GWF4', 'Bay Refinery', '06', '324110', 250000],
];

async function call(path: string, apiKey: string) {
  const res = await fetch(`${stack.gateway}${path}`, { headers: { 'x-api-key': apiKey } });
  return { status: res.status, text: await res.text() };
}

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_facility_filters', webhookSecretKey: randomBytes(32).toString('base64') });
  pro = await stack.createAccount('pro');
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    for (const [registryId, name, region, naics, total] of SEEDS) {
      await client.query(
        `INSERT INTO facility.facilities (id, registry_id, name, state, compliance_status, epa_region, naics_codes, penalties, updated_at)
         VALUES ($1, $2, $3, 'TX', 'violation', $4, ARRAY[$5], jsonb_build_object('count', 0, 'total_usd', $6::numeric,
                 'last_amount_usd', NULL, 'last_date', NULL), now())`,
        [randomUUID(), registryId, name, region, naics, total],
      );
    }
  } finally {
    await client.end();
  }
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('facility filters and sorts through the gateway', () => {
  it('lists the facilities of the filters, in the order asked, page by page', async () => {
    const first = await call('/v1/facilities?epa_region=06&sort=-penalties_total&limit=2', pro.apiKey);
    expect(first.status).toBe(200);
    const page1 = JSON.parse(first.text) as { data: Array<{ registry_id: string }>; pagination: { next_cursor: string } };
    const second = await call(
      `/v1/facilities?epa_region=06&sort=-penalties_total&limit=2&cursor=${page1.pagination.next_cursor}`,
      pro.apiKey,
    );
    const page2 = JSON.parse(second.text) as { data: Array<{ registry_id: string }>; pagination: { has_more: boolean } };
    expect([...page1.data, ...page2.data].map((f) => f.registry_id)).toEqual(['GWF4', 'GWF1', 'GWF2']);
    expect(page2.pagination.has_more).toBe(false);
  });

  it('exports the facilities of the same filters', async () => {
    const res = await call('/v1/exports/facilities?naics=32&min_penalties_usd=1', pro.apiKey);
    expect(res.status).toBe(200);
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { registry_id?: string; export?: unknown });
    expect(
      lines
        .filter((l) => l.registry_id)
        .map((l) => l.registry_id)
        .sort(),
    ).toEqual(['GWF3', 'GWF4']);
    expect(lines[lines.length - 1]).toEqual({ export: { complete: true, rows: 2, after: null } });
  });

  it("answers a bad value with the facility service's 400 naming the parameter, list and export", async () => {
    for (const path of ['/v1/facilities?naics=3', '/v1/exports/facilities?naics=3']) {
      const res = await call(path, pro.apiKey);
      expect(
        [res.status, (JSON.parse(res.text) as { error: { code: string; details: { fields: unknown } } }).error.details.fields],
        path,
      ).toEqual([400, [{ field: 'naics', message: 'must be a NAICS code or prefix of 2 to 6 digits' }]]);
    }
  });
});
