import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool, withTransaction } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { paginationSuite } from '@fcd/testing/pagination-suite';
import { afterAll, beforeAll } from 'vitest';
import {
  DeliveryStore,
  type DeliveryView,
  EventLog,
  generateSecret,
  SecretBox,
  type StoredEvent,
  type Subscription,
  SubscriptionStore,
  WEBHOOK_SCHEMA,
  webhookMigrations,
} from '../src/index';

/** The shared keyset-pagination suite against each list of the webhook schema, on the real Postgres. */

let db: TestDatabase;
let pool: Pool;
let subscriptions: SubscriptionStore;
let deliveries: DeliveryStore;
let events: EventLog;
const box = new SecretBox(randomBytes(32));

/** Every item added is newer than the last, whatever the list. */
let clock = Date.parse('2026-11-22T08:00:00.000Z');
const tick = () => (clock += 1000);

beforeAll(async () => {
  db = await createTestDatabase('webhooks_pagination');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-pagination-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  subscriptions = new SubscriptionStore(pool, box);
  deliveries = new DeliveryStore(pool, box);
  events = new EventLog(pool);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function addSubscriptions(accountId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n++) {
    const id = `wh_${randomUUID()}`;
    await subscriptions.create(
      {
        id,
        account_id: accountId,
        url: 'https://hooks.example.com/fcd',
        events: ['case.new'],
        facility_ids: null,
        secret: generateSecret(),
        now: tick(),
      },
      1000,
    );
    ids.push(id);
  }
  return ids;
}

async function addDeliveries(subscriptionId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n++) {
    const id = `dlv_${randomUUID()}`;
    const eventId = `evt_${randomUUID()}`;
    await deliveries.createManual({ id, subscriptionId, eventId, eventType: 'webhook.test', body: `{"id":"${eventId}"}`, now: tick() });
    ids.push(id);
  }
  return ids;
}

async function addEvents(facilityId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n++) {
    const id = `evt_${randomUUID()}`;
    const createdAt = tick();
    const body = JSON.stringify({ id, type: 'case.new', created_at: new Date(createdAt).toISOString(), data: {} });
    await withTransaction(pool, (client) =>
      EventLog.append(client, [{ id, type: 'case.new', body, facilityIds: [facilityId], createdAt }], createdAt),
    );
    ids.push(id);
  }
  return ids;
}

paginationSuite<Subscription>({
  name: "SubscriptionStore.page (an account's subscriptions)",
  order: 'newest first',
  idOf: (s) => s.id,
  async newList() {
    const account = `acct_${randomUUID()}`;
    return {
      add: (count) => addSubscriptions(account, count),
      page: (request) => subscriptions.page(account, request),
      async foreignCursor() {
        const other = `acct_${randomUUID()}`;
        await addSubscriptions(other, 2);
        return (await subscriptions.page(other, { limit: 1 })).next_cursor as string;
      },
    };
  },
});

paginationSuite<DeliveryView>({
  name: "DeliveryStore.page (a subscription's delivery log)",
  order: 'newest first',
  idOf: (d) => d.id,
  async newList() {
    const account = `acct_${randomUUID()}`;
    const [subscription, other] = (await addSubscriptions(account, 2)) as [string, string];
    return {
      add: (count) => addDeliveries(subscription, count),
      page: (request) => deliveries.page(subscription, request),
      async foreignCursor() {
        await addDeliveries(other, 2);
        return (await deliveries.page(other, { limit: 1 })).next_cursor as string;
      },
    };
  },
});

paginationSuite<StoredEvent>({
  name: 'EventLog.page (the event log, polled)',
  order: 'oldest first',
  polled: true,
  idOf: (e) => e.id,
  async newList() {
    // One facility per list: the filter keeps each test to its own events.
    const facility = randomUUID();
    return {
      add: (count) => addEvents(facility, count),
      page: (request) => events.page({ facilityId: facility }, request),
      async foreignCursor() {
        const account = `acct_${randomUUID()}`;
        await addSubscriptions(account, 2);
        return (await subscriptions.page(account, { limit: 1 })).next_cursor as string;
      },
    };
  },
});
