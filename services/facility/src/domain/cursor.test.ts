import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor, sortedList } from './cursor';

describe('keyset cursors', () => {
  it('round-trip the sort key of their own list', () => {
    const f = encodeCursor('facilities', { registry_id: '110000000042' });
    expect(decodeCursor('facilities', f)).toEqual({ registry_id: '110000000042' });
    const v = encodeCursor('violations', { date: '2025-03-01', id: '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f' });
    expect(decodeCursor('violations', v)).toEqual({ date: '2025-03-01', id: '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f' });
    expect(f).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('refuse a cursor of another list, garbage and tampered values', () => {
    const v = encodeCursor('violations', { date: '2025-03-01', id: '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f' });
    expect(decodeCursor('cases', v)).toBeUndefined();
    expect(decodeCursor('facilities', v)).toBeUndefined();
    const bad = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const c of [
      '',
      'abc',
      '!!!',
      bad(['v1', '2025-02-30', '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f']),
      bad(['v1', '2025-02-01', 'x']),
      bad({ a: 1 }),
      bad(['f1', 5]),
    ]) {
      expect(decodeCursor('violations', c) ?? decodeCursor('facilities', c)).toBeUndefined();
    }
  });

  it("take back a decimal sort value with every digit numeric gave it, a float's included", () => {
    const list = sortedList('fp1', 'decimal');
    for (const value of ['1234.5600000000001', '0.00000012345678901234567', '-3', '187500']) {
      expect(list.fromValues([value, '110000000042'])).toEqual({ value, registry_id: '110000000042' });
    }
    for (const value of ['1e21', '1.', '.5', `0.${'1'.repeat(41)}`, '12a']) {
      expect(list.fromValues([value, '110000000042'])).toBeUndefined();
    }
  });
});
