import { type TSchema, Type } from '@sinclair/typebox';
import { MAX_PAGE_SIZE } from './pagination';

/**
 * The TypeBox shapes every service's routes share: one definition each, so the OpenAPI document
 * says the same thing for the same idea everywhere.
 */

/** `T` or null (`anyOf: [T, null]`); options (a description) go on the union. */
export const Nullable = <T extends TSchema>(schema: T, options: Record<string, unknown> = {}) => Type.Union([schema, Type.Null()], options);

/** One of the given strings, as a plain `enum` (an `anyOf` of literals reads badly in OpenAPI). */
export const StringEnum = <T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

/** The `pagination` object of every list response (keyset cursors: docs/api.md, "Pagination"). */
export const Pagination = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE }),
  next_cursor: Nullable(Type.String({ minLength: 1 }), { description: 'Pass as `cursor` for the next page; null on the last one.' }),
  has_more: Type.Boolean(),
});

/** The `limit` and `cursor` query parameters of every list, spread into its querystring schema (docs/api.md "Pagination"). */
export const PageQuery = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, pattern: '^[A-Za-z0-9_-]+$' })),
};
