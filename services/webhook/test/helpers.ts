import { randomBytes, randomUUID } from 'node:crypto';
import {
  type AccountClaims,
  createLogger,
  createPool,
  InternalAuth,
  type Logger,
  migrate,
  type Pool,
  requestTarget,
} from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase } from '@fcd/testing';
import { type ResolvedAddress, type Resolver, SecretBox, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import Fastify, { type FastifyInstance, type InjectOptions } from 'fastify';
import { buildWebhookApp } from '../src/app';
import { type FacilityDirectory, HttpFacilityDirectory } from '../src/clients/facility';

export const INTERNAL_SECRET = 'test-internal-auth-secret-0123456789abcdef';
export const internalAuth = new InternalAuth(INTERNAL_SECRET);
export const SECRET_KEY = randomBytes(32);

/** The fields of a subscription in every answer (the published ones, deactivation and rotation), sorted. */
export const SUBSCRIPTION_KEYS = [
  'created_at',
  'deactivated_at',
  'deactivation_reason',
  'events',
  'facility_ids',
  'filter',
  'id',
  'is_active',
  'max_in_flight',
  'rate_limit_per_second',
  'secret',
  'secret_rotation_ends_at',
  'updated_at',
  'url',
];

const TIER_RANK = { free: 0, pro: 1, enterprise: 2 } as const;
export type Tier = keyof typeof TIER_RANK;

export function newAccount(): string {
  return `acct_${randomUUID()}`;
}

/** The header the gateway sends: the account claims, signed for this one request to the webhook service. */
export function asAccount(accountId: string, request: { method?: string; url: string }, tier: Tier = 'pro'): Record<string, string> {
  return {
    'x-fcd-account': internalAuth.sign(
      { account_id: accountId, tier, tier_rank: TIER_RANK[tier], request_id: `req_${randomUUID()}` },
      { audience: 'webhook', method: request.method ?? 'GET', path: request.url },
    ),
  };
}

/** The method and path (with query) an inject call sends, for `asAccount`. */
export function target(options: InjectOptions): { method: string; url: string } {
  if (typeof options.url !== 'string') throw new Error('inject with a string url');
  return { method: options.method ?? 'GET', url: options.url };
}

const dnsError = (code: string) => Object.assign(new Error(code), { code });

/** A resolver answering from a table; names not in it do not exist. */
function tableResolver(table: Record<string, string[] | Error>): Resolver {
  return async (hostname: string): Promise<ResolvedAddress[]> => {
    const entry = table[hostname];
    if (entry === undefined) throw dnsError('ENOTFOUND');
    if (entry instanceof Error) throw entry;
    return entry.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

export const PUBLIC_HOST = 'hooks.example.com';
export const PRIVATE_HOST = 'private.example.test';
const defaultResolver = tableResolver({
  [PUBLIC_HOST]: ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
  [PRIVATE_HOST]: ['10.1.2.3'],
});

export interface FacilityStub {
  url: string;
  existing: Set<string>;
  /** Claims of every existence request, as the stub verified them. */
  calls: Array<{ ids: string[]; claims: AccountClaims | undefined }>;
  /** Status to answer instead of 200 (e.g. 500), or undefined. */
  failWith: number | undefined;
  close(): Promise<void>;
}

/** A tiny facility service implementing exactly POST /internal/v1/facilities/existing (and /healthz). */
export async function startFacilityStub(existing: Iterable<string>): Promise<FacilityStub> {
  const app: FastifyInstance = Fastify();
  const stub: FacilityStub = {
    url: '',
    existing: new Set([...existing].map((id) => id.toLowerCase())),
    calls: [],
    failWith: undefined,
    close: () => app.close(),
  };
  app.get('/healthz', async () => ({ data: { status: 'ok' } }));
  app.post<{ Body: { ids: string[] } }>('/internal/v1/facilities/existing', async (request, reply) => {
    const claims = internalAuth.verify(request.headers['x-fcd-account'], requestTarget(request, 'facility'));
    stub.calls.push({ ids: request.body.ids, claims });
    if (!claims) return reply.code(401).send({ error: { code: 'UNAUTHORIZED', message: 'no' } });
    if (stub.failWith) return reply.code(stub.failWith).send({ error: { code: 'INTERNAL_ERROR', message: 'boom' } });
    return { data: { existing: request.body.ids.filter((id) => stub.existing.has(id.toLowerCase())) } };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  stub.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return stub;
}

export interface TestContext {
  db: TestDatabase;
  pool: Pool;
  secretBox: SecretBox;
  close(): Promise<void>;
}

export async function createContext(label: string): Promise<TestContext> {
  const db = await createTestDatabase(label);
  const pool = createPool({ connectionString: db.url, applicationName: label, logger: createLogger({ service: 'test', level: 'silent' }) });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  return {
    db,
    pool,
    secretBox: new SecretBox(SECRET_KEY),
    async close() {
      await pool.end();
      await db.drop();
    },
  };
}

export interface AppOptions {
  facilities?: FacilityDirectory;
  facilityUrl?: string;
  allowPrivate?: boolean;
  maxSubscriptions?: number;
  resolver?: Resolver;
  logger?: Logger;
  clock?: { now(): number };
}

export async function testApp(ctx: TestContext, options: AppOptions): Promise<{ app: FastifyInstance; facilities: FacilityDirectory }> {
  const facilities =
    options.facilities ?? new HttpFacilityDirectory({ baseUrl: options.facilityUrl ?? 'http://127.0.0.1:9', internalAuth });
  const app = await buildWebhookApp({
    config: { WEBHOOK_ALLOW_PRIVATE_URLS: options.allowPrivate ?? false, WEBHOOK_MAX_SUBSCRIPTIONS: options.maxSubscriptions ?? 25 },
    logger: options.logger ?? createLogger({ service: 'webhook-test', level: 'silent' }),
    pool: ctx.pool,
    internalAuth,
    secretBox: ctx.secretBox,
    facilities,
    resolver: options.resolver ?? defaultResolver,
    clock: options.clock,
  });
  app.addHook('onClose', async () => facilities.close());
  return { app, facilities };
}

/** `n` violation.new events in the log, created `stepMs` apart from `from`, in one statement (recovery tests). */
export async function insertEvents(pool: Pool, n: number, from: number, stepMs: number): Promise<void> {
  await pool.query(
    `INSERT INTO webhook.events (id, type, created_at, facility_ids, body, recorded_at)
     SELECT x.id, 'violation.new', x.at, '{}'::uuid[],
            json_build_object('id', x.id, 'type', 'violation.new', 'created_at', to_char(x.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                              'data', json_build_object('violation', json_build_object('id', gen_random_uuid())))::text,
            x.at
       FROM (SELECT 'evt_' || gen_random_uuid() AS id, $1::timestamptz + g * $3::float8 * interval '1 millisecond' AS at
               FROM generate_series(0, $2::int - 1) g) x`,
    [new Date(from), n, stepMs],
  );
}
