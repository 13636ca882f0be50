import { create, toBinary } from '@bufbuild/protobuf';
import { CALL_AUTH_METADATA, createClient, grpc, signCall, type TypedClient } from '@fcd/grpc';
import {
  AuthorizeRequestSchema,
  AuthorizeStreamRequestSchema,
  type AuthorizeStreamResponse,
  GetAccountsRequestSchema,
  GetUsageRequestSchema,
  UsageService,
} from '@fcd/proto';
import {
  createTestDatabase,
  freePort,
  type ServiceProcess,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestDatabase,
  testUrls,
  uniqueName,
} from '@fcd/testing';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The usage service's gRPC API refuses calls without a valid per-call token
 * (UNAUTHENTICATED), batches over its item cap (INVALID_ARGUMENT) and messages
 * over its size cap (RESOURCE_EXHAUSTED); the standard health service stays open.
 */

const MAX_ITEMS = 50;
const MAX_BYTES = 64 * 1024;
const MAX_STREAMS = 3;

let db: TestDatabase;
let usage: ServiceProcess;
let address: string;
const clients: Array<{ close(): void }> = [];

beforeAll(async () => {
  db = await createTestDatabase('usage_grpc_auth');
  const grpcPort = await freePort();
  address = `127.0.0.1:${grpcPort}`;
  usage = await startService('usage', {
    DATABASE_URL: db.url,
    REDIS_URL: testUrls.redis,
    REDIS_KEY_PREFIX: `${uniqueName('grpc_auth')}:`,
    GRPC_PORT: String(grpcPort),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
    GRPC_MAX_BATCH_ITEMS: String(MAX_ITEMS),
    GRPC_MAX_MESSAGE_BYTES: String(MAX_BYTES),
    GRPC_MAX_CONCURRENT_STREAMS: String(MAX_STREAMS),
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await usage?.stop();
  await db?.drop();
});

function client(callSecret?: string): TypedClient<typeof UsageService> {
  const c = createClient(UsageService, address, { defaultDeadlineMs: 5000, ...(callSecret ? { callSecret } : {}) });
  clients.push(c);
  return c;
}

function withToken(token: string | undefined): grpc.Metadata {
  const md = new grpc.Metadata();
  if (token !== undefined) md.set(CALL_AUTH_METADATA, token);
  return md;
}

const code = (p: Promise<unknown>) =>
  p.then(
    () => 'OK',
    (err: grpc.ServiceError) => grpc.status[err.code],
  );

/** Opens an authorization stream, sends one batch and returns the first answer's status or 'DATA'. */
function streamOutcome(c: TypedClient<typeof UsageService>, items: number, metadata?: grpc.Metadata): Promise<string> {
  return new Promise((resolve) => {
    const call = c.bidi('authorizeStream', metadata);
    call.on('data', (_res: AuthorizeStreamResponse) => {
      resolve('DATA');
      call.end();
    });
    call.on('error', (err: grpc.ServiceError) => resolve(grpc.status[err.code] ?? String(err.code)));
    call.write(
      create(AuthorizeStreamRequestSchema, {
        batchId: 1,
        items: Array.from({ length: items }, () => ({ apiKey: 'fcd_x', method: 'GET', path: '/v1' })),
      }),
    );
  });
}

const UNARY_PATHS = {
  authorize: '/usage.v1.UsageService/Authorize',
  getUsage: '/usage.v1.UsageService/GetUsage',
  getAccounts: '/usage.v1.UsageService/GetAccounts',
} as const;

function unaryCalls(c: TypedClient<typeof UsageService>, metadata: (path: string) => grpc.Metadata) {
  return {
    authorize: () =>
      c.unary.authorize(create(AuthorizeRequestSchema, { items: [{ apiKey: 'fcd_x' }] }), { metadata: metadata(UNARY_PATHS.authorize) }),
    getUsage: () => c.unary.getUsage(create(GetUsageRequestSchema, { accountId: 'acct_x' }), { metadata: metadata(UNARY_PATHS.getUsage) }),
    getAccounts: () =>
      c.unary.getAccounts(create(GetAccountsRequestSchema, { accountIds: ['acct_x'] }), { metadata: metadata(UNARY_PATHS.getAccounts) }),
  };
}

describe('gRPC call authentication', () => {
  it('answers every method with a valid token (unknown account: NOT_FOUND / empty answers)', async () => {
    const calls = unaryCalls(client(TEST_USAGE_GRPC_SECRET), () => new grpc.Metadata());
    expect(await code(calls.authorize())).toBe('OK');
    expect(await code(calls.getUsage())).toBe('NOT_FOUND');
    expect(await code(calls.getAccounts())).toBe('OK');
    expect(await streamOutcome(client(TEST_USAGE_GRPC_SECRET), 1)).toBe('DATA');
  });

  const wrongSecret = 'another-secret-of-enough-length-0123456789';
  const tokens: Array<[string, (path: string) => string | undefined]> = [
    ['no token', () => undefined],
    ['garbage', () => 'v1.garbage'],
    ['a token made with another secret', (path) => signCall(wrongSecret, path)],
    ['a token made for another method', () => signCall(TEST_USAGE_GRPC_SECRET, '/usage.v1.UsageService/GetAccounts')],
    ['a token older than 60 s', (path) => signCall(TEST_USAGE_GRPC_SECRET, path, () => Date.now() - 61_000)],
  ];

  it.each(tokens)('refuses the unary methods with UNAUTHENTICATED given %s', async (_label, token) => {
    const calls = unaryCalls(client(), (path) => withToken(token(path)));
    expect(await code(calls.authorize())).toBe('UNAUTHENTICATED');
    expect(await code(calls.getUsage())).toBe('UNAUTHENTICATED');
    if (_label !== 'a token made for another method') expect(await code(calls.getAccounts())).toBe('UNAUTHENTICATED');
  });

  it.each(tokens)('refuses an authorization stream with UNAUTHENTICATED given %s, counting nothing', async (_label, token) => {
    expect(await streamOutcome(client(), 1, withToken(token('/usage.v1.UsageService/AuthorizeStream')))).toBe('UNAUTHENTICATED');
  });

  it('leaves the standard health service open for probes', async () => {
    const Ctor = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'Health');
    const health = new Ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      check(
        req: { service: string },
        opts: { deadline: number },
        cb: (err: grpc.ServiceError | null, res?: { status: string }) => void,
      ): void;
    };
    clients.push(health);
    const status = await new Promise<string>((resolve, reject) =>
      health.check({ service: '' }, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res?.status ?? ''))),
    );
    expect(status).toBe('SERVING');
  });
});

describe('gRPC caps', () => {
  it(`refuses a batch of more than ${MAX_ITEMS} items with INVALID_ARGUMENT, unary and on a stream`, async () => {
    const c = client(TEST_USAGE_GRPC_SECRET);
    const items = (n: number) => Array.from({ length: n }, () => ({ apiKey: 'fcd_x' }));
    expect(await code(c.unary.authorize(create(AuthorizeRequestSchema, { items: items(MAX_ITEMS) })))).toBe('OK');
    expect(await code(c.unary.authorize(create(AuthorizeRequestSchema, { items: items(MAX_ITEMS + 1) })))).toBe('INVALID_ARGUMENT');
    expect(await streamOutcome(c, MAX_ITEMS)).toBe('DATA');
    expect(await streamOutcome(c, MAX_ITEMS + 1)).toBe('INVALID_ARGUMENT');
  });

  it(`refuses a message over ${MAX_BYTES} bytes with RESOURCE_EXHAUSTED, authenticated or not`, async () => {
    const big = create(AuthorizeRequestSchema, { items: [{ apiKey: 'x'.repeat(MAX_BYTES) }] });
    expect(toBinary(AuthorizeRequestSchema, big).length).toBeGreaterThan(MAX_BYTES);
    expect(await code(client(TEST_USAGE_GRPC_SECRET).unary.authorize(big))).toBe('RESOURCE_EXHAUSTED');
    // Without a token the call is refused on its metadata, before its message is read.
    expect(await code(client().unary.authorize(big))).toBe('UNAUTHENTICATED');
  });

  it(`carries at most ${MAX_STREAMS} concurrent calls per connection; the next one waits for a free stream`, async () => {
    const c = client(TEST_USAGE_GRPC_SECRET);
    const open = Array.from({ length: MAX_STREAMS }, () => c.bidi('authorizeStream'));
    for (const s of open) s.on('error', () => undefined);
    // The streams are open once each answered a batch.
    await Promise.all(
      open.map(
        (s, i) =>
          new Promise<void>((resolve) => {
            s.once('data', () => resolve());
            s.write(create(AuthorizeStreamRequestSchema, { batchId: i + 1, items: [{ apiKey: 'fcd_x' }] }));
          }),
      ),
    );
    const call = () => c.unary.getAccounts(create(GetAccountsRequestSchema, { accountIds: [] }), { deadlineMs: 500 });
    expect(await code(call())).toBe('DEADLINE_EXCEEDED');
    await Promise.all(
      open.map(
        (s) =>
          new Promise((resolve) => {
            s.once('status', resolve);
            s.end();
          }),
      ),
    );
    expect(await code(call())).toBe('OK');
  });
});
