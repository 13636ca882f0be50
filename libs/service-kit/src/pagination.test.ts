import { describe, expect, it } from 'vitest';
import { encodeListCursor } from './cursor';
import { AppError } from './errors';
import {
  cursorKey,
  fetchSize,
  type KeysetList,
  keysetAfter,
  keysetOrderBy,
  keysetPage,
  listBody,
  listTag,
  pageLimit,
  pageOf,
  takeRows,
} from './pagination';

interface Row {
  n: number;
}

const numbers: KeysetList<number, Row> = {
  tag: 'n1',
  keyOf: (row) => row.n,
  toValues: (n) => [n],
  fromValues: (values) => (values.length === 1 && Number.isInteger(values[0]) ? (values[0] as number) : undefined),
};
const polled = { ...numbers, poll: true };
const rows = (...ns: number[]) => ns.map((n) => ({ n }));

function problemOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err instanceof AppError ? { code: err.code, status: err.status, details: err.details } : err;
  }
  return undefined;
}

describe('keyset pages', () => {
  it('cut the one extra row fetched into has_more, and name the last row shown as the next cursor', () => {
    expect(fetchSize(3)).toBe(4);
    const cut = takeRows(rows(1, 2, 3, 4), 3);
    expect(cut).toEqual({ items: rows(1, 2, 3), has_more: true });
    expect(pageOf(numbers, cut, 3)).toEqual({ items: rows(1, 2, 3), has_more: true, limit: 3, next_cursor: encodeListCursor('n1', [3]) });
    expect(pageOf(numbers, takeRows(rows(1, 2), 3), 3).next_cursor).toBeNull();
  });

  it('of a polled list name the last row on the last page too, and give an empty page the cursor it was given', () => {
    expect(pageOf(polled, takeRows(rows(1, 2), 3), 3).next_cursor).toBe(encodeListCursor('n1', [2]));
    expect(pageOf(polled, takeRows([], 3), 3, 'given').next_cursor).toBe('given');
    expect(pageOf(polled, takeRows([], 3), 3).next_cursor).toBeNull();
  });

  it('fetch after the position the cursor names, with the limit checked', async () => {
    const calls: Array<[number, number | undefined]> = [];
    const fetch = async (limit: number, after: number | undefined) => {
      calls.push([limit, after]);
      return takeRows(rows(8, 9), limit);
    };
    const page = await keysetPage(numbers, { limit: 2, cursor: encodeListCursor('n1', [7]) }, fetch);
    expect(page).toEqual({ items: rows(8, 9), has_more: false, limit: 2, next_cursor: null });
    await keysetPage(numbers, {}, fetch);
    expect(calls).toEqual([
      [2, 7],
      [25, undefined],
    ]);
    expect(listBody(page, (r) => r.n)).toEqual({ data: [8, 9], pagination: { limit: 2, next_cursor: null, has_more: false } });
  });

  it('refuse a limit out of 1..100 and a cursor of another list or with other values as 400 VALIDATION_ERROR', () => {
    for (const limit of [0, 101, 1.5]) {
      expect(problemOf(() => pageLimit(limit))).toEqual({
        code: 'VALIDATION_ERROR',
        status: 400,
        details: { fields: [{ field: 'limit', message: 'must be an integer from 1 to 100' }] },
      });
    }
    for (const cursor of ['!!', encodeListCursor('other', [1]), encodeListCursor('n1', ['1']), encodeListCursor('n1', [1, 2])]) {
      expect(problemOf(() => cursorKey(numbers, cursor))).toEqual({
        code: 'VALIDATION_ERROR',
        status: 400,
        details: { fields: [{ field: 'cursor', message: 'is not a valid cursor for this list' }] },
      });
    }
    expect(cursorKey(numbers, undefined)).toBeUndefined();
  });

  it('name lists by a digest that hides the owner, and write the keyset in SQL', () => {
    expect(listTag('subscriptions:acct_1')).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(listTag('subscriptions:acct_1')).not.toBe(listTag('subscriptions:acct_2'));
    const newest = { columns: ['created_at', 'id'], descending: true };
    expect(keysetAfter(newest, ['$3', '$4'])).toBe('(created_at, id) < ($3, $4)');
    expect(keysetOrderBy(newest)).toBe('created_at DESC, id DESC');
    expect(keysetAfter({ columns: ['position'], descending: false }, ['$1'])).toBe('(position) > ($1)');
    expect(keysetOrderBy({ columns: ['position'], descending: false })).toBe('position');
  });
});
