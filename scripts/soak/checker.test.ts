import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { check, type PromiseName, type Report } from './checker';
import type { HistoryRecord, ReceiptRecord, RequestRecord, Snapshot, SoakMeta, SubscriptionRecord } from './history';
import { renderSummary } from './summary';

/**
 * The checker on a small clean run (every promise held, exact counts), then the same run with one
 * violation planted per test: each promise is shown able to fail, alone, naming what was planted.
 * Times are fixed numbers: no clock, no sleep.
 */
const T0 = Date.UTC(2026, 10, 28, 10, 0, 0);
const DAY = '2026-11-28';
const BOUND = 26_000;
const secret = (name: string) => `whsec_${Buffer.from(`soak checker secret ${name}`).toString('base64')}`;
const SECRET_A1 = secret('a1');
const SECRET_A2 = secret('a2');
const SECRET_B = secret('b');
const SECRET_C = secret('c');

const meta: SoakMeta = {
  k: 'meta',
  seed: 7,
  minutes: 10,
  redis: 'cluster',
  startedAt: T0,
  retryScheduleMs: [1_000, 2_000, 4_000, 8_000, 16_000],
  retryJitter: 0.2,
  inFlightBoundMs: BOUND,
  recoveryMs: 30_000,
  freeDailyLimit: 100,
  rssLimits: { gateway: 512 * 1024 ** 2 },
};

type Ev = Snapshot['events'][number];
const ev = (id: string, at: number, type: string, states: string[]): Ev => ({ id, type, createdAt: T0 + at, states });
const EVENTS = {
  e1: ev('evt_1', 5_000, 'violation.new', ['OH']),
  e2: ev('evt_2', 50_000, 'violation.new', ['TX']),
  e3: ev('evt_3', 150_000, 'facility.status_changed', ['CA']),
  e4: ev('evt_4', 200_000, 'violation.new', ['OH']),
  e5: ev('evt_5', 320_000, 'violation.new', ['TX']),
};

function gw(account: string, tier: 'free' | 'pro', at: number, status: number | null, extra: Partial<RequestRecord> = {}): RequestRecord {
  return {
    k: 'req',
    via: 'gateway',
    t0: T0 + at,
    t1: T0 + at + 20,
    method: 'GET',
    path: '/v1/facilities',
    status,
    account,
    tier,
    ...extra,
  };
}

function ingest(at: number, status: number | null, retryAfter: string | null = null): RequestRecord {
  return { k: 'req', via: 'ingest', t0: T0 + at, t1: T0 + at + 30, method: 'POST', path: '/internal/v1/ingest', status, retryAfter };
}

function op(
  o: SubscriptionRecord['op'],
  sub: string,
  at: number,
  status: number | null,
  extra: Partial<SubscriptionRecord> = {},
): SubscriptionRecord {
  return { k: 'sub', op: o, sub, t0: T0 + at, t1: T0 + at + 100, status, ...extra };
}

/** A receipt as the receiver records it, signed with the real standardwebhooks by each secret given (newest first). */
function recv(sub: string, e: Ev, at: number, secrets: string[], answer: number | 'timeout' = 204, webhookId = e.id): ReceiptRecord {
  const t = T0 + at;
  const body = JSON.stringify({ id: e.id, type: e.type, created_at: new Date(e.createdAt).toISOString(), data: {} });
  const timestamp = String(Math.floor(t / 1000));
  const signature = secrets.map((s) => new Webhook(s).sign(webhookId, new Date(Number(timestamp) * 1000), body)).join(' ');
  return { k: 'recv', t, sub, webhookId, timestamp, signature, event: e.id, body, answer };
}

/** The failed delivery of evt_2 to sub_b: six attempts on the schedule, each received and answered 500. */
const FAILED_STARTS = [50_500, 51_600, 53_700, 57_800, 65_900, 82_000];

function requests(): RequestRecord[] {
  return [
    ...[100, 200, 300].map((at) => gw('acc_free', 'free', at, 200)),
    gw('acc_free', 'free', 400, 429, { code: 'RATE_LIMIT_EXCEEDED' }),
    gw('acc_pro', 'pro', 100, 200),
    gw('acc_pro', 'pro', 200, 200),
    gw('acc_pro', 'pro', 300, 404, { code: 'NOT_FOUND' }),
    // During the fault: no answer, and a 503 with Retry-After (both ambiguous for the count, neither an error).
    gw('acc_pro', 'pro', 12_000, null, { error: 'TimeoutError' }),
    gw('acc_pro', 'pro', 13_000, 503, { retryAfter: '1', code: 'SERVICE_UNAVAILABLE' }),
    ingest(500, 200),
  ];
}

function subscriptionOps(): SubscriptionRecord[] {
  const all = ['violation.new', 'facility.status_changed'];
  return [
    op('create', 'sub_a', 1_000, 201, { account: 'acc_pro', events: all, states: null, secret: SECRET_A1 }),
    op('create', 'sub_b', 2_000, 201, { account: 'acc_pro', events: ['violation.new'], states: ['TX'], secret: SECRET_B }),
    op('create', 'sub_c', 3_000, 201, { account: 'acc_pro', events: ['facility.status_changed'], states: null, secret: SECRET_C }),
    op('rotate', 'sub_a', 100_000, 200, { secret: SECRET_A2, overlapMs: 60_000 }),
    op('deactivate', 'sub_b', 250_000, 200),
    op('delete', 'sub_c', 260_000, 204),
    op('reactivate', 'sub_b', 300_000, 200),
  ];
}

function receipts(): ReceiptRecord[] {
  const { e1, e2, e3, e4, e5 } = EVENTS;
  return [
    // evt_1 to sub_a: the first attempt answered 500, the retry 204 (a retry, not a duplicate).
    recv('sub_a', e1, 5_500, [SECRET_A1], 500),
    recv('sub_a', e1, 6_700, [SECRET_A1]),
    recv('sub_a', e2, 50_500, [SECRET_A1]),
    ...FAILED_STARTS.map((at) => recv('sub_b', e2, at, [SECRET_B], 500)),
    // During the rotation's overlap: both secrets, newest first.
    recv('sub_a', e3, 150_500, [SECRET_A2, SECRET_A1]),
    recv('sub_c', e3, 150_600, [SECRET_C]),
    recv('sub_a', e4, 200_500, [SECRET_A2]),
    recv('sub_a', e5, 320_500, [SECRET_A2]),
    recv('sub_b', e5, 320_600, [SECRET_B]),
  ];
}

function clean(): { history: HistoryRecord[]; snapshot: Snapshot } {
  const history: HistoryRecord[] = [
    meta,
    ...requests(),
    ...subscriptionOps(),
    ...receipts(),
    { k: 'fault', id: 1, kind: 'kill', target: 'gateway-1', start: T0 + 10_000, end: T0 + 20_000 },
    { k: 'proc', t: T0 + 10_000, name: 'gateway-1', event: 'signal', signal: 'SIGKILL' },
    {
      k: 'end',
      t: T0 + 600_000,
      processes: [
        { name: 'gateway-1', alive: true, peakRssBytes: 200 * 1024 ** 2, limitBytes: 512 * 1024 ** 2 },
        { name: 'usage-1', alive: true, peakRssBytes: 150 * 1024 ** 2, limitBytes: 512 * 1024 ** 2 },
      ],
    },
  ];
  const snapshot: Snapshot = {
    usage: [
      { account: 'acc_free', day: DAY, count: 3 },
      { account: 'acc_pro', day: DAY, count: 4 },
    ],
    events: Object.values(EVENTS),
    subscriptions: [
      { id: 'sub_a', active: true, deactivatedAt: null, reason: null },
      { id: 'sub_b', active: true, deactivatedAt: null, reason: null },
    ],
    unfinished: [
      {
        sub: 'sub_b',
        event: 'evt_2',
        status: 'failed',
        attempts: FAILED_STARTS.map((at, i) => ({ n: i + 1, startedAt: T0 + at, outcome: 'failure' })),
      },
    ],
  };
  return { history, snapshot };
}

const byName = (report: Report, name: PromiseName) => report.promises.find((p) => p.name === name);

/** Exactly one violation, of `name`, whose first counter-example names each of `needles`; every other promise held. */
function expectOnly(report: Report, name: PromiseName, ...needles: string[]): void {
  const others = report.promises.filter((p) => p.name !== name && !p.held).map((p) => `${p.name}: ${p.first}`);
  expect(others).toEqual([]);
  const p = byName(report, name);
  expect(p).toMatchObject({ held: false, violations: 1 });
  for (const n of needles) expect(p?.first).toContain(n);
  expect(report.violations).toBe(1);
}

const withRecords = (extra: HistoryRecord[], base = clean()) => check([...base.history, ...extra], base.snapshot);

describe('the soak checker on a clean run', () => {
  it('holds every promise, with exact counts', () => {
    const { history, snapshot } = clean();
    const report = check(history, snapshot);
    expect(report.promises).toEqual([
      { name: 'metering', held: true, checked: 2, violations: 0 },
      { name: 'free-limit', held: true, checked: 1, violations: 0 },
      // sub_a: evt_1…evt_5; sub_b: evt_5 only (evt_2 came before its deactivation); sub_c deleted.
      { name: 'delivery', held: true, checked: 6, violations: 0 },
      { name: 'deactivation', held: true, checked: 14, violations: 0 },
      { name: 'signatures', held: true, checked: 14, violations: 0 },
      { name: 'errors', held: true, checked: 10, violations: 0 },
      { name: 'processes', held: true, checked: 2, violations: 0 },
    ]);
    expect(report.faults).toEqual({ kill: 1 });
    expect(report.operations).toEqual({
      'gateway GET': 9,
      'ingest POST': 1,
      'sub create': 3,
      'sub rotate': 1,
      'sub deactivate': 1,
      'sub delete': 1,
      'sub reactivate': 1,
    });
    expect(report.duplicates).toEqual({ count: 0, examples: [] });
    expect(report.violations).toBe(0);
  });

  it('counts an event received again after a 2xx as a duplicate, not a violation', () => {
    const report = withRecords([recv('sub_a', EVENTS.e4, 230_000, [SECRET_A2])]);
    expect(report.duplicates).toEqual({ count: 1, examples: ['evt_4 → sub_a ×2'] });
    expect(report.violations).toBe(0);
  });

  it('holds a 503 with Retry-After and no answer inside a fault window (or its recovery)', () => {
    const report = withRecords([ingest(15_000, 503, '5'), ingest(45_000, null), ingest(9_990, null)]);
    expect(byName(report, 'errors')).toMatchObject({ held: true, checked: 13 });
    expect(report.violations).toBe(0);
  });

  it('holds a delivery within the in-flight bound after a deactivation', () => {
    const report = withRecords([recv('sub_b', EVENTS.e4, 250_100 + BOUND - 1_000, [SECRET_B])]);
    expect(byName(report, 'deactivation')).toMatchObject({ held: true, checked: 15 });
    expect(report.violations).toBe(0);
  });

  it('requires nothing after an unanswered deactivation (its outcome is unknown)', () => {
    const base = clean();
    base.history = base.history.filter((r) => !(r.k === 'recv' && r.sub === 'sub_a' && r.event === 'evt_5'));
    const report = withRecords([op('deactivate', 'sub_a', 210_000, null)], base);
    expect(byName(report, 'delivery')).toMatchObject({ held: true, checked: 1 });
    expect(report.violations).toBe(0);
  });
});

describe('the soak checker on filters', () => {
  it('requires only the events that pass every filter the subscription had from their commit on', () => {
    const patch = op('patch', 'sub_a', 190_000, 200, { events: ['violation.new'], states: ['TX'] });
    // sub_a: evt_2 and evt_5 (violation.new in TX); evt_1 fails the later filter, evt_3 and evt_4 fail it; sub_b: evt_5.
    expect(byName(withRecords([patch]), 'delivery')).toMatchObject({ held: true, checked: 3 });
  });

  it('holds a subscription to a patch whose outcome is unknown only where both filters agree', () => {
    const patch = op('patch', 'sub_a', 190_000, null, { events: ['facility.status_changed'], states: null });
    // evt_3 only passes both; sub_b: evt_5.
    expect(byName(withRecords([patch]), 'delivery')).toMatchObject({ held: true, checked: 2 });
  });
});

describe('the soak checker finds each planted violation', () => {
  const setUsage = (account: string, count: number) => {
    const base = clean();
    base.snapshot.usage = base.snapshot.usage.map((u) => (u.account === account ? { ...u, count } : u));
    return base;
  };

  it('metering: an over-count', () => {
    const { history, snapshot } = setUsage('acc_pro', 6);
    expectOnly(check(history, snapshot), 'metering', `account acc_pro on ${DAY}: stored 6, answers 2xx 2`, '(+2 ambiguous)');
  });

  it('metering: an under-count', () => {
    const { history, snapshot } = setUsage('acc_pro', 2);
    expectOnly(check(history, snapshot), 'metering', 'account acc_pro', 'stored 2', 'other counted answers 1');
  });

  it('free-limit: a Free account answered and counted 101 times in a day', () => {
    const base = setUsage('acc_free', 101);
    const more = Array.from({ length: 98 }, (_, i) => gw('acc_free', 'free', 1_000 + i * 10, 200));
    expectOnly(withRecords(more, base), 'free-limit', 'free account acc_free', 'stored 101, answers 2xx 101, limit 100');
  });

  it('delivery: a lost event', () => {
    const base = clean();
    base.history = base.history.filter((r) => !(r.k === 'recv' && r.sub === 'sub_a' && r.event === 'evt_4'));
    expectOnly(check(base.history, base.snapshot), 'delivery', 'lost: event evt_4', 'sub sub_a');
  });

  it('delivery: an event lost after a reactivation', () => {
    const base = clean();
    base.history = base.history.filter((r) => !(r.k === 'recv' && r.sub === 'sub_b' && r.event === 'evt_5'));
    expectOnly(check(base.history, base.snapshot), 'delivery', 'lost: event evt_5', 'never reached sub sub_b');
  });

  it('delivery: a failed delivery that breaks the retry schedule', () => {
    const base = clean();
    const failed = base.snapshot.unfinished[0] as Snapshot['unfinished'][number];
    failed.attempts = failed.attempts.map((a) => (a.n === 3 ? { ...a, startedAt: T0 + 51_600 + 900 } : a));
    expectOnly(check(base.history, base.snapshot), 'delivery', 'evt_2', 'sub_b', 'broke the retry schedule', 'attempt 3');
  });

  it('delivery: an event delivered again under a different webhook-id', () => {
    const report = withRecords([recv('sub_a', EVENTS.e1, 7_000, [SECRET_A1], 204, 'msg_other')]);
    expectOnly(report, 'delivery', 'evt_1', 'sub_a', 'msg_other');
  });

  it('deactivation: a delivery after a deletion, beyond the in-flight bound', () => {
    const report = withRecords([recv('sub_c', EVENTS.e4, 260_100 + BOUND + 1_000, [SECRET_C])]);
    expectOnly(report, 'deactivation', 'event evt_4 reached sub sub_c', 'delete');
  });

  it('signatures: a bad signature', () => {
    const base = clean();
    base.history = base.history.map((r) =>
      r.k === 'recv' && r.event === 'evt_4' && r.sub === 'sub_a' ? { ...r, signature: 'v1,AAAAbm90IGEgc2lnbmF0dXJl' } : r,
    );
    expectOnly(check(base.history, base.snapshot), 'signatures', 'evt_4', 'sub_a', 'no signature by a secret valid then');
  });

  it('signatures: signed with a secret rotated out long before', () => {
    const base = clean();
    base.history = base.history.map((r) =>
      r.k === 'recv' && r.event === 'evt_5' && r.sub === 'sub_a' ? recv('sub_a', EVENTS.e5, 320_500, [SECRET_A1]) : r,
    );
    expectOnly(check(base.history, base.snapshot), 'signatures', 'evt_5', 'secret #1 of sub sub_a');
  });

  it('signatures: a timestamp more than 5 minutes from the arrival', () => {
    const base = clean();
    base.history = base.history.map((r) =>
      r.k === 'recv' && r.event === 'evt_4' && r.sub === 'sub_a' ? { ...r, timestamp: String(Math.floor((T0 - 400_000) / 1000)) } : r,
    );
    expectOnly(check(base.history, base.snapshot), 'signatures', 'evt_4', 'webhook-timestamp');
  });

  it('errors: a 500', () => {
    expectOnly(withRecords([ingest(400_000, 500)]), 'errors', 'ingest POST /internal/v1/ingest', 'answered 500');
  });

  it('errors: a 503 without Retry-After, even during a fault', () => {
    expectOnly(withRecords([ingest(15_000, 503)]), 'errors', 'answered 503 without Retry-After');
  });

  it('errors: a 503 outside any fault window', () => {
    expectOnly(withRecords([ingest(400_000, 503, '5')]), 'errors', new Date(T0 + 400_000).toISOString(), 'outside any fault window');
  });

  const withEnd = (processes: Array<{ name: string; alive: boolean; peakRssBytes: number; limitBytes: number; crashes?: number }>) => {
    const base = clean();
    base.history = base.history.map((r) => (r.k === 'end' ? { ...r, processes } : r));
    return check(base.history, base.snapshot);
  };
  const LIMIT = 512 * 1024 ** 2;

  it('processes: a dead process', () => {
    const report = withEnd([
      { name: 'gateway-1', alive: true, peakRssBytes: 1, limitBytes: LIMIT },
      { name: 'usage-1', alive: false, peakRssBytes: 1, limitBytes: LIMIT },
    ]);
    expectOnly(report, 'processes', 'usage-1 is not alive');
  });

  it('processes: RSS over the limit', () => {
    const report = withEnd([
      { name: 'gateway-1', alive: true, peakRssBytes: LIMIT + 1024 ** 2, limitBytes: LIMIT },
      { name: 'usage-1', alive: true, peakRssBytes: 1, limitBytes: LIMIT },
    ]);
    expectOnly(report, 'processes', 'gateway-1 peaked at 513.0 MiB');
  });

  it('processes: a replica that exited with no fault to cause it (restarted since)', () => {
    const report = withEnd([
      { name: 'gateway-1', alive: true, peakRssBytes: 1, limitBytes: LIMIT, crashes: 0 },
      { name: 'dispatcher-2', alive: true, peakRssBytes: 1, limitBytes: LIMIT, crashes: 1 },
    ]);
    expectOnly(report, 'processes', 'dispatcher-2 exited 1 time(s) with no fault to cause it');
  });

  it('delivery: a system that had not caught up after the run', () => {
    const base = clean();
    base.history = base.history.map((r) => (r.k === 'end' ? { ...r, drain: { drained: false, pending: 3, unsent: 0 } } : r));
    expectOnly(check(base.history, base.snapshot), 'delivery', 'had not caught up', '3 deliveries pending');
  });

  it('processes: a run without an end record', () => {
    const base = clean();
    expectOnly(
      check(
        base.history.filter((r) => r.k !== 'end'),
        base.snapshot,
      ),
      'processes',
      'no end record',
    );
  });
});

describe('the summary', () => {
  it('names each promise, the faults, the operations and the verdict', () => {
    const { history, snapshot } = setUsageAndRender();
    const summary = renderSummary(meta, check(history, snapshot));
    expect(summary).toContain('# Soak: seed 7, 10 min, Redis cluster');
    for (const name of ['metering', 'free-limit', 'delivery', 'deactivation', 'signatures', 'errors', 'processes'])
      expect(summary).toContain(`| ${name} |`);
    expect(summary).toContain('| kill | 1 |');
    expect(summary).toContain('| gateway GET | 9 |');
    expect(summary).toContain('| metering | **VIOLATED** | 2 | 1 | account acc_pro');
    expect(summary.trimEnd().split('\n').at(-1)).toBe('1 violations');
    expect(renderSummary(meta, check(clean().history, clean().snapshot)).trimEnd().split('\n').at(-1)).toBe('0 violations');
  });
});

function setUsageAndRender() {
  const base = clean();
  base.snapshot.usage = base.snapshot.usage.map((u) => (u.account === 'acc_pro' ? { ...u, count: 9 } : u));
  return base;
}
