import { paginationSuite } from '@fcd/testing/pagination-suite';
import { generateSecret, type Subscription } from '@fcd/webhooks';
import { InMemorySubscriptions } from './fakes';

/** The in-memory subscriptions keep the stores' pagination contract: the same suite as the SQL stores run. */

let clock = Date.parse('2026-11-22T08:00:00.000Z');
let n = 0;
const tick = () => {
  clock += 1000;
  return clock;
};
const store = new InMemorySubscriptions();

async function add(accountId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `wh_00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
    await store.create(
      {
        id,
        account_id: accountId,
        url: 'https://h.example/',
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

paginationSuite<Subscription>({
  name: 'InMemorySubscriptions.page',
  order: 'newest first',
  idOf: (s) => s.id,
  async newList() {
    const account = `acct_${++n}`;
    return {
      add: (count) => add(account, count),
      page: (request) => store.page(account, request),
      async foreignCursor() {
        const other = `acct_${++n}`;
        await add(other, 2);
        return (await store.page(other, { limit: 1 })).next_cursor as string;
      },
    };
  },
});
