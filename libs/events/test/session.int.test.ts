import { mkdirSync, rmSync } from 'node:fs';
import { eventually, PrivateNats, testUrls, uniqueName } from '@fcd/testing';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamSession } from '../src/session';

/** The messages a session logs, in order. */
function recorder() {
  const lines: string[] = [];
  const log = (a: unknown, b?: string) => lines.push(typeof a === 'string' ? a : (b ?? ''));
  return { lines, info: log, warn: log };
}

function settings(url: string, stream: string, logger: ReturnType<typeof recorder>) {
  return { url, name: 'events-session-test', stream, subjectPrefix: stream.toLowerCase(), logger, timeoutMs: 2000 };
}

async function streamExists(jsm: JetStreamManager, stream: string): Promise<boolean> {
  return jsm.streams.info(stream).then(
    () => true,
    () => false,
  );
}

describe('JetStreamSession on the shared NATS', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const streams: string[] = [];

  beforeAll(async () => {
    nc = await connect({ servers: testUrls.nats });
    jsm = await jetstreamManager(nc);
  });

  afterAll(async () => {
    for (const s of streams) await jsm.streams.delete(s).catch(() => undefined);
    await nc.close();
  });

  it('opens, ensures the stream once per connection (again when told it may be lost), answers check, and closes', async () => {
    const stream = uniqueName('ev_session').toUpperCase();
    streams.push(stream);
    const log = recorder();
    const session = new JetStreamSession(settings(testUrls.nats, stream, log));
    expect(session.connected).toBe(false);
    await expect(session.check()).rejects.toThrow('not connected');
    await expect(session.ensureStream()).rejects.toThrow('nats not connected');

    expect(await session.open()).toBe(true);
    expect(await session.open()).toBe(true);
    expect([session.connected, session.isOpen, session.js !== undefined, session.jsm !== undefined]).toEqual([true, true, true, true]);
    await session.check();

    await session.ensureStream();
    expect(await streamExists(jsm, stream)).toBe(true);
    // Deleted behind its back: the session does not look again until told the stream may be lost.
    await jsm.streams.delete(stream);
    await session.ensureStream();
    expect(await streamExists(jsm, stream)).toBe(false);
    session.streamMayBeLost();
    await session.ensureStream();
    expect(await streamExists(jsm, stream)).toBe(true);
    expect(log.lines).toEqual(['nats connected', 'stream created', 'stream created']);

    await session.close();
    expect([session.connected, session.isOpen]).toEqual([false, false]);
    await expect(session.check()).rejects.toThrow('not connected');
    expect(await session.open()).toBe(false);
  });
});

describe('JetStreamSession through a NATS outage', () => {
  let nats: PrivateNats;

  beforeAll(async () => {
    nats = await PrivateNats.create();
  });

  afterAll(async () => {
    await nats.destroy();
  });

  it('started while NATS is down, connects when it comes; after a restart that lost the stream, ensures it again', async () => {
    const stream = uniqueName('ev_outage').toUpperCase();
    const log = recorder();
    const session = new JetStreamSession(settings(nats.url, stream, log));
    const opened = session.open();
    await eventually(
      async () => log.lines.length,
      (n) => n === 1,
    );
    expect(log.lines).toEqual(['nats unavailable; retrying in the background']);
    expect(session.connected).toBe(false);
    await expect(session.check()).rejects.toThrow('not connected');

    await nats.start();
    expect(await opened).toBe(true);
    await session.ensureStream();
    await session.check();

    // Restarted without its store: the stream is gone, and the reconnected session creates it again.
    await nats.stop();
    await eventually(
      async () => session.connected,
      (up) => !up,
    );
    rmSync(nats.dir, { recursive: true, force: true });
    mkdirSync(nats.dir);
    await nats.start();
    await eventually(
      async () => session.connected,
      (up) => up,
    );
    await session.ensureStream();
    const jsm = session.jsm as JetStreamManager;
    expect((await jsm.streams.info(stream)).config.name).toBe(stream);
    expect(log.lines).toEqual([
      'nats unavailable; retrying in the background',
      'nats connected',
      'stream created',
      'nats disconnected',
      'nats reconnected',
      'stream created',
    ]);
    await session.close();
  });

  it('close() while still connecting ends the attempt: open() answers false', async () => {
    await nats.stop();
    const session = new JetStreamSession(settings(nats.url, uniqueName('ev_closed').toUpperCase(), recorder()));
    const opened = session.open();
    await session.close();
    expect(await opened).toBe(false);
    expect(session.connected).toBe(false);
  });
});
