import { Backoff, WakeableSleep } from '@fcd/service-kit';
import type { ConnectionOptions, NatsConnection } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { connectionOptions, connectWithBackoff } from './connect';

function logger() {
  const lines: string[] = [];
  return { lines, info: (msg: unknown) => lines.push(String(msg)), warn: (_f: unknown, msg?: string) => lines.push(msg ?? '') };
}

/** A sleep that records the delays and returns at once. */
function recordingSleep() {
  const delays: number[] = [];
  const sleep = new WakeableSleep((ms, fire) => {
    delays.push(ms);
    queueMicrotask(fire);
    return () => undefined;
  });
  return { delays, sleep };
}

describe('connectionOptions', () => {
  it('reconnects forever through every server of the list', () => {
    expect(connectionOptions({ url: 'nats://a:4222,nats://b:4222', name: 'x', pingIntervalMs: 5000 })).toEqual({
      servers: ['nats://a:4222', 'nats://b:4222'],
      name: 'x',
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      timeout: 2000,
      pingInterval: 5000,
    });
  });
});

describe('connectWithBackoff', () => {
  it('retries after capped backoff delays, warns once, and returns the connection', async () => {
    const nc = { close: async () => undefined } as unknown as NatsConnection;
    let tries = 0;
    const { delays, sleep } = recordingSleep();
    const log = logger();
    const got = await connectWithBackoff({
      url: 'nats://x:4222',
      name: 'test',
      logger: log,
      isClosing: () => false,
      sleep,
      backoff: new Backoff({ initialMs: 200, maxMs: 1000 }),
      connect: async (_o: ConnectionOptions) => {
        if (++tries < 5) throw new Error('ECONNREFUSED');
        return nc;
      },
    });
    expect(got).toBe(nc);
    expect(delays).toEqual([200, 400, 800, 1000]);
    expect(log.lines).toEqual(['nats unavailable; retrying in the background', 'nats connected']);
  });

  it('gives up when the caller closes, closing a connection made meanwhile', async () => {
    let closing = false;
    let closed = 0;
    const nc = {
      close: async () => {
        closed++;
      },
    } as unknown as NatsConnection;
    const got = await connectWithBackoff({
      url: 'nats://x:4222',
      name: 'test',
      logger: logger(),
      isClosing: () => closing,
      connect: async () => {
        closing = true;
        return nc;
      },
    });
    expect(got).toBeUndefined();
    expect(closed).toBe(1);
  });
});
