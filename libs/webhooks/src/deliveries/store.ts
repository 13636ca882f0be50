import type { KeysetPage, PageRequest, Pool } from '@fcd/service-kit';
import { DeliveryLog } from './log';
import { type DeliveryStoreHooks, type DeliveryStoreOptions, DispatchQueue } from './queue';
import type { SecretDecrypter } from './secret-cache';
import type { DeliveryPosition, DeliveryView } from './view';

/**
 * Both sides of the deliveries on one pool: the dispatch queue (the
 * dispatcher's) and the delivery log (the webhook API's).
 */
export class DeliveryStore extends DispatchQueue {
  private readonly log: DeliveryLog;

  constructor(pool: Pool, secrets?: SecretDecrypter, hooks: DeliveryStoreHooks = {}, options: DeliveryStoreOptions = {}) {
    super(pool, secrets, hooks, options);
    this.log = new DeliveryLog(pool);
  }

  list(subscriptionId: string, limit: number, after?: DeliveryPosition): Promise<{ items: DeliveryView[]; has_more: boolean }> {
    return this.log.list(subscriptionId, limit, after);
  }

  page(subscriptionId: string, request: PageRequest): Promise<KeysetPage<DeliveryView>> {
    return this.log.page(subscriptionId, request);
  }

  get(subscriptionId: string, deliveryId: string): Promise<DeliveryView | undefined> {
    return this.log.get(subscriptionId, deliveryId);
  }

  retry(subscriptionId: string, deliveryId: string, now: number): Promise<DeliveryView | undefined> {
    return this.log.retry(subscriptionId, deliveryId, now);
  }

  createManual(input: Parameters<DeliveryLog['createManual']>[0]): Promise<DeliveryView | undefined> {
    return this.log.createManual(input);
  }
}
