import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from './errors';

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** `Bearer` (any case), one or more spaces, then the token in printable ASCII without spaces. */
const BEARER = /^Bearer +([\x21-\x7e]+) *$/i;

export interface BearerTokenOptions {
  /** The 401 message (the same one for every way a token can be wrong). */
  message?: string;
}

/**
 * A Fastify hook (onRequest or preHandler) that admits a request only when its
 * `Authorization: Bearer <token>` matches `token`. Both sides are hashed with
 * SHA-256 and the digests compared in constant time, so the comparison takes
 * the same time whatever the given token's length or content, and nothing
 * about the expected token (its length included) can be learned from it.
 * Anything wrong (no header, another scheme, non-ASCII, wrong token, or no
 * token configured) is one 401 UNAUTHORIZED envelope, never a 500.
 */
export function requireBearerToken(token: string | undefined, options: BearerTokenOptions = {}) {
  const expected = token === undefined || token.length === 0 ? undefined : sha256(token);
  const message = options.message ?? 'A valid token is required. Send it as Authorization: Bearer <token>.';
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization;
    const given = typeof header === 'string' ? BEARER.exec(header)?.[1] : undefined;
    // Always one hash and one comparison, whatever is wrong, so a refusal takes the same time.
    const ok = timingSafeEqual(sha256(given ?? ''), expected ?? sha256('\u0000')) && given !== undefined && expected !== undefined;
    if (!ok) throw new AppError('UNAUTHORIZED', message);
  };
}
