import { create } from '@bufbuild/protobuf';
import { addService, grpc, isHealthMethod, requireCallAuth, toGrpcError } from '@fcd/grpc';
import {
  type AuthorizeItem,
  AuthorizeResponseSchema,
  type AuthorizeResult,
  AuthorizeResultSchema,
  AuthorizeStreamResponseSchema,
  Decision,
  GetAccountsResponseSchema,
  GetUsageResponseSchema,
  UsageService,
} from '@fcd/proto';
import { AppError, extractTraceContext, type Span, SpanKind, SpanStatusCode, trace } from '@fcd/service-kit';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { Decision as MeterDecision, MeterResult, UsageMeter, UsageReport } from '../meter/index';
import type { UsageMetrics } from '../metrics';
import type { AccountStore } from '../store/accounts';

const DECISION: Record<MeterDecision, Decision> = {
  allowed: Decision.ALLOWED,
  unauthenticated: Decision.UNAUTHENTICATED,
  rate_limited: Decision.RATE_LIMITED,
  unavailable: Decision.UNAVAILABLE,
};

function toUsage(report: UsageReport) {
  return create(GetUsageResponseSchema, {
    tier: report.tier,
    dailyLimit: report.dailyLimit,
    today: { requestCount: report.today.requestCount, remaining: report.today.remaining, resetsAt: report.today.resetsAt },
    billingPeriod: {
      start: report.billing.start,
      end: report.billing.end,
      totalRequests: BigInt(report.billing.totalRequests),
      includedRequests: BigInt(report.billing.includedRequests),
      overageRequests: BigInt(report.billing.overageRequests),
      overageRateUsd: report.billing.overageRateUsd,
      estimatedOverageUsd: report.billing.estimatedOverageUsd,
    },
    stale: report.stale,
  });
}

function toResult(r: MeterResult): AuthorizeResult {
  return create(AuthorizeResultSchema, {
    usage: r.usage ? toUsage(r.usage) : undefined,
    decision: DECISION[r.decision],
    accountId: r.principal?.accountId ?? '',
    tier: r.principal?.tier ?? '',
    tierRank: r.principal?.tierRank ?? 0,
    dailyLimit: r.principal?.dailyLimit ?? 0,
    count: r.count,
    remaining: r.remaining,
    resetsAt: r.resetsAt,
    retryAfterSeconds: r.retryAfterSeconds,
  });
}

/** `countBy`: the batch's deadline (Unix ms, 0 = none); items not counted by then are answered UNAVAILABLE. */
async function decide(meter: UsageMeter, items: AuthorizeItem[], countBy: bigint): Promise<AuthorizeResult[]> {
  const results = await meter.authorize(
    items.map((i) => ({ apiKey: i.apiKey, includeUsage: i.includeUsage, peek: i.peek })),
    { countBy: Number(countBy) },
  );
  return results.map(toResult);
}

const tracer = trace.getTracer('@fcd/usage');
const RPC_ATTRIBUTES = { 'rpc.system': 'grpc', 'rpc.service': UsageService.typeName, 'rpc.method': 'AuthorizeStream' };

/** A server span per traced item of a batch, child of the gateway's span carried in the item. */
function itemSpans(items: AuthorizeItem[]): Array<Span | undefined> {
  return items.map((item) =>
    item.traceparent
      ? tracer.startSpan(
          `${UsageService.typeName}/AuthorizeStream`,
          { kind: SpanKind.SERVER, attributes: { ...RPC_ATTRIBUTES, 'fcd.authorize.batch_size': items.length } },
          extractTraceContext({ traceparent: item.traceparent, ...(item.tracestate ? { tracestate: item.tracestate } : {}) }),
        )
      : undefined,
  );
}

export const HEALTH_SERVICE_NAME = UsageService.typeName;

/** At most this many account ids per GetAccounts call. */
export const MAX_ACCOUNTS_PER_CALL = 1000;

export interface GrpcLimits {
  /** Shared secret of the per-call tokens (every method but the standard health service needs one). */
  callSecret: string;
  /** Items per authorization batch (a stream message or an Authorize call); more → INVALID_ARGUMENT. */
  maxBatchItems: number;
  /** Largest request message in bytes; larger → RESOURCE_EXHAUSTED (grpc-js). */
  maxMessageBytes: number;
  /** Concurrent calls (HTTP/2 streams) per connection; beyond → refused by HTTP/2 (RST_STREAM REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /** GOAWAY after this connection age (grpc-js adds ±10 % jitter; 0 = never), then this grace for open calls. */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
}

const refusedBatch = (items: number, max: number) =>
  new AppError('VALIDATION_ERROR', `A batch carries at most ${max} items; this one has ${items}.`);

export function createGrpcServer(
  meter: UsageMeter,
  accounts: AccountStore,
  logger: Logger,
  metrics: UsageMetrics,
  limits: GrpcLimits,
): { server: grpc.Server; health: HealthImplementation; drain: () => Promise<void> } {
  const server = new grpc.Server({
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': limits.maxMessageBytes,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    ...(limits.maxConnectionAgeMs
      ? {
          'grpc.max_connection_age_ms': limits.maxConnectionAgeMs,
          'grpc.max_connection_age_grace_ms': limits.maxConnectionAgeGraceMs ?? 30_000,
        }
      : {}),
    interceptors: [
      requireCallAuth(limits.callSecret, {
        isOpen: isHealthMethod,
        onRefused: (path) => {
          metrics.requestsTotal.inc({ route: path.slice(path.lastIndexOf('/') + 1), method: 'grpc', status: 'UNAUTHENTICATED' });
        },
      }),
    ],
  });
  const health = new HealthImplementation({
    '': 'NOT_SERVING',
    [HEALTH_SERVICE_NAME]: 'NOT_SERVING',
    postgres: 'UNKNOWN',
    redis: 'UNKNOWN',
  });
  health.addToServer(server);
  // The gateway keeps one authorization stream open for good. A stream is ended cleanly only once
  // every batch it is deciding has been answered, and batches that arrive after that point are
  // neither counted nor answered: so when a stream ends with status OK, each batch the gateway has
  // no answer for was not counted, and the gateway sends it again on a new stream (`drain`,
  // services/gateway/src/auth/batcher.ts).
  const streams = new Set<() => void>();
  /** Every batch being decided, on any stream (shutdown waits for them before the final flush). */
  const deciding = new Set<Promise<void>>();
  let draining = false;
  const unavailable = (items: AuthorizeItem[]) =>
    items.map(() => create(AuthorizeResultSchema, { decision: Decision.UNAVAILABLE, retryAfterSeconds: 1 }));
  addService(
    server,
    UsageService,
    {
      authorizeStream(call) {
        const inFlight = new Set<Promise<void>>();
        let ending = false;
        const endWhenIdle = () => {
          ending = true;
          if (inFlight.size === 0 && !call.writableEnded && !call.destroyed) call.end();
        };
        if (draining) return endWhenIdle(); // the gateway opens its next stream on another connection
        streams.add(endWhenIdle);
        call.once('close', () => streams.delete(endWhenIdle));
        const started = new Map<number, number>();
        const write = (batchId: number, results: AuthorizeResult[]) => {
          if (!call.writableEnded && !call.destroyed) call.write(create(AuthorizeStreamResponseSchema, { batchId, results }));
        };
        call.on('data', (batch) => {
          if (ending) return; // not counted, not answered: the gateway sends it again on a new stream
          if (batch.items.length > limits.maxBatchItems) {
            // A caller that ignores the cap loses its stream (its batches still being decided are answered first).
            ending = true;
            metrics.requestsTotal.inc({ route: 'AuthorizeStream', method: 'grpc', status: 'INVALID_ARGUMENT' });
            call.emit('error', toGrpcError(refusedBatch(batch.items.length, limits.maxBatchItems)));
            return;
          }
          started.set(batch.batchId, performance.now());
          const spans = itemSpans(batch.items);
          const done = decide(meter, batch.items, batch.countByUnixMs)
            .catch((err: unknown) => {
              logger.error({ err }, 'authorize batch failed');
              return unavailable(batch.items);
            })
            .then((results) => {
              // The answer first: once it is written, nothing below can leave a counted batch unanswered.
              write(batch.batchId, results);
              spans.forEach((span, i) => {
                if (!span) return;
                const decision = results[i]?.decision ?? Decision.UNAVAILABLE;
                span.setAttribute('fcd.authorize.decision', Decision[decision] ?? String(decision));
                if (decision === Decision.UNAVAILABLE) span.setStatus({ code: SpanStatusCode.ERROR, message: 'unavailable' });
                span.end();
              });
              const t0 = started.get(batch.batchId) ?? performance.now();
              started.delete(batch.batchId);
              metrics.requestDuration.observe({ route: 'AuthorizeStream', method: 'grpc', status: 'OK' }, (performance.now() - t0) / 1000);
              metrics.requestsTotal.inc({ route: 'AuthorizeStream', method: 'grpc', status: 'OK' });
            })
            .catch((err: unknown) => logger.error({ err }, 'authorize batch answer failed'))
            .finally(() => {
              inFlight.delete(done);
              deciding.delete(done);
              if (ending) endWhenIdle();
            });
          inFlight.add(done);
          deciding.add(done);
        });
        // The gateway closing its side: answer what is being decided, then end.
        call.on('end', endWhenIdle);
        call.on('error', (err) => logger.debug({ err: { message: err.message } }, 'authorize stream error'));
      },
      async authorize(request, call) {
        if (request.items.length > limits.maxBatchItems) throw refusedBatch(request.items.length, limits.maxBatchItems);
        // Without a count-by time, the call's own deadline bounds the counting.
        const deadline = call.getDeadline();
        const callDeadline = deadline instanceof Date ? deadline.getTime() : Number.isFinite(deadline) ? Number(deadline) : 0;
        const countBy = request.countByUnixMs > 0n ? request.countByUnixMs : BigInt(Math.trunc(callDeadline));
        return create(AuthorizeResponseSchema, { results: await decide(meter, request.items, countBy) });
      },
      async getUsage(request) {
        const report = await meter.usage(request.accountId);
        if (!report) throw new AppError('NOT_FOUND', 'No such account.');
        return toUsage(report);
      },
      async getAccounts(request) {
        if (request.accountIds.length > MAX_ACCOUNTS_PER_CALL) {
          throw new AppError('VALIDATION_ERROR', `At most ${MAX_ACCOUNTS_PER_CALL} account ids per call.`);
        }
        const found = await accounts.tiersOf(request.accountIds);
        return create(GetAccountsResponseSchema, {
          accounts: found.map((a) => ({ accountId: a.accountId, tier: a.tier, tierRank: a.rank })),
        });
      },
    },
    {
      onUnary: (method, code, seconds) => {
        const labels = { route: method, method: 'grpc', status: grpc.status[code] ?? String(code) };
        metrics.requestDuration.observe(labels, seconds);
        metrics.requestsTotal.inc(labels);
      },
    },
  );
  /**
   * For shutdown: every open authorization stream ends once the batches it is deciding are
   * answered; batches that arrive after that are not counted (the gateway sends them again on a
   * new stream, to another replica), and streams opened from now on end at once. Resolves when
   * every batch being decided has been decided (so its count reaches the final flush).
   */
  const drain = async () => {
    draining = true;
    for (const endWhenIdle of streams) endWhenIdle();
    await Promise.allSettled([...deciding]);
  };
  return { server, health, drain };
}
