import { create } from '@bufbuild/protobuf';
import { addService, grpc, unusedMethods } from '@fcd/grpc';
import {
  AuthorizeResultSchema,
  type AuthorizeStreamRequest,
  AuthorizeStreamResponseSchema,
  Decision,
  GetUsageResponseSchema,
  UsageService,
} from '@fcd/proto';
import { eventually, gatewayEnv, type ServiceProcess, startService } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A usage report without its billing period. The real usage service always sends one, so this runs
 * the real gateway process against a fake usage service (a broken version of it, say) that leaves
 * billing_period out: the gateway answers 503 SERVICE_UNAVAILABLE (a broken dependency), never a 200
 * with made-up zeros that a client could take for its bill.
 */
const RESETS_AT = '2030-01-02T00:00:00.000Z';
const EMBEDDED = 'fcd_embeddedReportAAAAAAAAAAAAAAAAAAA'; // the report travels with the authorization
const UNARY = 'fcd_unaryReportBBBBBBBBBBBBBBBBBBBBBBBB'; // no report with it: the gateway asks GetUsage
const usageWithoutBilling = () =>
  create(GetUsageResponseSchema, { tier: 'pro', dailyLimit: 25_000, today: { requestCount: 7, remaining: 24_993, resetsAt: RESETS_AT } });

let server: grpc.Server;
let gateway: ServiceProcess;
let gatewayUrl: string;
const getUsageCalls: string[] = [];

beforeAll(async () => {
  server = new grpc.Server();
  addService(server, UsageService, {
    ...unusedMethods(UsageService),
    authorizeStream(call) {
      call.on('data', (req: AuthorizeStreamRequest) => {
        call.write(
          create(AuthorizeStreamResponseSchema, {
            batchId: req.batchId,
            results: req.items.map((item) =>
              create(AuthorizeResultSchema, {
                decision: Decision.ALLOWED,
                accountId: `acct_${item.apiKey.slice(4, 12)}`,
                tier: 'pro',
                tierRank: 1,
                dailyLimit: 25_000,
                count: 7,
                remaining: 24_993,
                resetsAt: RESETS_AT,
                usage: item.apiKey === EMBEDDED && item.includeUsage ? usageWithoutBilling() : undefined,
              }),
            ),
          }),
        );
      });
      call.on('end', () => call.end());
    },
    async getUsage(request) {
      getUsageCalls.push(request.accountId);
      return usageWithoutBilling();
    },
  });
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
  );
  gateway = await startService('gateway', await gatewayEnv(port));
  gatewayUrl = `http://127.0.0.1:${(await gateway.waitForLog((l) => l.msg === 'ready')).port as number}`;
});

afterAll(async () => {
  await gateway?.stop();
  server?.forceShutdown();
});

describe('GET /v1/account/usage when the usage report has no billing period', () => {
  it.each([
    ['embedded in the authorization', EMBEDDED, []],
    ['fetched with GetUsage', UNARY, ['acct_unaryRep']],
  ])('answers 503 SERVICE_UNAVAILABLE with Retry-After and the rate-limit headers (report %s)', async (_, apiKey, expectedGetUsage) => {
    getUsageCalls.length = 0;
    const incomplete = (l: { msg?: unknown; has_billing_period?: unknown }) =>
      l.msg === 'usage report incomplete' && l.has_billing_period === false;
    const loggedBefore = gateway.logs().filter(incomplete).length;
    const res = await fetch(`${gatewayUrl}/v1/account/usage`, { headers: { 'x-api-key': apiKey } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('x-ratelimit-limit')).toBe('25000');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('24993');
    const body = (await res.json()) as { error: { code: string; details: unknown } };
    expect(body.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(body.error.details).toEqual({ dependency: 'usage' });
    expect(getUsageCalls).toEqual(expectedGetUsage);
    // the log line may be written just after the response: wait for this request's own line
    const logged = await eventually(
      async () => gateway.logs().filter(incomplete).length,
      (n) => n > loggedBefore,
    );
    expect(logged).toBe(loggedBefore + 1);
  });
});
