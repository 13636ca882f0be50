/**
 * Authentication of internal gRPC calls: every call carries a token in its
 * metadata, `v1.<unix ms>.<base64url HMAC-SHA256(secret, "v1.<unix ms>.<method path>")>`,
 * made by the client for that call from a shared secret and checked by the
 * server before the call reaches its handler (docs/adr/0001-internal-grpc-authentication.md).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';

/** Metadata key of the per-call token. */
export const CALL_AUTH_METADATA = 'x-fcd-call-auth';
/** A token is accepted this long before and after its timestamp (clock skew between pods, call queueing). */
export const CALL_AUTH_MAX_SKEW_MS = 60_000;
export const CALL_AUTH_MIN_SECRET_LENGTH = 32;

type Now = () => number;

const mac = (key: Buffer, issuedAt: number, methodPath: string) =>
  createHmac('sha256', key).update(`v1.${issuedAt}.${methodPath}`).digest();

function keyOf(secret: string): Buffer {
  if (secret.length < CALL_AUTH_MIN_SECRET_LENGTH) {
    throw new Error(`the gRPC call secret must be at least ${CALL_AUTH_MIN_SECRET_LENGTH} characters`);
  }
  return Buffer.from(secret, 'utf8');
}

/** The token of one call to `methodPath` (`/package.Service/Method`). */
export function signCall(secret: string, methodPath: string, now: Now = Date.now): string {
  const issuedAt = Math.trunc(now());
  return `v1.${issuedAt}.${mac(keyOf(secret), issuedAt, methodPath).toString('base64url')}`;
}

/** A checker of call tokens: true only for a token made with the secret, for this method, within the skew. */
export function callVerifier(secret: string, now: Now = Date.now): (token: unknown, methodPath: string) => boolean {
  const key = keyOf(secret);
  return (token, methodPath) => {
    if (typeof token !== 'string' || token.length > 200) return false;
    const match = /^v1\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!match) return false;
    const issuedAt = Number(match[1]);
    if (Math.abs(now() - issuedAt) > CALL_AUTH_MAX_SKEW_MS) return false;
    return timingSafeEqual(Buffer.from(match[2] as string, 'base64url'), mac(key, issuedAt, methodPath));
  };
}

/** Client side: adds a fresh token to the metadata of every call made through the client. */
export function callAuthInterceptor(secret: string, now: Now = Date.now): grpc.Interceptor {
  keyOf(secret);
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set(CALL_AUTH_METADATA, signCall(secret, options.method_definition.path, now));
        next(metadata, listener);
      },
    });
}

export interface CallAuthOptions {
  /** Method paths open without a token (e.g. the standard health service, for probes). */
  isOpen?: (methodPath: string) => boolean;
  now?: Now;
  /** Called for each refused call (metrics); never given the token. */
  onRefused?: (methodPath: string) => void;
}

/**
 * Server side: refuses a call without a valid token with UNAUTHENTICATED, from
 * its metadata, before any request message reaches the handler.
 */
export function requireCallAuth(secret: string, options: CallAuthOptions = {}): grpc.ServerInterceptor {
  const verify = callVerifier(secret, options.now);
  return (methodDescriptor, call) => {
    const path = methodDescriptor.path;
    if (options.isOpen?.(path)) return new grpc.ServerInterceptingCall(call);
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, nextMetadata) {
            if (verify(metadata.get(CALL_AUTH_METADATA)[0], path)) {
              nextMetadata(metadata);
              return;
            }
            options.onRefused?.(path);
            call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: 'A valid internal call token is required.' });
          },
        });
      },
    });
  };
}

/** The standard gRPC health service (left open for probes). */
export const isHealthMethod = (methodPath: string) => methodPath.startsWith('/grpc.health.v1.Health/');
