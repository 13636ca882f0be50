import { describe, expect, it } from 'vitest';
import { columnsOf, recordOf, viewOf } from './fields';
import { SUBSCRIPTION_FIELDS, SUBSCRIPTION_VIEW } from './subscription';

const row = {
  id: 'wh_1',
  account_id: 'acct_1',
  url: 'https://h.example/',
  events: ['case.new'],
  facility_ids: null,
  filter: null,
  secret: 'abcd',
  secret_rotation_ends_at: null,
  is_active: true,
  created_at: new Date('2026-11-22T08:00:00.000Z'),
  updated_at: new Date('2026-11-22T08:00:01.000Z'),
  deactivated_at: null,
  deactivation_reason: null,
  consecutive_failures: 2,
  last_failure_at: new Date('2026-11-22T08:00:02.000Z'),
  last_success_at: null,
  rate_limit_per_second: null,
  max_in_flight: 4,
};

describe('a resource declared once', () => {
  it('selects its columns, maps a row to the record and the record to the view', () => {
    expect(columnsOf(SUBSCRIPTION_FIELDS)).toContain(
      'facility_ids::text[] AS facility_ids, filter, secret_last4 AS secret, secret_rotation_ends_at',
    );
    const record = recordOf(SUBSCRIPTION_FIELDS, row);
    expect(record).toMatchObject({
      secret: 'whsec_********abcd',
      created_at: '2026-11-22T08:00:00.000Z',
      last_failure_at: '2026-11-22T08:00:02.000Z',
    });
    const view = viewOf(SUBSCRIPTION_VIEW, record);
    expect(Object.keys(view)).toEqual(SUBSCRIPTION_VIEW);
    expect(view).not.toHaveProperty('account_id');
    expect(view).not.toHaveProperty('consecutive_failures');
  });
});
