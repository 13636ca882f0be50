import { describe, expect, it } from 'vitest';
import { envelopeText } from './envelope';

describe('envelopeText (a delivery stored without its body)', () => {
  it('sends the payload as compact JSON with the keys in the order id, type, created_at, data', () => {
    // What Postgres gives for jsonb::text: keys by length, then bytes, with spaces.
    const payload =
      '{"id": "evt_1", "data": {"violation": {"id": "v1"}}, "type": "violation.new", "created_at": "2026-11-22T08:15:30.123Z"}';
    expect(envelopeText(payload)).toBe(
      '{"id":"evt_1","type":"violation.new","created_at":"2026-11-22T08:15:30.123Z","data":{"violation":{"id":"v1"}}}',
    );
  });
});
