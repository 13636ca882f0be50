import { create } from '@bufbuild/protobuf';
import { addService, createClient, grpc, unusedMethods } from '@fcd/grpc';
import { AuthorizeResultSchema, type AuthorizeStreamRequest, AuthorizeStreamResponseSchema, Decision, UsageService } from '@fcd/proto';
import { createLogger } from '@fcd/service-kit';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthorizationBatcher } from '../src/auth/batcher';

const logger = createLogger({ service: 'batcher-test', level: 'silent' });
const servers: grpc.Server[] = [];

/**
 * A fake usage service: answers each batch (after `delayMs`) and records batch sizes. The first
 * `drainStreams` streams end cleanly (status OK) on their first batch without answering it, as a
 * draining usage replica does with batches it did not count.
 */
async function fakeUsage(options: { delayMs?: number; port?: number; drainStreams?: number; drainAfterMs?: number } = {}) {
  const batches: number[][] = [];
  const server = new grpc.Server();
  let streams = 0;
  addService(server, UsageService, {
    ...unusedMethods(UsageService),
    authorizeStream(call) {
      const drains = streams++ < (options.drainStreams ?? 0);
      call.on('data', (req: AuthorizeStreamRequest) => {
        batches.push(req.items.map((i) => Number(i.apiKey.slice(4))));
        if (drains) return void setTimeout(() => call.end(), options.drainAfterMs ?? 0);
        setTimeout(() => {
          if (call.writableEnded) return;
          call.write(
            create(AuthorizeStreamResponseSchema, {
              batchId: req.batchId,
              results: req.items.map((i) =>
                create(AuthorizeResultSchema, { decision: Decision.ALLOWED, accountId: `acct_${i.apiKey}`, tier: 'pro', count: 1 }),
              ),
            }),
          );
        }, options.delayMs ?? 0);
      });
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync(`127.0.0.1:${options.port ?? 0}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  servers.push(server);
  return { server, port, batches };
}

afterEach(() => {
  for (const s of servers.splice(0)) s.forceShutdown();
});

describe('AuthorizationBatcher', () => {
  it('coalesces the authorizations of one event-loop turn into one stream message, answering each caller', async () => {
    const usage = await fakeUsage();
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 2000, maxBatch: 1000 });
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => batcher.authorize(`key_${i}`, 'GET', '/v1/x')));
    expect(usage.batches).toEqual([Array.from({ length: 50 }, (_, i) => i)]);
    expect(results.map((r) => r.accountId)).toEqual(Array.from({ length: 50 }, (_, i) => `acct_key_${i}`));
    await batcher.close();
    client.close();
  });

  it('splits a turn larger than maxBatch into several messages', async () => {
    const usage = await fakeUsage();
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 2000, maxBatch: 20 });
    await Promise.all(Array.from({ length: 45 }, (_, i) => batcher.authorize(`key_${i}`, 'GET', '/v1/x')));
    expect(usage.batches.map((b) => b.length)).toEqual([20, 20, 5]);
    await batcher.close();
    client.close();
  });

  it('answers UNAVAILABLE when a batch misses its deadline', async () => {
    const usage = await fakeUsage({ delayMs: 500 });
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 100, maxBatch: 1000 });
    const r = await batcher.authorize('key_1', 'GET', '/v1/x');
    expect(r.decision).toBe(Decision.UNAVAILABLE);
    expect(r.retryAfterSeconds).toBe(1);
    await batcher.close();
    client.close();
  });

  it('fails pending batches when the usage service goes away and reconnects on a later batch', async () => {
    const first = await fakeUsage({ delayMs: 10_000 });
    const client = createClient(UsageService, `127.0.0.1:${first.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 5000, maxBatch: 1000 });
    const pending = batcher.authorize('key_1', 'GET', '/v1/x');
    while (first.batches.length === 0) await new Promise((r) => setImmediate(r));
    first.server.forceShutdown();
    expect((await pending).decision).toBe(Decision.UNAVAILABLE);

    await fakeUsage({ port: first.port });
    let r = await batcher.authorize('key_2', 'GET', '/v1/x');
    const deadline = Date.now() + 10_000;
    while (r.decision !== Decision.ALLOWED && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
      r = await batcher.authorize('key_2', 'GET', '/v1/x');
    }
    expect(r).toMatchObject({ decision: Decision.ALLOWED, accountId: 'acct_key_2' });
    await batcher.close();
    client.close();
  });

  it('sends a batch once more on a new stream when its stream ends cleanly without answering it (a draining replica)', async () => {
    const usage = await fakeUsage({ drainStreams: 1 });
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 2000, maxBatch: 1000 });
    const results = await Promise.all([batcher.authorize('key_1', 'GET', '/v1/x'), batcher.authorize('key_2', 'GET', '/v1/x')]);
    expect(results.map((r) => [r.decision, r.accountId])).toEqual([
      [Decision.ALLOWED, 'acct_key_1'],
      [Decision.ALLOWED, 'acct_key_2'],
    ]);
    expect(usage.batches).toEqual([
      [1, 2],
      [1, 2],
    ]);
    await batcher.close();
    client.close();
  });

  it('sends it once more only: a second clean end without an answer is UNAVAILABLE', async () => {
    const usage = await fakeUsage({ drainStreams: 2 });
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 2000, maxBatch: 1000 });
    const r = await batcher.authorize('key_1', 'GET', '/v1/x');
    expect(r.decision).toBe(Decision.UNAVAILABLE);
    expect(usage.batches).toEqual([[1], [1]]);
    // The next request opens a third stream, which answers.
    expect((await batcher.authorize('key_3', 'GET', '/v1/x')).accountId).toBe('acct_key_3');
    await batcher.close();
    client.close();
  });

  it('a resent batch keeps its original deadline, and resends are reported', async () => {
    // The first stream ends (cleanly, unanswered) after 200 ms; the second answers 150 ms after the
    // resend, past the original 300 ms deadline (a fresh deadline would have let it through).
    const usage = await fakeUsage({ drainStreams: 1, drainAfterMs: 200, delayMs: 150 });
    const client = createClient(UsageService, `127.0.0.1:${usage.port}`);
    const resent: number[] = [];
    const batcher = new AuthorizationBatcher(client, logger, { deadlineMs: 300, maxBatch: 1000, onResend: (n) => resent.push(n) });
    const r = await batcher.authorize('key_1', 'GET', '/v1/x');
    expect(r.decision).toBe(Decision.UNAVAILABLE);
    expect(resent).toEqual([1]);
    expect(usage.batches).toEqual([[1], [1]]);
    await batcher.close();
    client.close();
  });
});
