import { describe, expect, it } from 'vitest';
import { decodeCursor, decodePositionCursor, encodeCursor, encodePositionCursor } from './cursor';

describe('list cursor', () => {
  const position = { created_at: '2026-11-22T08:15:30.123Z', id: 'wh_7b0d7a56-8a4c-4d77-9a0e-2f1f7f1b2c3d' };
  const list = 'subscriptions:acct-a';

  it('round-trips an opaque base64url token', () => {
    const cursor = encodeCursor(list, position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(list, cursor)).toEqual(position);
  });

  it("refuses another list's or another account's cursor", () => {
    const cursor = encodeCursor(list, position);
    expect(decodeCursor('subscriptions:acct-b', cursor)).toBeUndefined();
    expect(decodeCursor('deliveries:wh_7b0d7a56-8a4c-4d77-9a0e-2f1f7f1b2c3d', cursor)).toBeUndefined();
  });

  it('refuses anything it did not issue', () => {
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const bad of [
      '',
      'not base64!',
      enc({ created_at: position.created_at, id: position.id }),
      enc([position.created_at, position.id]),
      enc(['x', position.created_at, position.id]),
      enc([position.created_at]),
      'x'.repeat(500),
    ]) {
      expect(decodeCursor(list, bad)).toBeUndefined();
    }
    const tag = JSON.parse(Buffer.from(encodeCursor(list, position), 'base64url').toString())[0];
    for (const bad of [
      enc([tag, '2026-13-45T99:99:99.999Z', position.id]),
      enc([tag, 'yesterday', position.id]),
      enc([tag, position.created_at, 'wh_x']),
      enc([tag, position.created_at, 42]),
    ]) {
      expect(decodeCursor(list, bad)).toBeUndefined();
    }
  });
});

describe('position cursor', () => {
  it('round-trips a position of its list and refuses anything else', () => {
    const cursor = encodePositionCursor('events', '1234567890123');
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodePositionCursor('events', cursor)).toBe('1234567890123');
    expect(decodePositionCursor('deliveries:x', cursor)).toBeUndefined();
    const tag = JSON.parse(Buffer.from(cursor, 'base64url').toString())[0];
    const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const bad of [
      '',
      'not base64!',
      enc([tag, 12]),
      enc([tag, '0']),
      enc([tag, '-1']),
      enc([tag, '01']),
      enc([tag, '9223372036854775808']),
      enc([tag, '1', 'x']),
      encodeCursor('events', { created_at: '2026-11-22T08:15:30.123Z', id: 'wh_7b0d7a56-8a4c-4d77-9a0e-2f1f7f1b2c3d' }),
    ]) {
      expect(decodePositionCursor('events', bad)).toBeUndefined();
    }
    expect(decodePositionCursor('events', enc([tag, '9223372036854775807']))).toBe('9223372036854775807');
  });
});
