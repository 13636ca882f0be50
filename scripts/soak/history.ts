import { createWriteStream, type WriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';

/**
 * The soak's history: every operation of the workload, every fault of the nemesis, every request
 * a receiver got and every process event, one JSON object per line, with the harness's clock
 * (ms since the epoch; all processes run on this machine, so the services' timestamps in the
 * databases are on the same clock). The checker (checker.ts) reads it with the databases'
 * snapshot (Snapshot) at the end. docs/soak.md describes each record.
 */

/** What the checker needs to know of the run's configuration. */
export interface SoakMeta {
  k: 'meta';
  seed: number;
  minutes: number;
  redis: 'single' | 'cluster';
  startedAt: number;
  /** The dispatcher's WEBHOOK_RETRY_SCHEDULE in ms, and its jitter (0.2 = ±20 %). */
  retryScheduleMs: number[];
  retryJitter: number;
  /** How long after a deactivation or deletion commits a send already under way may still arrive (docs/dispatcher.md). */
  inFlightBoundMs: number;
  /** After a fault ends, how long 503s may go on (docs/operations.md, the pool and breaker times). */
  recoveryMs: number;
  /** Free tier: counted requests per account and UTC day. */
  freeDailyLimit: number;
  /** Each service's memory limit in the chart (bytes). */
  rssLimits: Record<string, number>;
}

export type FaultKind =
  | 'kill'
  | 'pause'
  | 'postgres-stop'
  | 'postgres-terminate'
  | 'redis-kill'
  | 'redis-pause'
  | 'nats-kill'
  | 'link-latency'
  | 'link-blackhole';

/** One fault, written when it ends (end = the heal). target: a replica (`gateway-1`), a backend or a link (`postgres`). */
export interface FaultRecord {
  k: 'fault';
  id: number;
  kind: FaultKind;
  target: string;
  start: number;
  end: number;
}

/** One HTTP request of the workload. status null: no answer (connection error or client timeout). */
export interface RequestRecord {
  k: 'req';
  /** gateway: a metered API call with an account's key; ingest: the facility service's ingestion API. */
  via: 'gateway' | 'ingest';
  t0: number;
  t1: number;
  method: string;
  path: string;
  status: number | null;
  error?: string;
  retryAfter?: string | null;
  code?: string;
  /** A 4xx or 5xx answer's error envelope (shortened). */
  message?: string;
  account?: string;
  tier?: 'free' | 'pro';
}

/** A subscription's lifecycle operation, sent at t0 and answered at t1 (status). Only answered 2xx operations took effect for sure. */
export interface SubscriptionRecord {
  k: 'sub';
  op: 'create' | 'patch' | 'deactivate' | 'reactivate' | 'delete' | 'rotate' | 'recover';
  t0: number;
  t1: number;
  status: number | null;
  /** The subscription's id (for create: the one the answer gave; absent when it failed). */
  sub?: string;
  account?: string;
  /** create / patch: the event types and the states filter (null: no filter) now in force. */
  events?: string[];
  states?: string[] | null;
  /** create / rotate: the new secret (`whsec_…`); rotate: how long the previous one stays valid (0: none). */
  secret?: string;
  overlapMs?: number;
  /** recover: from when. */
  since?: number;
}

/** One request a receiver got (a delivery attempt as it arrived), and what the receiver answered. */
export interface ReceiptRecord {
  k: 'recv';
  t: number;
  sub: string;
  webhookId: string;
  timestamp: string;
  signature: string;
  /** The event id of the body (its `id`). */
  event: string;
  body: string;
  answer: number | 'timeout';
}

/** A process's life: started, exited (code/signal), or a nemesis signal. */
export interface ProcessRecord {
  k: 'proc';
  t: number;
  name: string;
  event: 'start' | 'exit' | 'signal';
  pid?: number;
  code?: number | null;
  signal?: string | null;
}

/** At the end: each replica alive or not, and its peak RSS over the run against its chart limit. */
export interface EndRecord {
  k: 'end';
  t: number;
  /** crashes: exits no fault caused (the replica was restarted after each). */
  processes: Array<{ name: string; alive: boolean; peakRssBytes: number; limitBytes: number; crashes?: number }>;
  /** Whether the system caught up after the workload stopped: no delivery pending, no event unpublished or not fanned out. */
  drain?: { drained: boolean; pending: number; unsent: number };
}

export type HistoryRecord = SoakMeta | FaultRecord | RequestRecord | SubscriptionRecord | ReceiptRecord | ProcessRecord | EndRecord;

/** What the checker reads from the databases after the run (snapshot.ts collects it). */
export interface Snapshot {
  /** usage.daily_usage: counted requests per account and UTC day (YYYY-MM-DD). */
  usage: Array<{ account: string; day: string; count: number }>;
  /** Every committed event (the facility outbox): id `evt_…`, type, commit time and the states it carries. */
  events: Array<{ id: string; type: string; createdAt: number; states: string[] }>;
  /** Subscriptions that still exist, with the dispatcher's own deactivations. */
  subscriptions: Array<{ id: string; active: boolean; deactivatedAt: number | null; reason: string | null }>;
  /** Every delivery not `succeeded`, with its attempts' start times and outcomes. */
  unfinished: Array<{
    sub: string;
    event: string;
    status: 'pending' | 'failed' | 'cancelled';
    attempts: Array<{ n: number; startedAt: number; outcome: string }>;
  }>;
}

/** Appends records to a JSON-lines file. */
export class HistoryWriter {
  private readonly out: WriteStream;
  constructor(readonly path: string) {
    this.out = createWriteStream(path, { flags: 'w' });
  }
  write(record: HistoryRecord): void {
    this.out.write(`${JSON.stringify(record)}\n`);
  }
  async close(): Promise<void> {
    await new Promise<void>((res, rej) => this.out.end((err?: Error | null) => (err ? rej(err) : res())));
  }
}

export async function readHistory(path: string): Promise<HistoryRecord[]> {
  const text = await readFile(path, 'utf8');
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as HistoryRecord);
}
