import { createServer, type Server, type Socket } from 'node:net';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from './logger';
import { checkout, createPool, withTransaction } from './pg';

/**
 * A backend terminated right after its startup (pg_terminate_backend on every
 * connection, as in a failover): its ReadyForQuery and the FATAL
 * ErrorResponse that follows reach the client in one socket read. pg parses
 * both in one go, so the pool hands the new client over (inside the parsing of
 * ReadyForQuery) and the client emits 'error' for the FATAL before any promise
 * continuation runs. The checkout must be listening by then, or the error is
 * an uncaught exception that stops the process (exit 70).
 */

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const AUTHENTICATION_OK = message('R', Buffer.from([0, 0, 0, 0]));
const READY_FOR_QUERY = message('Z', Buffer.from('I', 'latin1'));
const TERMINATED = message(
  'E',
  Buffer.concat([
    ...[
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', '57P01'],
      ['M', 'terminating connection due to administrator command'],
    ].map(([field, value]) => Buffer.from(`${field}${value}\0`, 'latin1')),
    Buffer.from([0]),
  ]),
);

/** A server that accepts each startup, then ends the session at once: ReadyForQuery and FATAL 57P01 in one write. */
async function terminatingServer(): Promise<{ server: Server; url: string }> {
  const server = createServer((socket: Socket) => {
    socket.on('error', () => undefined);
    // The first packet is the StartupMessage (no SSLRequest: the pool does not ask for TLS).
    socket.once('data', () => {
      socket.write(Buffer.concat([AUTHENTICATION_OK, READY_FOR_QUERY, TERMINATED]));
      socket.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { server, url: `postgres://postgres@127.0.0.1:${port}/db` };
}

async function errors(registry: Registry): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('fcd_postgres_errors_total')?.get();
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.kind), v.value]));
}

const logger = createLogger({ service: 'pg-test', level: 'silent' });
let cleanup: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
  cleanup = [];
});

/** Runs `fn` and returns what reached process 'uncaughtException' meanwhile (and a tick after). */
async function uncaughtDuring(fn: () => Promise<void>): Promise<unknown[]> {
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  process.on('uncaughtException', onUncaught);
  try {
    await fn();
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    process.off('uncaughtException', onUncaught);
  }
  return uncaught;
}

describe('checkout and withTransaction: a backend terminated right after its startup', () => {
  it("checkout: the FATAL reaches the checkout's listener; the client is broken, counted and destroyed on release", async () => {
    const { server, url } = await terminatingServer();
    const registry = new Registry();
    const pool = createPool({ connectionString: url, applicationName: 't', logger, registry });
    cleanup.push(
      () => pool.end(),
      () => new Promise((r) => server.close(r)),
    );
    let outcome: string | undefined;
    const uncaught = await uncaughtDuring(async () => {
      const held = await checkout(pool);
      outcome = await held.client.query('SELECT 1').then(
        () => 'answered',
        (err: Error) => err.message,
      );
      held.release();
    });
    expect(uncaught).toEqual([]);
    expect(outcome).toMatch(/not queryable|terminat/i);
    expect((await errors(registry)).checked_out_client).toBeGreaterThanOrEqual(1);
    // Destroyed, not returned to the pool as idle.
    expect(pool.idleCount).toBe(0);
  });

  it('withTransaction: rejects with an unavailable error (a retry or 503), never an uncaught exception', async () => {
    const { server, url } = await terminatingServer();
    const pool = createPool({ connectionString: url, applicationName: 't', logger });
    cleanup.push(
      () => pool.end(),
      () => new Promise((r) => server.close(r)),
    );
    let ran = false;
    let outcome: string | undefined;
    const uncaught = await uncaughtDuring(async () => {
      outcome = await withTransaction(pool, async () => {
        ran = true;
      }).then(
        () => 'committed',
        (err: Error) => err.message,
      );
    });
    expect(uncaught).toEqual([]);
    expect(ran).toBe(false);
    expect(outcome).toMatch(/not queryable|terminat/i);
  });
});
