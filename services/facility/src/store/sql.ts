import type { KeysetPage } from '@fcd/service-kit';

/** The SQL helpers of the facility store's queries. */

/** Anything that runs a query: a pg.Pool or a client inside a transaction. */
export interface Queryable {
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Builds a parameterised WHERE clause. */
export class Where {
  readonly params: unknown[] = [];
  private readonly parts: string[] = [];

  add(sqlWithPlaceholders: (...refs: string[]) => string, ...values: unknown[]): void {
    const refs = values.map((v) => {
      this.params.push(v);
      return `$${this.params.length}`;
    });
    this.parts.push(sqlWithPlaceholders(...refs));
  }

  param(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  toString(): string {
    return this.parts.length === 0 ? '' : `WHERE ${this.parts.join(' AND ')}`;
  }
}

/** Escapes LIKE wildcards so q is matched literally. */
export function likeContains(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A page of rows as their public view (the cursor was named from the rows, before mapping). */
export function mapPage<R, T>(page: KeysetPage<R>, map: (r: R) => T): KeysetPage<T> {
  return { ...page, items: page.items.map(map) };
}
