import { createHash } from 'node:crypto';
import { decodeListCursor, encodeListCursor } from './cursor';
import { validationError } from './errors';

/**
 * Keyset pagination, once for every list (docs/api.md, "Pagination"): a store fetches one row
 * more than the page (`fetchSize`) after the position a cursor names, `takeRows` cuts it to the
 * page, and `keysetPage` turns a request's `limit` and `cursor` into that position and the page's
 * rows into `next_cursor`. The cursor is the list codec's (`encodeListCursor`): a cursor of another
 * list, or one whose values are not the list's sort key, is a 400 VALIDATION_ERROR. Pure: no I/O.
 */

export const DEFAULT_PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 100;

/** A keyset list: its tag, and its sort key as a row carries it and as cursor values. */
export interface KeysetList<K, T> {
  /** Names the list and, where it matters, its owner (`listTag` hides the owner's id). */
  readonly tag: string;
  /** The sort key of a row: the next page starts strictly after it. */
  keyOf(item: T): K;
  toValues(key: K): readonly unknown[];
  /** The key the values of a cursor carry; undefined when they are not one. */
  fromValues(values: readonly unknown[]): K | undefined;
  /**
   * A list clients poll (the event log): every page with rows names its last row, the last page
   * too, and an empty page gives back the cursor it was given, so a client that keeps asking sees
   * each row once.
   */
  readonly poll?: boolean;
}

/** The rows of one page, as a store returns them. */
export interface Rows<T> {
  items: T[];
  has_more: boolean;
}

/** One page of a list, as every list answers. */
export interface KeysetPage<T> extends Rows<T> {
  limit: number;
  next_cursor: string | null;
}

export interface PageRequest {
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** A tag naming a list and its owner without showing the owner's id (a digest of `name`). */
export function listTag(name: string): string {
  return createHash('sha256').update(name).digest('base64url').slice(0, 16);
}

/** How many rows a store fetches for a page of `limit`: one more tells whether more follow. */
export function fetchSize(limit: number): number {
  return limit + 1;
}

/** Rows fetched with `fetchSize(limit)` → the page's rows and whether more follow. */
export function takeRows<T>(rows: readonly T[], limit: number): Rows<T> {
  return { items: rows.slice(0, limit), has_more: rows.length > limit };
}

/** `limit` checked (1..MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE when absent); 400 VALIDATION_ERROR otherwise. */
export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw validationError([{ field: 'limit', message: `must be an integer from 1 to ${MAX_PAGE_SIZE}` }]);
  }
  return limit;
}

/** The position a cursor names in `list`; undefined without one; 400 VALIDATION_ERROR for a cursor not of this list. */
export function cursorKey<K, T>(list: KeysetList<K, T>, cursor: string | undefined): K | undefined {
  if (cursor === undefined) return undefined;
  const values = decodeListCursor(list.tag, cursor);
  const key = values === undefined ? undefined : list.fromValues(values);
  if (key === undefined) throw validationError([{ field: 'cursor', message: 'is not a valid cursor for this list' }]);
  return key;
}

/** The cursor of the page after `item` (the last row shown). */
export function cursorAfter<K, T>(list: KeysetList<K, T>, item: T): string {
  return encodeListCursor(list.tag, list.toValues(list.keyOf(item)));
}

/** The page of `rows` (already cut by `takeRows`) for a request whose cursor was `given`. */
export function pageOf<K, T>(list: KeysetList<K, T>, rows: Rows<T>, limit: number, given?: string): KeysetPage<T> {
  const last = rows.items[rows.items.length - 1];
  let next: string | null = null;
  if (last !== undefined && (rows.has_more || list.poll)) next = cursorAfter(list, last);
  else if (last === undefined && list.poll) next = given ?? null;
  return { items: rows.items, has_more: rows.has_more, limit, next_cursor: next };
}

/**
 * One page of `list`: the request's limit and cursor checked (400 VALIDATION_ERROR), the rows
 * after the cursor's position fetched, and the next cursor named.
 */
export async function keysetPage<K, T>(
  list: KeysetList<K, T>,
  request: PageRequest,
  fetch: (limit: number, after: K | undefined) => Promise<Rows<T>>,
): Promise<KeysetPage<T>> {
  const limit = pageLimit(request.limit);
  const after = cursorKey(list, request.cursor);
  return pageOf(list, await fetch(limit, after), limit, request.cursor);
}

/** The `{ data, pagination }` body of a list response, rows mapped to their public view. */
export function listBody<T, V>(page: KeysetPage<T>, view: (item: T) => V) {
  return {
    data: page.items.map(view),
    pagination: { limit: page.limit, next_cursor: page.next_cursor, has_more: page.has_more },
  };
}

/** A keyset order in SQL: the sort columns, all ascending or all descending. */
export interface KeysetOrder {
  readonly columns: readonly string[];
  readonly descending: boolean;
}

/** `(a, b) < ($3, $4)`: the rows strictly after a position, in the order's direction. */
export function keysetAfter(order: KeysetOrder, refs: readonly string[]): string {
  return `(${order.columns.join(', ')}) ${order.descending ? '<' : '>'} (${refs.join(', ')})`;
}

/** `a DESC, b DESC`: the ORDER BY of the order. */
export function keysetOrderBy(order: KeysetOrder): string {
  return order.columns.map((c) => `${c}${order.descending ? ' DESC' : ''}`).join(', ');
}
