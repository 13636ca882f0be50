/**
 * The one adapter between protobuf-es messages and grpc-js: service
 * definitions from generated descriptors, typed server registration, a typed
 * client with deadlines, and the mapping between AppError and gRPC status.
 */
import type { DescMessage, DescMethod, DescService, MessageShape } from '@bufbuild/protobuf';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { AppError, type ErrorCode } from '@fcd/service-kit';
import * as grpc from '@grpc/grpc-js';
import { callAuthInterceptor } from './call-auth';

export * from './call-auth';
export { grpc };

type MethodMap<S extends DescService> = S['method'];
type In<M> = M extends { input: infer I extends DescMessage } ? MessageShape<I> : never;
type Out<M> = M extends { output: infer O extends DescMessage } ? MessageShape<O> : never;

/** Server-side implementation: unary methods are async functions; bidi methods get the duplex call. */
export type ServiceImpl<S extends DescService> = {
  [K in keyof MethodMap<S>]: MethodMap<S>[K] extends { methodKind: 'unary' }
    ? (request: In<MethodMap<S>[K]>, call: grpc.ServerUnaryCall<In<MethodMap<S>[K]>, Out<MethodMap<S>[K]>>) => Promise<Out<MethodMap<S>[K]>>
    : MethodMap<S>[K] extends { methodKind: 'bidi_streaming' }
      ? (call: grpc.ServerDuplexStream<In<MethodMap<S>[K]>, Out<MethodMap<S>[K]>>) => void
      : never;
};

/**
 * Every method of the service failing with "unused": a fake server in a test spreads it first and
 * then writes only the methods it serves, so a method added to the service needs no edit there.
 */
export function unusedMethods<S extends DescService>(service: S): ServiceImpl<S> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    impl[method.localName] =
      method.methodKind === 'unary'
        ? async () => {
            throw new Error(`unused: ${method.name}`);
          }
        : (call: grpc.ServerDuplexStream<unknown, unknown>) => call.end();
  }
  return impl as ServiceImpl<S>;
}

function methodPath(service: DescService, method: DescMethod): string {
  return `/${service.typeName}/${method.name}`;
}

function serializer<T extends DescMessage>(schema: T) {
  return (value: MessageShape<T>) => Buffer.from(toBinary(schema, value));
}

function deserializer<T extends DescMessage>(schema: T) {
  return (bytes: Buffer) => fromBinary(schema, bytes);
}

export function serviceDefinition(service: DescService): grpc.ServiceDefinition {
  const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    def[method.localName] = {
      path: methodPath(service, method),
      requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
      responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.name,
    } as grpc.MethodDefinition<unknown, unknown>;
  }
  return def as grpc.ServiceDefinition;
}

const STATUS_BY_CODE: Partial<Record<ErrorCode, grpc.status>> = {
  UNAUTHORIZED: grpc.status.UNAUTHENTICATED,
  FORBIDDEN: grpc.status.PERMISSION_DENIED,
  VALIDATION_ERROR: grpc.status.INVALID_ARGUMENT,
  BAD_REQUEST: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  RATE_LIMIT_EXCEEDED: grpc.status.RESOURCE_EXHAUSTED,
  LIMIT_REACHED: grpc.status.RESOURCE_EXHAUSTED,
  SERVICE_UNAVAILABLE: grpc.status.UNAVAILABLE,
};

/** The error's `details` (JSON in binary metadata: any text survives), at most this many bytes (within gRPC's 8 KiB of metadata); larger are dropped. */
const ERROR_DETAILS_KEY = 'fcd-error-details-bin';
const MAX_ERROR_DETAILS_BYTES = 2048;

/**
 * AppError (or anything thrown) → a gRPC status error; the error code and, for an error the caller
 * answers with (not INTERNAL_ERROR nor SERVICE_UNAVAILABLE), its details travel in metadata.
 */
export function toGrpcError(err: unknown): grpc.ServiceError {
  const appError = err instanceof AppError ? err : new AppError('INTERNAL_ERROR', 'internal error');
  const metadata = new grpc.Metadata();
  metadata.set('fcd-error-code', appError.code);
  if (appError.details && appError.code !== 'INTERNAL_ERROR' && appError.code !== 'SERVICE_UNAVAILABLE') {
    const bytes = Buffer.from(JSON.stringify(appError.details), 'utf8');
    if (bytes.length <= MAX_ERROR_DETAILS_BYTES) metadata.set(ERROR_DETAILS_KEY, bytes);
  }
  return Object.assign(new Error(appError.message), {
    code: STATUS_BY_CODE[appError.code] ?? grpc.status.INTERNAL,
    details: appError.message,
    metadata,
  }) as grpc.ServiceError;
}

/** The details an error carried (a JSON object), or undefined. */
function detailsOf(value: unknown): Record<string, unknown> | undefined {
  if (!Buffer.isBuffer(value) || value.length > MAX_ERROR_DETAILS_BYTES) return undefined;
  try {
    const parsed: unknown = JSON.parse(value.toString('utf8'));
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A gRPC error seen by a client → AppError. Transport failures become SERVICE_UNAVAILABLE. */
export function fromGrpcError(err: unknown, dependency: string): AppError {
  const se = err as Partial<grpc.ServiceError>;
  const code = se.metadata?.get('fcd-error-code')[0];
  if (typeof code === 'string' && code !== 'INTERNAL_ERROR' && code !== 'SERVICE_UNAVAILABLE') {
    const details = detailsOf(se.metadata?.get(ERROR_DETAILS_KEY)[0]);
    return new AppError(code as ErrorCode, se.details ?? 'error', details ? { details } : {});
  }
  return new AppError('SERVICE_UNAVAILABLE', `The service is temporarily unavailable (${dependency}). Retry after 1 s.`, {
    retryAfterSeconds: 1,
    details: { dependency },
    cause: err,
  });
}

export interface ServerHooks {
  /** Called after each unary call with its method name, gRPC status code and duration. */
  onUnary?: (method: string, code: grpc.status, seconds: number) => void;
}

export function addService<S extends DescService>(server: grpc.Server, service: S, impl: ServiceImpl<S>, hooks: ServerHooks = {}): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = (impl as Record<string, unknown>)[method.localName] as (...args: unknown[]) => unknown;
    if (method.methodKind === 'unary') {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const started = performance.now();
        (fn(call.request, call) as Promise<unknown>).then(
          (res) => {
            hooks.onUnary?.(method.name, grpc.status.OK, (performance.now() - started) / 1000);
            callback(null, res);
          },
          (err: unknown) => {
            const ge = toGrpcError(err);
            hooks.onUnary?.(method.name, ge.code, (performance.now() - started) / 1000);
            callback(ge);
          },
        );
      };
    } else {
      handlers[method.localName] = (call: unknown) => fn(call);
    }
  }
  server.addService(serviceDefinition(service), handlers);
}

export type UnaryClient<S extends DescService> = {
  [K in keyof MethodMap<S> as MethodMap<S>[K] extends { methodKind: 'unary' } ? K : never]: (
    request: In<MethodMap<S>[K]>,
    options?: { deadlineMs?: number; metadata?: grpc.Metadata },
  ) => Promise<Out<MethodMap<S>[K]>>;
};

export interface TypedClient<S extends DescService> {
  raw: grpc.Client;
  unary: UnaryClient<S>;
  /** Opens a bidirectional stream of the named method. */
  bidi<K extends keyof MethodMap<S>>(
    method: K,
    metadata?: grpc.Metadata,
  ): grpc.ClientDuplexStream<In<MethodMap<S>[K]>, Out<MethodMap<S>[K]>>;
  close(): void;
}

export const DEFAULT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 2_000,
};

export function createClient<S extends DescService>(
  service: S,
  address: string,
  options: {
    defaultDeadlineMs?: number;
    channelOptions?: grpc.ChannelOptions;
    credentials?: grpc.ChannelCredentials;
    /** Shared secret of the server's call authentication: each call then carries its own token (call-auth.ts). */
    callSecret?: string;
  } = {},
): TypedClient<S> {
  const Ctor = grpc.makeGenericClientConstructor(serviceDefinition(service), service.name);
  const raw = new Ctor(address, options.credentials ?? grpc.credentials.createInsecure(), {
    ...DEFAULT_CHANNEL_OPTIONS,
    ...options.channelOptions,
    ...(options.callSecret === undefined ? {} : { interceptors: [callAuthInterceptor(options.callSecret)] }),
  }) as unknown as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  const defaultDeadlineMs = options.defaultDeadlineMs ?? 2000;
  const unary: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== 'unary') continue;
    unary[method.localName] = (request: unknown, opts: { deadlineMs?: number; metadata?: grpc.Metadata } = {}) =>
      new Promise((resolve, reject) => {
        const deadline = Date.now() + (opts.deadlineMs ?? defaultDeadlineMs);
        (raw[method.localName] as (...args: unknown[]) => unknown)(
          request,
          opts.metadata ?? new grpc.Metadata(),
          { deadline },
          (err: grpc.ServiceError | null, res: unknown) => (err ? reject(err) : resolve(res)),
        );
      });
  }
  return {
    raw,
    unary: unary as UnaryClient<S>,
    bidi(method, metadata) {
      const desc = service.method[method as string] as DescMethod | undefined;
      if (desc?.methodKind !== 'bidi_streaming') throw new Error(`${String(method)} is not a bidi method`);
      return (raw[desc.localName] as (md: grpc.Metadata) => unknown)(metadata ?? new grpc.Metadata()) as never;
    },
    close: () => raw.close(),
  };
}
