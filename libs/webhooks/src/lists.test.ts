import { cursorAfter, cursorKey, type KeysetList } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { deliveryList, EVENT_LIST, type ListPosition, subscriptionList } from './lists';

const position = { created_at: '2026-11-22T08:15:30.123Z', id: 'wh_7b0d7a56-8a4c-4d77-9a0e-2f1f7f1b2c3d' };
const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const tagOf = (cursor: string) => JSON.parse(Buffer.from(cursor, 'base64url').toString())[0];

/** The key a cursor names in `list`, or the error code it is refused with. */
function read<K>(list: KeysetList<K, never>, cursor: string): K | string {
  try {
    return cursorKey(list, cursor) as K;
  } catch (err) {
    return (err as { code: string }).code;
  }
}

describe('subscription and delivery lists', () => {
  const list = subscriptionList<ListPosition>('acct-a');

  it('round-trip a position as an opaque base64url cursor', () => {
    const cursor = cursorAfter(list, position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(read(list, cursor)).toEqual(position);
  });

  it("refuse another list's or another account's cursor", () => {
    const cursor = cursorAfter(list, position);
    expect(read(subscriptionList('acct-b'), cursor)).toBe('VALIDATION_ERROR');
    expect(read(deliveryList(position.id), cursor)).toBe('VALIDATION_ERROR');
  });

  it('refuse anything they did not issue', () => {
    const tag = tagOf(cursorAfter(list, position));
    for (const bad of [
      '',
      'not base64!',
      enc({ created_at: position.created_at, id: position.id }),
      enc([position.created_at, position.id]),
      enc(['x', position.created_at, position.id]),
      enc([position.created_at]),
      'x'.repeat(500),
      enc([tag, '2026-13-45T99:99:99.999Z', position.id]),
      enc([tag, 'yesterday', position.id]),
      enc([tag, position.created_at, 'wh_x']),
      enc([tag, position.created_at, 42]),
    ]) {
      expect(read(list, bad)).toBe('VALIDATION_ERROR');
    }
  });

  it('take only delivery ids in a delivery list', () => {
    const deliveries = deliveryList<ListPosition>(position.id);
    const dlv = { ...position, id: position.id.replace('wh_', 'dlv_') };
    expect(read(deliveries, cursorAfter(deliveries, dlv))).toEqual(dlv);
    expect(read(deliveries, cursorAfter(deliveries, position))).toBe('VALIDATION_ERROR');
  });
});

describe('the event list', () => {
  it('round-trips a position of the log and refuses anything else', () => {
    const cursor = cursorAfter(EVENT_LIST, { position: '1234567890123' });
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(read(EVENT_LIST, cursor)).toBe('1234567890123');
    // An event cursor is no cursor of another list.
    expect(read(deliveryList<ListPosition>(position.id), cursor)).toBe('VALIDATION_ERROR');
    expect(read(subscriptionList<ListPosition>('acct-a'), cursor)).toBe('VALIDATION_ERROR');
    const tag = tagOf(cursor);
    for (const bad of [
      '',
      'not base64!',
      enc([tag, 12]),
      enc([tag, '0']),
      enc([tag, '-1']),
      enc([tag, '01']),
      enc([tag, '9223372036854775808']),
      enc([tag, '1', 'x']),
      cursorAfter(subscriptionList('events'), position),
    ]) {
      expect(read(EVENT_LIST, bad)).toBe('VALIDATION_ERROR');
    }
    expect(read(EVENT_LIST, enc([tag, '9223372036854775807']))).toBe('9223372036854775807');
  });
});
