import { create } from '@bufbuild/protobuf';
import { type ServiceImpl, toGrpcError } from '@fcd/grpc';
import { type AuthorizeItem, type AuthorizeResult, AuthorizeStreamResponseSchema, Decision, UsageService } from '@fcd/proto';
import { AppError, errMessage, extractTraceContext, type Span, SpanKind, SpanStatusCode, trace } from '@fcd/service-kit';
import type { Logger } from 'pino';
import type { UsageMeter } from '../meter/index';
import type { UsageMetrics } from '../metrics';
import { decide, unavailableResults } from './results';

const tracer = trace.getTracer('@fcd/usage');
const RPC_ATTRIBUTES = { 'rpc.system': 'grpc', 'rpc.service': UsageService.typeName, 'rpc.method': 'AuthorizeStream' };
/** The labels of every answered batch's RED metrics (made once, not per batch). */
const ANSWERED = { route: 'AuthorizeStream', method: 'grpc', status: 'OK' } as const;

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

export const refusedBatch = (items: number, max: number) =>
  new AppError('VALIDATION_ERROR', `A batch carries at most ${max} items; this one has ${items}.`);

type StreamCall = Parameters<ServiceImpl<typeof UsageService>['authorizeStream']>[0];

export interface StreamDeps {
  meter: UsageMeter;
  logger: Logger;
  metrics: UsageMetrics;
  maxBatchItems: number;
}

/**
 * The authorization streams. The gateway keeps one open for good. A stream is ended cleanly only
 * once every batch it is deciding has been answered, and batches that arrive after that point are
 * neither counted nor answered: so when a stream ends with status OK, each batch the gateway has
 * no answer for was not counted, and the gateway sends it again on a new stream (`drain`,
 * services/gateway/src/auth/batcher.ts).
 */
export class AuthorizeStreams {
  private readonly streams = new Set<() => void>();
  /** Every batch being decided, on any stream (shutdown waits for them before the final flush). */
  private readonly deciding = new Set<Promise<void>>();
  private draining = false;

  constructor(private readonly deps: StreamDeps) {}

  /** The `authorizeStream` handler. */
  readonly handle = (call: StreamCall): void => {
    const inFlight = new Set<Promise<void>>();
    let ending = false;
    const endWhenIdle = () => {
      ending = true;
      if (inFlight.size === 0 && !call.writableEnded && !call.destroyed) call.end();
    };
    if (this.draining) {
      endWhenIdle(); // the gateway opens its next stream on another connection
      return;
    }
    this.streams.add(endWhenIdle);
    call.once('close', () => this.streams.delete(endWhenIdle));
    const write = (batchId: number, results: AuthorizeResult[]) => {
      if (!call.writableEnded && !call.destroyed) call.write(create(AuthorizeStreamResponseSchema, { batchId, results }));
    };
    call.on('data', (batch) => {
      if (ending) return; // not counted, not answered: the gateway sends it again on a new stream
      if (batch.items.length > this.deps.maxBatchItems) {
        // A caller that ignores the cap loses its stream (its batches still being decided are answered first).
        ending = true;
        this.deps.metrics.requestsTotal.inc({ route: 'AuthorizeStream', method: 'grpc', status: 'INVALID_ARGUMENT' });
        call.emit('error', toGrpcError(refusedBatch(batch.items.length, this.deps.maxBatchItems)));
        return;
      }
      const done = this.decideBatch(batch.items, batch.countByUnixMs, (results) => write(batch.batchId, results)).finally(() => {
        inFlight.delete(done);
        this.deciding.delete(done);
        if (ending) endWhenIdle();
      });
      inFlight.add(done);
      this.deciding.add(done);
    });
    // The gateway closing its side: answer what is being decided, then end.
    call.on('end', endWhenIdle);
    call.on('error', (err) => this.deps.logger.debug({ err: { message: err.message } }, 'authorize stream error'));
  };

  /** Decides one batch and answers it with `write`, then ends its spans and records its metrics. */
  private decideBatch(items: AuthorizeItem[], countBy: bigint, write: (results: AuthorizeResult[]) => void): Promise<void> {
    const { meter, logger, metrics } = this.deps;
    const t0 = performance.now();
    const spans = itemSpans(items);
    return decide(meter, items, countBy)
      .catch((err: unknown) => {
        logger.error({ err }, 'authorize batch failed');
        return unavailableResults(items);
      })
      .then((results) => {
        // The answer first: once it is written, nothing below can leave a counted batch unanswered.
        write(results);
        spans.forEach((span, i) => {
          if (!span) return;
          const decision = results[i]?.decision ?? Decision.UNAVAILABLE;
          span.setAttribute('fcd.authorize.decision', Decision[decision] ?? String(decision));
          if (decision === Decision.UNAVAILABLE) span.setStatus({ code: SpanStatusCode.ERROR, message: 'unavailable' });
          span.end();
        });
        metrics.requestDuration.observe(ANSWERED, (performance.now() - t0) / 1000);
        metrics.requestsTotal.inc(ANSWERED);
      })
      .catch((err: unknown) => logger.error({ err: { message: errMessage(err) } }, 'authorize batch answer failed'));
  }

  /**
   * For shutdown: every open authorization stream ends once the batches it is deciding are
   * answered; batches that arrive after that are not counted (the gateway sends them again on a
   * new stream, to another replica), and streams opened from now on end at once. Resolves when
   * every batch being decided has been decided (so its count reaches the final flush).
   */
  async drain(): Promise<void> {
    this.draining = true;
    for (const endWhenIdle of this.streams) endWhenIdle();
    await Promise.allSettled([...this.deciding]);
  }
}
