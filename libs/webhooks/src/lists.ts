import { DeliveryId, type IdKind, type KeysetList, type KeysetOrder, listTag, SubscriptionId } from '@fcd/service-kit/pure';

/**
 * The keyset lists of the webhook schema (service-kit's `keysetPage`): subscriptions of an
 * account and deliveries of a subscription, newest first by (created_at, id); the event log,
 * oldest first by position. Each list's tag names its owner (as a digest), so a cursor of
 * another account's or subscription's list is refused.
 */

/** A position in a newest-first list: the last row of the previous page. */
export interface ListPosition {
  created_at: string;
  id: string;
}

/** Newest first: created_at, then id, descending. */
export const NEWEST_FIRST: KeysetOrder = { columns: ['created_at', 'id'], descending: true };

/** The event log's order: its position, ascending. */
export const BY_POSITION: KeysetOrder = { columns: ['position'], descending: false };

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function newestFirst<T extends ListPosition>(name: string, ids: IdKind<string>): KeysetList<ListPosition, T> {
  return {
    tag: listTag(name),
    keyOf: (item) => ({ created_at: item.created_at, id: item.id }),
    toValues: (key) => [key.created_at, key.id],
    fromValues: (values) => {
      const [createdAt, id] = values;
      if (values.length !== 2 || typeof createdAt !== 'string' || !ISO.test(createdAt) || Number.isNaN(Date.parse(createdAt)))
        return undefined;
      return ids.is(id) ? { created_at: createdAt, id } : undefined;
    },
  };
}

/** An account's subscriptions. */
export function subscriptionList<T extends ListPosition>(accountId: string): KeysetList<ListPosition, T> {
  return newestFirst(`subscriptions:${accountId}`, SubscriptionId);
}

/** A subscription's deliveries. */
export function deliveryList<T extends ListPosition>(subscriptionId: string): KeysetList<ListPosition, T> {
  return newestFirst(`deliveries:${subscriptionId}`, DeliveryId);
}

const POSITION = /^[1-9][0-9]{0,18}$/;
const MAX_POSITION = 9_223_372_036_854_775_807n;

/** The event log, polled: a position is the decimal text of a bigint. */
export const EVENT_LIST: KeysetList<string, { position: string }> = {
  tag: listTag('events'),
  poll: true,
  keyOf: (item) => item.position,
  toValues: (position) => [position],
  fromValues: (values) => {
    const [position] = values;
    if (values.length !== 1 || typeof position !== 'string' || !POSITION.test(position) || BigInt(position) > MAX_POSITION)
      return undefined;
    return position;
  },
};
