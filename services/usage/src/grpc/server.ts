import { create } from '@bufbuild/protobuf';
import { addService, grpc, isHealthMethod, requireCallAuth } from '@fcd/grpc';
import { AuthorizeResponseSchema, GetAccountsResponseSchema, UsageService } from '@fcd/proto';
import { AppError } from '@fcd/service-kit';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { UsageMeter } from '../meter/index';
import type { UsageMetrics } from '../metrics';
import { addPortalService } from '../portal/grpc';
import type { AccountStore } from '../store/accounts';
import { AuthorizeStreams, refusedBatch } from './authorize-stream';
import { historyHandlers } from './history';
import { keyHandlers } from './keys';
import { decide, toUsage } from './results';

export const HEALTH_SERVICE_NAME = UsageService.typeName;

/** At most this many account ids per GetAccounts call. */
const MAX_ACCOUNTS_PER_CALL = 1000;

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
  const streams = new AuthorizeStreams({ meter, logger, metrics, maxBatchItems: limits.maxBatchItems });
  addService(
    server,
    UsageService,
    {
      authorizeStream: streams.handle,
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
      ...keyHandlers(accounts, meter),
      ...historyHandlers(accounts, meter),
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
  if (meter.sessions) addPortalService(server, meter.sessions, meter, metrics);
  return { server, health, drain: () => streams.drain() };
}
