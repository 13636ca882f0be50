import { AppError, type KeysetPage, type PageRequest } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';

/**
 * The one test suite of keyset pagination (service-kit's `keysetPage`), run by every list's store
 * against the real database: walk pages forward, each item once under concurrent inserts, the
 * limit's bounds, a bad cursor and a cursor of another list refused with 400 VALIDATION_ERROR.
 */

/** One empty list of a store, made for one test. */
export interface ListUnderTest<T> {
  /** Adds `count` items, each newer than every item before it; their ids, oldest first. */
  add(count: number): Promise<string[]>;
  page(request: PageRequest): Promise<KeysetPage<T>>;
  /** A cursor that another list (another owner's, or another kind) issued. */
  foreignCursor(): Promise<string>;
}

export interface PaginatedStore<T> {
  /** The store and list, as the suite's titles name them. */
  name: string;
  newList(): Promise<ListUnderTest<T>>;
  idOf(item: T): string;
  /** The list's order: newest first (created_at, id descending) or oldest first (a growing position). */
  order: 'newest first' | 'oldest first';
  /** A list clients poll: the last page names its last row too (service-kit's `KeysetList.poll`). */
  polled?: boolean;
}

interface Walk<T> {
  ids: string[];
  pages: Array<KeysetPage<T>>;
}

async function walk<T>(
  store: PaginatedStore<T>,
  list: ListUnderTest<T>,
  limit: number,
  between?: () => Promise<unknown>,
): Promise<Walk<T>> {
  const out: Walk<T> = { ids: [], pages: [] };
  let cursor: string | undefined;
  for (let n = 0; n < 100; n++) {
    const request = { limit, ...(cursor === undefined ? {} : { cursor }) };
    const [page] = await Promise.all([list.page(request), n === 1 && between ? between() : undefined]);
    out.pages.push(page);
    out.ids.push(...page.items.map((item) => store.idOf(item)));
    if (!page.has_more || page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
  throw new Error('the walk did not end within 100 pages');
}

async function problemOf(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
  } catch (err) {
    if (err instanceof AppError) return { code: err.code, status: err.status, fields: err.details?.fields };
    throw err;
  }
  return 'answered';
}

/** The same cursor with other values: the list's tag, a sort key of the wrong shape. */
function withOtherValues(cursor: string): string {
  const [tag] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
  return Buffer.from(JSON.stringify([tag, 123, null, { x: 1 }]), 'utf8').toString('base64url');
}

const refused = (field: string, message: string) => ({ code: 'VALIDATION_ERROR', status: 400, fields: [{ field, message }] });

export function paginationSuite<T>(store: PaginatedStore<T>): void {
  const inOrder = (ids: string[]) => (store.order === 'newest first' ? [...ids].reverse() : ids);

  describe(`keyset pagination: ${store.name}`, () => {
    it('walks the pages forward, in order, each item once, and ends on a page without a next cursor', async () => {
      const list = await store.newList();
      const ids = await list.add(7);
      const { ids: seen, pages } = await walk(store, list, 3);
      expect(seen).toEqual(inOrder(ids));
      expect(pages.map((p) => [p.items.length, p.has_more, p.limit])).toEqual([
        [3, true, 3],
        [3, true, 3],
        [1, false, 3],
      ]);
      const last = pages[2] as KeysetPage<T>;
      if (!store.polled) expect(last.next_cursor).toBeNull();
      else {
        // A polled list names its last row; asking again gives an empty page and the same cursor.
        const again = await list.page({ limit: 3, cursor: last.next_cursor as string });
        expect([again.items, again.has_more, again.next_cursor]).toEqual([[], false, last.next_cursor]);
      }
    });

    it('lists each item once while items are added during the walk', async () => {
      const list = await store.newList();
      const before = await list.add(6);
      let added: string[] = [];
      const { ids: seen } = await walk(store, list, 2, async () => {
        added = await list.add(3);
      });
      expect(new Set(seen).size).toBe(seen.length);
      // Newer items sort before the position of a newest-first walk, after that of an oldest-first one.
      expect(seen).toEqual(store.order === 'newest first' ? inOrder(before) : [...before, ...added]);
    });

    it('keeps the limit: 25 by default, 1 to 100, and a page as long as the list has no next one', async () => {
      const list = await store.newList();
      const ids = await list.add(26);
      const first = await list.page({});
      expect([first.items.length, first.limit, first.has_more]).toEqual([25, 25, true]);
      expect((await list.page({ limit: 1 })).items.map(store.idOf)).toEqual(inOrder(ids).slice(0, 1));
      const all = await list.page({ limit: 100 });
      expect([all.items.map(store.idOf), all.has_more]).toEqual([inOrder(ids), false]);
      const exact = await list.page({ limit: 26 });
      expect([exact.items.length, exact.has_more, exact.next_cursor === null]).toEqual([26, false, !store.polled]);
      for (const limit of [0, 101]) {
        expect(await problemOf(list.page({ limit }))).toEqual(refused('limit', 'must be an integer from 1 to 100'));
      }
    });

    it('refuses a cursor that is not one, or carries another sort key, with 400 VALIDATION_ERROR', async () => {
      const list = await store.newList();
      await list.add(3);
      const issued = (await list.page({ limit: 1 })).next_cursor as string;
      for (const cursor of ['not a cursor!', 'abc', Buffer.from('{"a":1}').toString('base64url'), withOtherValues(issued)]) {
        expect(await problemOf(list.page({ limit: 1, cursor }))).toEqual(refused('cursor', 'is not a valid cursor for this list'));
      }
    });

    it("refuses another list's cursor with 400 VALIDATION_ERROR", async () => {
      const list = await store.newList();
      await list.add(2);
      expect(await problemOf(list.page({ limit: 1, cursor: await list.foreignCursor() }))).toEqual(
        refused('cursor', 'is not a valid cursor for this list'),
      );
    });
  });
}
