import { JetStreamApiCodes, JetStreamApiError, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { ensureEventsStream, eventsStreamConfig, isStreamNotFound, streamWarnings } from './stream';

const NS_PER_MS = 1e6;
const apiError = (err_code: number) => new JetStreamApiError({ code: 404, err_code, description: 'x' });

function logger() {
  const lines: Array<[string, unknown, string]> = [];
  return {
    lines,
    info: (fields: unknown, msg?: string) => lines.push(['info', fields, msg ?? '']),
    warn: (fields: unknown, msg?: string) => lines.push(['warn', fields, msg ?? '']),
  };
}

/** A stream API that answers info from `existing` and records adds. */
function fakeJsm(info: Array<() => unknown>, add: () => unknown = () => ({})) {
  const added: unknown[] = [];
  return {
    added,
    streams: {
      info: async () => (info.shift() ?? (() => undefined))(),
      add: async (config: unknown) => {
        added.push(config);
        return add();
      },
    },
  };
}

describe('eventsStreamConfig', () => {
  it('is file storage, limits retention, 7 days, <prefix>.>, a duplicate window of at least 2 min', () => {
    expect(eventsStreamConfig({ stream: 'EVENTS', subjectPrefix: 'events' })).toEqual({
      name: 'EVENTS',
      subjects: ['events.>'],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: 7 * 24 * 3600 * 1000 * NS_PER_MS,
      duplicate_window: 120_000 * NS_PER_MS,
      num_replicas: 1,
    });
    const c = eventsStreamConfig({ stream: 'E', subjectPrefix: 'p', replicas: 3, duplicateWindowMs: 60_000 });
    expect([c.num_replicas, c.duplicate_window]).toEqual([3, 120_000 * NS_PER_MS]);
    expect(eventsStreamConfig({ stream: 'E', subjectPrefix: 'p', duplicateWindowMs: 600_000 }).duplicate_window).toBe(600_000 * NS_PER_MS);
  });
});

describe('isStreamNotFound', () => {
  it('is true only for JetStream API error 10059', () => {
    expect(JetStreamApiCodes.StreamNotFound).toBe(10059);
    expect(isStreamNotFound(apiError(10059))).toBe(true);
    expect(isStreamNotFound(apiError(JetStreamApiCodes.ConsumerNotFound))).toBe(false);
    expect(isStreamNotFound(new Error('TIMEOUT'))).toBe(false);
    expect(isStreamNotFound(undefined)).toBe(false);
  });
});

describe('streamWarnings', () => {
  it('names a short duplicate window and different replicas', () => {
    expect(streamWarnings({ duplicate_window: 120_000 * NS_PER_MS, num_replicas: 1 }, { stream: 'E', subjectPrefix: 'p' })).toEqual([]);
    expect(
      streamWarnings({ duplicate_window: 60_000 * NS_PER_MS, num_replicas: 1 }, { stream: 'E', subjectPrefix: 'p', replicas: 3 }).map(
        (w) => w.message,
      ),
    ).toEqual([
      'stream duplicate window is below 2 minutes',
      'stream replicas differ from NATS_STREAM_REPLICAS (an existing stream is not changed)',
    ]);
  });
});

describe('ensureEventsStream', () => {
  const settings = { stream: 'EVENTS', subjectPrefix: 'events' };
  const existing = () => ({ config: { duplicate_window: 120_000 * NS_PER_MS, num_replicas: 1 } });

  it('keeps an existing stream', async () => {
    const jsm = fakeJsm([existing]);
    expect(await ensureEventsStream(jsm as never, settings, logger())).toBe('exists');
    expect(jsm.added).toEqual([]);
  });

  it('creates the stream when (and only when) it is not found', async () => {
    const jsm = fakeJsm([
      () => {
        throw apiError(10059);
      },
    ]);
    const log = logger();
    expect(await ensureEventsStream(jsm as never, settings, log)).toBe('created');
    expect(jsm.added).toEqual([eventsStreamConfig(settings)]);
    expect(log.lines).toEqual([['info', { stream: 'EVENTS', subjects: 'events.>', replicas: 1 }, 'stream created']]);
  });

  it('throws any other error without creating anything', async () => {
    const timeout = new Error('TIMEOUT');
    const jsm = fakeJsm([
      () => {
        throw timeout;
      },
    ]);
    await expect(ensureEventsStream(jsm as never, settings, logger())).rejects.toBe(timeout);
    expect(jsm.added).toEqual([]);
  });

  it('a create that lost the race to another creator is fine; one that failed for good throws', async () => {
    const notFound = () => {
      throw apiError(10059);
    };
    const lost = fakeJsm([notFound, existing], () => {
      throw apiError(10058);
    });
    expect(await ensureEventsStream(lost as never, settings, logger())).toBe('exists');
    const refused = new Error('insufficient resources');
    const failed = fakeJsm([notFound, notFound], () => {
      throw refused;
    });
    await expect(ensureEventsStream(failed as never, settings, logger())).rejects.toBe(refused);
  });
});
