import { describe, expect, it } from 'vitest';
import { decodeListCursor, encodeListCursor } from './cursor';

describe('list cursors', () => {
  it('round-trip the values of their own list, in url-safe text', () => {
    const c = encodeListCursor('v1', ['2025-03-01', 'id-1', 7]);
    expect(c).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeListCursor('v1', c)).toEqual(['2025-03-01', 'id-1', 7]);
    expect(c).toBe(Buffer.from('["v1","2025-03-01","id-1",7]').toString('base64url'));
  });

  it('refuse a cursor of another list, garbage, and text too long or not base64url', () => {
    const bad = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    expect(decodeListCursor('c1', encodeListCursor('v1', ['x']))).toBeUndefined();
    for (const text of ['', '!!!', 'abc', bad({ a: 1 }), bad('v1'), bad([]), 'a'.repeat(401)]) {
      expect(decodeListCursor('v1', text)).toBeUndefined();
    }
  });
});
