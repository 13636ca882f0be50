import { create } from '@bufbuild/protobuf';
import { GetUsageRequestSchema, GetUsageResponseSchema, UsageService } from '@fcd/proto';
import { AppError } from '@fcd/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addService, createClient, fromGrpcError, grpc, serviceDefinition, unusedMethods } from '../src/index';

let server: grpc.Server;
let port: number;
const calls: Array<{ method: string; code: grpc.status }> = [];

beforeAll(async () => {
  server = new grpc.Server();
  addService(
    server,
    UsageService,
    {
      ...unusedMethods(UsageService),
      authorizeStream(call) {
        call.end();
      },
      async authorize() {
        throw new Error('boom: a bug');
      },
      async getUsage(req) {
        if (req.accountId === 'missing') throw new AppError('NOT_FOUND', 'No such account.');
        if (req.accountId === 'bad')
          throw new AppError('VALIDATION_ERROR', 'Invalid from: é.', { details: { fields: [{ field: 'from', message: 'é' }] } });
        if (req.accountId === 'down') throw new AppError('SERVICE_UNAVAILABLE', 'down', { details: { host: 'db.internal' } });
        return create(GetUsageResponseSchema, { tier: 'pro', dailyLimit: 25_000, billingPeriod: { totalRequests: 7n } });
      },
    },
    { onUnary: (method, code) => calls.push({ method, code }) },
  );
  port = await new Promise((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
});

afterAll(() => server.forceShutdown());

describe('protobuf-es ↔ grpc-js adapter', () => {
  it('derives method paths and streaming flags from the generated descriptor', () => {
    const def = serviceDefinition(UsageService);
    expect(Object.fromEntries(Object.entries(def).map(([k, m]) => [k, [m.path, m.requestStream, m.responseStream]]))).toEqual({
      authorizeStream: ['/usage.v1.UsageService/AuthorizeStream', true, true],
      authorize: ['/usage.v1.UsageService/Authorize', false, false],
      getUsage: ['/usage.v1.UsageService/GetUsage', false, false],
      getAccounts: ['/usage.v1.UsageService/GetAccounts', false, false],
      listKeys: ['/usage.v1.UsageService/ListKeys', false, false],
      createKey: ['/usage.v1.UsageService/CreateKey', false, false],
      renameKey: ['/usage.v1.UsageService/RenameKey', false, false],
      revokeKey: ['/usage.v1.UsageService/RevokeKey', false, false],
      rollKey: ['/usage.v1.UsageService/RollKey', false, false],
      listAuditLog: ['/usage.v1.UsageService/ListAuditLog', false, false],
      getDailyUsage: ['/usage.v1.UsageService/GetDailyUsage', false, false],
    });
  });

  it('round-trips protobuf-es messages, 64-bit fields included', async () => {
    const client = createClient(UsageService, `127.0.0.1:${port}`);
    const res = await client.unary.getUsage(create(GetUsageRequestSchema, { accountId: 'a1' }));
    expect([res.tier, res.dailyLimit, res.billingPeriod?.totalRequests]).toEqual(['pro', 25_000, 7n]);
    client.close();
  });

  it('carries an AppError code across the wire and maps a bug to INTERNAL without its message', async () => {
    const client = createClient(UsageService, `127.0.0.1:${port}`);
    const notFound = await client.unary.getUsage(create(GetUsageRequestSchema, { accountId: 'missing' })).catch((e: unknown) => e);
    expect(fromGrpcError(notFound, 'usage')).toMatchObject({ code: 'NOT_FOUND', message: 'No such account.' });
    const bug = (await client.unary
      .authorize({ $typeName: 'usage.v1.AuthorizeRequest', items: [], countByUnixMs: 0n })
      .catch((e: unknown) => e)) as grpc.ServiceError;
    expect(bug.code).toBe(grpc.status.INTERNAL);
    expect(bug.details).toBe('internal error');
    expect(calls).toContainEqual({ method: 'GetUsage', code: grpc.status.NOT_FOUND });
    expect(calls).toContainEqual({ method: 'Authorize', code: grpc.status.INTERNAL });
    client.close();
  });

  it("carries an error's details across the wire (any text), but never those of a 503 or a bug", async () => {
    const client = createClient(UsageService, `127.0.0.1:${port}`);
    const bad = await client.unary.getUsage(create(GetUsageRequestSchema, { accountId: 'bad' })).catch((e: unknown) => e);
    const mapped = fromGrpcError(bad, 'usage');
    expect([mapped.code, mapped.message, mapped.details]).toEqual([
      'VALIDATION_ERROR',
      'Invalid from: é.',
      { fields: [{ field: 'from', message: 'é' }] },
    ]);
    const down = (await client.unary
      .getUsage(create(GetUsageRequestSchema, { accountId: 'down' }))
      .catch((e: unknown) => e)) as grpc.ServiceError;
    expect(down.metadata.get('fcd-error-details-bin')).toEqual([]);
    expect(fromGrpcError(down, 'usage').details).toEqual({ dependency: 'usage' });
    client.close();
  });

  it('maps an unreachable server to SERVICE_UNAVAILABLE after the deadline', async () => {
    const client = createClient(UsageService, '127.0.0.1:1', { defaultDeadlineMs: 300 });
    const err = await client.unary.getUsage(create(GetUsageRequestSchema, { accountId: 'a1' })).catch((e: unknown) => e);
    expect(fromGrpcError(err, 'usage')).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      retryAfterSeconds: 1,
      details: { dependency: 'usage' },
    });
    client.close();
  });
});
