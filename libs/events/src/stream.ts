import type { Logger } from '@fcd/service-kit';
import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { subjectsOf } from './types';

/** JetStream de-duplicates a republished event (same Nats-Msg-Id) within this window at least. */
export const MIN_DUPLICATE_WINDOW_MS = 120_000;
/**
 * Events are kept 7 days: deliveries and their retries live in Postgres, so the stream only needs
 * to outlast a dispatcher outage; without a limit it grows until the disk fills.
 */
export const EVENTS_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

export interface EventsStreamSettings {
  /** The stream's name (EVENTS_STREAM). */
  stream: string;
  /** Subjects `<prefix>.<type>` (EVENTS_SUBJECT_PREFIX). */
  subjectPrefix: string;
  /** Replicas when the stream is created (default 1); an existing stream is not changed. */
  replicas?: number;
  /** Duplicate window when the stream is created (raised to 2 min at least). */
  duplicateWindowMs?: number;
}

/** The EVENTS stream, as whichever service comes first creates it. */
export function eventsStreamConfig(s: EventsStreamSettings): Partial<StreamConfig> & { name: string } {
  return {
    name: s.stream,
    subjects: [subjectsOf(s.subjectPrefix)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: nanos(EVENTS_MAX_AGE_MS),
    duplicate_window: nanos(Math.max(MIN_DUPLICATE_WINDOW_MS, s.duplicateWindowMs ?? MIN_DUPLICATE_WINDOW_MS)),
    num_replicas: s.replicas ?? 1,
  };
}

/** Only JetStream's "stream not found" (API error 10059); a timeout or a permission error is not. */
export function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** Only JetStream's "consumer not found" (API error 10014). */
export function isConsumerNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound;
}

/** What an existing stream's settings say against ours (warnings only: it is not changed). */
export function streamWarnings(
  existing: { duplicate_window: number; num_replicas?: number },
  s: EventsStreamSettings,
): Array<{ fields: Record<string, unknown>; message: string }> {
  const out: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const windowMs = existing.duplicate_window / 1e6;
  if (windowMs < MIN_DUPLICATE_WINDOW_MS) {
    out.push({ fields: { stream: s.stream, duplicate_window_ms: windowMs }, message: 'stream duplicate window is below 2 minutes' });
  }
  const replicas = s.replicas ?? 1;
  if ((existing.num_replicas ?? 1) !== replicas) {
    out.push({
      fields: { stream: s.stream, num_replicas: existing.num_replicas, configured: replicas },
      message: 'stream replicas differ from NATS_STREAM_REPLICAS (an existing stream is not changed)',
    });
  }
  return out;
}

/**
 * Makes sure the EVENTS stream exists: an existing one is kept as it is (its differences are
 * logged), a missing one (and only "stream not found") is created. Another service or replica
 * creating it at the same moment is fine: the add's failure is ignored when the stream now exists.
 */
export async function ensureEventsStream(
  jsm: Pick<JetStreamManager, 'streams'>,
  s: EventsStreamSettings,
  logger: Pick<Logger, 'info' | 'warn'>,
): Promise<'exists' | 'created'> {
  try {
    const info = await jsm.streams.info(s.stream);
    for (const w of streamWarnings(info.config, s)) logger.warn(w.fields, w.message);
    return 'exists';
  } catch (err) {
    if (!isStreamNotFound(err)) throw err;
  }
  const config = eventsStreamConfig(s);
  try {
    await jsm.streams.add(config);
  } catch (err) {
    // Created meanwhile by the other service or another replica: fine if it now exists.
    await jsm.streams.info(s.stream).catch(() => {
      throw err;
    });
    return 'exists';
  }
  logger.info({ stream: s.stream, subjects: subjectsOf(s.subjectPrefix), replicas: config.num_replicas }, 'stream created');
  return 'created';
}
