import { createHash } from 'node:crypto';
import { decodeListCursor, encodeListCursor, prefixedIdRegExp } from '@fcd/service-kit';
import type { ListPosition } from '@fcd/webhooks';

/**
 * Opaque keyset cursor of one list: base64url of a tag naming the list (a
 * digest of its kind and owner, e.g. the account for subscriptions, the
 * subscription for deliveries) and the last row's (created_at, id). A cursor
 * of another list or another account does not decode here, so it is a
 * VALIDATION_ERROR rather than a position in someone else's order. Clients
 * must not build or parse it.
 */
const ID = prefixedIdRegExp('wh');
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function listTag(list: string): string {
  return createHash('sha256').update(list).digest('base64url').slice(0, 16);
}

/** `list` names the list and its owner, e.g. `subscriptions:<account id>`. */
export function encodeCursor(list: string, position: ListPosition): string {
  return encodeListCursor(listTag(list), [position.created_at, position.id]);
}

/** undefined when the text is not a cursor this service issued for this list. */
export function decodeCursor(list: string, text: string, idPattern: RegExp = ID): ListPosition | undefined {
  const values = decodeListCursor(listTag(list), text);
  if (values?.length !== 2) return undefined;
  const [createdAt, id] = values;
  if (typeof createdAt !== 'string' || !ISO.test(createdAt) || Number.isNaN(Date.parse(createdAt))) return undefined;
  if (typeof id !== 'string' || !idPattern.test(id)) return undefined;
  return { created_at: createdAt, id };
}

const POSITION = /^[1-9][0-9]{0,18}$/;
const MAX_POSITION = 9_223_372_036_854_775_807n;

/**
 * The same opaque form for a list ordered by one growing position (the event log): the list tag
 * and the position (decimal text of a bigint) of the last row returned.
 */
export function encodePositionCursor(list: string, position: string): string {
  return encodeListCursor(listTag(list), [position]);
}

/** undefined when the text is not a position cursor this service issued for this list. */
export function decodePositionCursor(list: string, text: string): string | undefined {
  const values = decodeListCursor(listTag(list), text);
  if (values?.length !== 1) return undefined;
  const [position] = values;
  if (typeof position !== 'string' || !POSITION.test(position) || BigInt(position) > MAX_POSITION) return undefined;
  return position;
}
