import { createLogger } from '@fcd/service-kit';
import { eventually, testUrls, uniqueName } from '@fcd/testing';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { EventConsumer, type EventConsumerSettings } from '../src/store/event-consumer';

/**
 * Two dispatcher replicas on one durable consumer, as in a rolling update: the replica that stops
 * gives back at once what it had pulled but not handled, instead of leaving it to the 30 s ack wait.
 */
const stream = uniqueName('ev_consumer_stop').toUpperCase();
const prefix = stream.toLowerCase();
const consumer = 'stop_replicas';
const logger = createLogger({ service: 'event-consumer-test', level: 'silent' });
const EVENTS = 20;
const body = (i: number) => `event-${String(i).padStart(2, '0')}`;

let nc: NatsConnection;
let js: JetStreamClient;
let jsm: JetStreamManager;
const replicas: EventConsumer[] = [];
/** Releases replica A's held handlers (also at the end, so a failed run still stops). */
let release: () => void = () => undefined;

function replica(batch: number, handle: EventConsumerSettings['handle']): EventConsumer {
  const c = new EventConsumer({ url: testUrls.nats, stream, subjectPrefix: prefix, consumer, deliverPolicy: 'all', batch, logger, handle });
  replicas.push(c);
  c.start();
  return c;
}

async function ready(c: EventConsumer): Promise<void> {
  await eventually(
    () =>
      c
        .check()
        .then(() => true)
        .catch(() => false),
    (ok) => ok,
  );
}

async function consumerState() {
  const info = await jsm.consumers.info(stream, consumer);
  return { pending: info.num_pending, ackPending: info.num_ack_pending, ackFloor: info.ack_floor.stream_seq };
}

beforeAll(async () => {
  nc = await connect({ servers: testUrls.nats });
  js = jetstream(nc);
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  release();
  for (const c of replicas) await c.stop();
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
});

it('a stopping replica naks what it pulled but did not handle; another replica takes it at once', async () => {
  // Replica A handles two events at a time and holds them until released.
  const held = new Promise<void>((r) => {
    release = r;
  });
  const handledByA: string[] = [];
  const a = replica(2, async (x) => {
    handledByA.push(x);
    await held;
    return { ack: true };
  });
  await ready(a);
  for (let i = 0; i < EVENTS; i++) await js.publish(`${prefix}.test`, body(i));

  // A handed two over and pulled two more: the client sends its next pull as its iterator moves
  // on, and the iterator stays on the third event while both handlers are busy; the fourth waits
  // behind it in the client.
  await eventually(consumerState, (s) => s.ackPending === 4);
  expect(await consumerState()).toEqual({ pending: EVENTS - 4, ackPending: 4, ackFloor: 0 });
  expect(handledByA).toEqual([body(0), body(1)]);

  const handledByB: string[] = [];
  replica(10, async (x) => {
    handledByB.push(x);
    return { ack: true };
  });
  // B takes the events nobody pulled; the two A holds unhandled stay with A.
  const unpulled = Array.from({ length: EVENTS - 4 }, (_, i) => body(i + 4));
  await eventually(
    async () => [...handledByB].sort(),
    (v) => v.length >= unpulled.length,
  );
  expect([...handledByB].sort()).toEqual(unpulled);

  const stopping = a.stop();
  release();
  await stopping;

  // A naked its two unhandled events at once before closing: B has them well inside the 30 s ack
  // wait (before the fix they came back only after it, and A handled the third during its stop).
  await eventually(
    async () => handledByB.length,
    (n) => n >= EVENTS - 2,
    5000,
  );
  // Each event handled (and acked) exactly once across A and B: A the two it held, B the rest, none twice.
  expect(handledByA).toEqual([body(0), body(1)]);
  expect(handledByB.slice(unpulled.length).sort()).toEqual([body(2), body(3)]);
  expect([...handledByB].sort()).toEqual(Array.from({ length: EVENTS - 2 }, (_, i) => body(i + 2)));
  // Every ack reached the server: nothing pending, the ack floor at the last event.
  expect(await eventually(consumerState, (s) => s.ackPending === 0)).toEqual({ pending: 0, ackPending: 0, ackFloor: EVENTS });
});
