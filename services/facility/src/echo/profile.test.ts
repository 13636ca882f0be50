import { describe, expect, it } from 'vitest';
import { RowReason } from './codes';
import { profileCells } from './profile';

const cells = (row: Record<string, string>) => profileCells((c) => row[c]);

describe('profileCells (ECHO Exporter → the profile staging cells)', () => {
  it('maps every cell: region with two digits, SIC sorted, Y flags, counts, dollars, ISO dates', () => {
    expect(
      cells({
        FAC_EPA_REGION: '6',
        FAC_SIC_CODES: '2911 2869',
        FAC_MAJOR_FLAG: 'Y',
        CAA_COMPLIANCE_STATUS: 'High Priority Violation ',
        FAC_QTRS_WITH_NC: '7',
        FAC_PROGRAMS_WITH_SNC: '1',
        FAC_SNC_FLG: 'N',
        FAC_INSPECTION_COUNT: '6',
        FAC_DATE_LAST_INSPECTION: '03/01/2024',
        FAC_INFORMAL_COUNT: '2',
        FAC_FORMAL_ACTION_COUNT: '1',
        FAC_DATE_LAST_FORMAL_ACTION: '12/31/2023',
        FAC_PENALTY_COUNT: '1',
        FAC_TOTAL_PENALTIES: '187500.5',
        FAC_LAST_PENALTY_AMT: '187500.5',
        FAC_DATE_LAST_PENALTY: '08/19/2025',
      }),
    ).toEqual([
      '06',
      '2869 2911',
      't',
      '{"caa":"High Priority Violation","cwa":null,"rcra":null}',
      '{"quarters_with_noncompliance":7,"programs_with_snc":1,"snc":false}',
      '{"count":6,"last_date":"2024-03-01"}',
      '{"informal_actions":2,"formal_actions":1,"last_formal_action_date":"2023-12-31"}',
      '{"count":1,"total_usd":187500.5,"last_amount_usd":187500.5,"last_date":"2025-08-19"}',
    ]);
  });

  it('empty cells: null, 0 for counts, false for flags', () => {
    expect(cells({})).toEqual([
      null,
      '',
      'f',
      '{"caa":null,"cwa":null,"rcra":null}',
      '{"quarters_with_noncompliance":0,"programs_with_snc":0,"snc":false}',
      '{"count":0,"last_date":null}',
      '{"informal_actions":0,"formal_actions":0,"last_formal_action_date":null}',
      '{"count":0,"total_usd":null,"last_amount_usd":null,"last_date":null}',
    ]);
  });

  it.each([
    [{ FAC_EPA_REGION: '11' }, "FAC_EPA_REGION: not an EPA region: '11'"],
    [{ FAC_MAJOR_FLAG: 'X' }, "FAC_MAJOR_FLAG: not Y or N: 'X'"],
    [{ FAC_QTRS_WITH_NC: '2.5' }, "FAC_QTRS_WITH_NC: not a whole number: '2.5'"],
    [{ FAC_PENALTY_COUNT: '-1' }, "FAC_PENALTY_COUNT: not a valid number: '-1'"],
    [{ FAC_TOTAL_PENALTIES: '$1,000' }, "FAC_TOTAL_PENALTIES: not a valid number: '$1,000'"],
    [{ FAC_DATE_LAST_PENALTY: '2025-08-19' }, "FAC_DATE_LAST_PENALTY: not a date (MM/DD/YYYY): '2025-08-19'"],
  ])('a bad cell is a row error naming its column: %o', (row, reason) => {
    expect(() => cells(row)).toThrow(new RowReason(reason));
  });
});
