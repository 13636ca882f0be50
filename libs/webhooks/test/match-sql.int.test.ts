import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createPool, migrate, type Pool, withTransaction } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeliveryStore,
  EventLog,
  eventFacets,
  eventFacilityIds,
  generateSecret,
  type LoggedEvent,
  type MatchableEvent,
  matches,
  SecretBox,
  type Subscription,
  type SubscriptionFilter,
  SubscriptionStore,
  WEBHOOK_SCHEMA,
  webhookMigrations,
} from '../src/index';

/**
 * The one matching rule in SQL (match-sql.ts `subscriptionMatchesSql`) against its TypeScript
 * model (`matches`), over every pair of a grid of subscriptions and events: the fan-out creates a
 * delivery for exactly the pairs `matches` accepts, and the event log's list for a subscription
 * holds exactly its events. Then migration 0013's backfill: the facets it writes for events logged
 * before it are `eventFacets` of their bodies. And the list's plan on an analysed log: in position
 * order, stopping at the page.
 */
let db: TestDatabase;
let pool: Pool;
let subs: SubscriptionStore;
const box = new SecretBox(randomBytes(32));
const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const [F1, F2, F3] = [randomUUID(), randomUUID(), randomUUID()];
const ALL = ['violation.new', 'case.new', 'case.updated', 'facility.status_changed'];

beforeAll(async () => {
  db = await createTestDatabase('webhooks_match_sql');
  pool = createPool({
    connectionString: db.url,
    applicationName: 'webhooks-match-sql-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  // Up to 0012 only: the backfill test writes events as they were logged before 0013.
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations.slice(0, -1));
  subs = new SubscriptionStore(pool, box);
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const facility = (id: string, state: string, epa_region: string, programs: unknown[]) => ({ id, state, epa_region, programs });
const OH = facility(F1, 'OH', '05', ['CAA', 'RCRA']);
const TX = facility(F2, 'TX', '06', ['CWA']);
const PA = facility(F3, 'pa', '03', ['sdwa', 7, 'CAA']);

function envelope(type: string, data: Record<string, unknown>): MatchableEvent {
  return { id: `evt_${randomUUID()}`, type, created_at: new Date(T0).toISOString(), data };
}

/** Events of every type, with and without snapshots, severities and odd values. */
const EVENTS: MatchableEvent[] = [
  envelope('violation.new', { violation: { id: randomUUID(), facility_id: F1, program: 'CAA', severity: 'significant' }, facility: OH }),
  envelope('violation.new', { violation: { id: randomUUID(), facility_id: F2, program: 'cwa', severity: 'Minor' }, facility: TX }),
  envelope('violation.new', { violation: { id: randomUUID(), facility_id: F1, program: 'RCRA' } }),
  envelope('violation.new', { violation: { id: randomUUID(), facility_id: F3, program: 42, severity: 'moderate' }, facility: PA }),
  envelope('case.new', { case: { id: randomUUID(), facility_ids: [F1, F2] }, facilities: [OH, TX] }),
  envelope('case.updated', { case: { id: randomUUID(), facility_ids: [F3] }, facilities: [PA, 'x'], previous_status: 'open' }),
  envelope('case.new', { case: { id: randomUUID(), facility_ids: [] } }),
  envelope('facility.status_changed', { facility: OH, previous_status: 'no_violation' }),
  envelope('facility.status_changed', { facility: { ...TX, state: 'T X' }, previous_status: 'violation' }),
  envelope('facility.status_changed', { facility: PA, previous_status: 'no_violation' }),
];

const FILTERS: Array<SubscriptionFilter | null> = [
  null,
  { states: ['OH'] },
  { states: ['TX', 'PA'] },
  { programs: ['CAA'] },
  { programs: ['CWA', 'SDWA'] },
  { severities: ['significant'] },
  { severities: ['minor', 'moderate'] },
  { epa_regions: ['05', '03'] },
  { states: ['OH'], programs: ['RCRA'] },
  { states: ['OH'], severities: ['minor'] },
  { states: ['TX'], epa_regions: ['06'], programs: ['CWA'], severities: ['minor'] },
];
const SCOPES: Array<{ events: string[]; facility_ids: string[] | null }> = [
  { events: ALL, facility_ids: null },
  { events: ['violation.new'], facility_ids: null },
  { events: ['case.new', 'case.updated'], facility_ids: [F1] },
  { events: ALL, facility_ids: [F2, F3] },
];

async function createGrid(): Promise<Subscription[]> {
  const created: Subscription[] = [];
  for (const filter of FILTERS) {
    for (const scope of SCOPES) {
      const input = { id: `wh_${randomUUID()}`, account_id: 'acct_grid', url: 'https://hooks.example.com/fcd', ...scope, filter };
      created.push(await subs.create({ ...input, secret: generateSecret(), now: T0 - 1000 }, 1000));
    }
  }
  return created;
}

function logged(e: MatchableEvent): LoggedEvent {
  return { id: e.id, type: e.type, body: JSON.stringify(e), facilityIds: eventFacilityIds(e), createdAt: T0 };
}

describe('subscriptionMatchesSql', () => {
  it('backfills, in migration 0013, the facets eventFacets gives the events logged before it', async () => {
    await pool.query(
      `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at)
       SELECT x.id, x.type, $3, '{}', x.body, $3 FROM unnest($1::text[], $2::text[], $4::text[]) AS x(id, type, body)`,
      [EVENTS.map((e) => e.id), EVENTS.map((e) => e.type), new Date(T0), EVENTS.map((e) => JSON.stringify(e))],
    );
    await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
    const { rows } = await pool.query<{
      id: string;
      states: string[];
      programs: string[];
      severities: string[] | null;
      epa_regions: string[];
    }>('SELECT id, states, programs, severities, epa_regions FROM webhook.events');
    const stored = new Map(rows.map(({ id, ...facets }) => [id, facets]));
    for (const e of EVENTS) expect(stored.get(e.id), e.id).toEqual(eventFacets(e));
    await pool.query('TRUNCATE webhook.events');
  });

  it('fans out, and lists per subscription, exactly the pairs matches() accepts', async () => {
    await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
    const grid = await createGrid();
    const events = EVENTS.map(logged);
    await withTransaction(pool, async (client) => {
      await new DeliveryStore(pool, box).fanOutMany(events, T0, client);
      await EventLog.append(client, events, T0);
    });
    const expected = grid.flatMap((s) => EVENTS.filter((e) => matches(s, e)).map((e) => `${s.id} ${e.id}`)).sort();
    // Every filter and scope selects some events and leaves others: the grid tells the rule's parts apart.
    expect(expected.length).toBeGreaterThan(grid.length);
    const { rows } = await pool.query<{ pair: string }>(`SELECT subscription_id || ' ' || event_id AS pair FROM webhook.deliveries`);
    expect(rows.map((r) => r.pair).sort()).toEqual(expected);

    const log = new EventLog(pool);
    const listed: string[] = [];
    for (const s of grid) {
      const page = await log.list({ subscriptionId: s.id }, 100);
      listed.push(...page.items.map((e) => `${s.id} ${e.id}`));
    }
    expect(listed.sort()).toEqual(expected);
  });

  it("pages a subscription's events in log order, stopping at the page, on an analysed log (EXPLAIN)", async () => {
    await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
    await pool.query(
      `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at, states, epa_regions)
       SELECT 'evt_' || gen_random_uuid(), (ARRAY['violation.new', 'case.new', 'facility.status_changed'])[1 + g % 3], $1,
              ARRAY[gen_random_uuid()], '{}', $1, ARRAY[(ARRAY['OH', 'TX', 'CA', 'NY', 'PA'])[1 + g % 5]], ARRAY['05']
         FROM generate_series(1, 40000) g`,
      [new Date(T0)],
    );
    await pool.query('ANALYZE webhook.events');
    const input = { id: `wh_${randomUUID()}`, account_id: 'acct_plan', url: 'https://hooks.example.com/fcd', events: ['violation.new'] };
    const sub = await subs.create({ ...input, facility_ids: null, filter: { states: ['OH'] }, secret: generateSecret(), now: T0 }, 1000);
    // The statement the list runs, as it runs it.
    const statements: Array<[string, unknown[]]> = [];
    const recording = {
      query: (sql: string, params: unknown[]) => {
        statements.push([sql, params]);
        return pool.query(sql, params);
      },
    };
    const page = await new EventLog(recording as unknown as Pool).list({ subscriptionId: sub.id }, 25);
    expect(page.items).toHaveLength(25);
    const [sql, params] = statements[0] ?? ['', []];
    const { rows } = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan, plan).toMatch(/Index Scan using events_pkey on events/);
    expect(plan, plan).not.toMatch(/Sort|Seq Scan on events/);
  });
});
