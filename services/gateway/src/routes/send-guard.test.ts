import { describe, expect, it } from 'vitest';
import { SendGuard } from './send-guard';

// The send timeout over a scripted source and hand-driven timers: a reader that takes nothing for
// the timeout is cut, one that keeps reading never is. Over a real socket: test/export-limits.load.int.test.ts.

/** Timers that fire only when `advance` passes their time. */
function manualTimers() {
  let now = 0;
  let next = 1;
  const due = new Map<number, { at: number; fn: () => void }>();
  const timers = {
    setTimeout: ((fn: () => void, ms: number) => {
      const id = next++;
      due.set(id, { at: now + ms, fn });
      return id;
    }) as unknown as typeof setTimeout,
    clearTimeout: ((id: number) => {
      due.delete(id);
    }) as unknown as typeof clearTimeout,
  };
  return {
    timers,
    pending: () => due.size,
    advance(ms: number) {
      now += ms;
      for (const [id, t] of [...due]) {
        if (t.at > now) continue;
        due.delete(id);
        t.fn();
      }
    },
  };
}

const CHUNK = 20 * 1024; // over the stream's 16 KiB buffer: each push fills it
const chunk = (i: number) => Buffer.alloc(CHUNK, 97 + i);

/** A source of `n` chunks that records how many were taken. */
function source(n: number) {
  const taken = { count: 0, finished: false };
  async function* gen(): AsyncGenerator<Buffer | string, void> {
    try {
      for (let i = 0; i < n; i++) {
        taken.count++;
        yield chunk(i);
      }
    } finally {
      taken.finished = true;
    }
  }
  return { gen: gen(), taken };
}

const settle = () => new Promise((r) => setImmediate(r));

function readAll(stream: SendGuard): Buffer[] {
  const out: Buffer[] = [];
  for (let c = stream.read(); c !== null; c = stream.read()) out.push(c as Buffer);
  return out;
}

describe('SendGuard', () => {
  it('cuts a reader that takes nothing for the timeout: the source stops, what onStall gives is queued, then the end', async () => {
    const clock = manualTimers();
    const { gen, taken } = source(10);
    const guard = new SendGuard(gen, { sendTimeoutMs: 30_000, timers: clock.timers, onStall: () => ['rest\n', 'closing line\n'] });
    guard.read(0); // the reader asks once, then stalls
    await settle();
    expect(taken.count).toBe(1);
    expect(clock.pending()).toBe(1);

    clock.advance(29_999);
    expect(guard.cut).toBe(false);
    clock.advance(1);
    expect(guard.cut).toBe(true);
    await settle();
    expect(taken.finished).toBe(true);

    const ended = new Promise((r) => guard.once('end', r));
    const got = Buffer.concat(readAll(guard)).toString('latin1');
    await ended;
    expect(got).toBe(`${chunk(0).toString('latin1')}rest\nclosing line\n`);
    expect(taken.count).toBe(1);
  });

  it('never cuts a reader that keeps taking chunks, however long the export', async () => {
    const clock = manualTimers();
    const { gen, taken } = source(5);
    let stalled = 0;
    const guard = new SendGuard(gen, {
      sendTimeoutMs: 30_000,
      timers: clock.timers,
      onStall: () => {
        stalled++;
        return [];
      },
    });
    const ended = new Promise((r) => guard.once('end', r));
    const got: Buffer[] = [];
    guard.read(0);
    for (let i = 0; i < 20 && !guard.readableEnded; i++) {
      await settle();
      clock.advance(29_000); // slow, but within the timeout each time
      got.push(...readAll(guard));
    }
    await ended;
    expect(stalled).toBe(0);
    expect(Buffer.concat(got)).toEqual(Buffer.concat([0, 1, 2, 3, 4].map(chunk)));
    expect(taken).toEqual({ count: 5, finished: true });
    expect(clock.pending()).toBe(0);
  });

  it('ends in error at the cut when onStall has nothing to queue (a CSV export)', async () => {
    const clock = manualTimers();
    const { gen, taken } = source(10);
    const guard = new SendGuard(gen, { sendTimeoutMs: 1000, timers: clock.timers, onStall: () => null });
    const failed = new Promise<Error>((r) => guard.once('error', r));
    guard.read(0);
    await settle();
    clock.advance(1000);
    expect((await failed).message).toBe('The reader took nothing within the send timeout.');
    await settle();
    expect(taken.finished).toBe(true);
  });

  it("passes on the source's failure as the body's error", async () => {
    async function* failing(): AsyncGenerator<Buffer | string, void> {
      yield 'a';
      throw new Error('page lost');
    }
    const guard = new SendGuard(failing(), { sendTimeoutMs: 1000, timers: manualTimers().timers, onStall: () => [] });
    const failed = new Promise<Error>((r) => guard.once('error', r));
    guard.resume();
    expect((await failed).message).toBe('page lost');
  });
});
