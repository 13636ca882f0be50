import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Clock } from './clock';
import { systemClock } from './clock';

/**
 * The gateway forwards the authenticated account to domain services in one
 * signed header: base64url(JSON claims) "." base64url(HMAC-SHA256(claims)).
 * The claims name the one request they authorise (target service, method, and
 * path with query) and expire a few seconds after signing, so a captured
 * header is refused on any other route, method or service, and soon on its own.
 */
export const INTERNAL_AUTH_HEADER = 'x-fcd-account';

/** Lifetime of a signed header: a proxied request is verified on arrival, so a few seconds (clock skew included). */
export const INTERNAL_AUTH_TTL_MS = 5_000;

/** The tier rank of Pro: "Pro and above" (docs/metering.md) is a rank of at least this (free 0 < pro 1 < enterprise 2). */
export const PRO_TIER_RANK = 1;

export interface AccountClaims {
  account_id: string;
  tier: string;
  /** Tier rank (free 0 < pro 1 < enterprise 2), so services can gate "Pro and above". */
  tier_rank: number;
  request_id?: string;
}

/** The one request a header authorises. */
export interface InternalTarget {
  /** The receiving service's name (`facility`, `webhook`). */
  audience: string;
  method: string;
  /** Path with its query string, exactly as the receiver sees it (`request.url`). */
  path: string;
}

interface SignedClaims extends AccountClaims {
  exp: number;
  aud: string;
  m: string;
  p: string;
}

const b64 = (buf: Buffer | string) => Buffer.from(buf).toString('base64url');

/** The target of an incoming Fastify request, for `verify`. */
export function requestTarget(request: { method: string; url: string }, audience: string): InternalTarget {
  return { audience, method: request.method, path: request.url };
}

export class InternalAuth {
  private readonly key: Buffer;

  constructor(
    secret: string,
    private readonly ttlMs = INTERNAL_AUTH_TTL_MS,
    private readonly clock: Clock = systemClock,
  ) {
    if (secret.length < 32) throw new Error('internal auth secret must be at least 32 characters');
    this.key = Buffer.from(secret, 'utf8');
  }

  sign(claims: AccountClaims, target: InternalTarget): string {
    // Each field named, not `...claims`: a literal of one shape serializes on JSON.stringify's fast
    // path, a spread's object does not (0.5 against 2.8 µs, about 2 % of the gateway's CPU per
    // proxied request; docs/benchmarks/history/2026-11-29.md). Its fields are AccountClaims' own.
    const signed: SignedClaims = {
      account_id: claims.account_id,
      tier: claims.tier,
      tier_rank: claims.tier_rank,
      request_id: claims.request_id,
      aud: target.audience,
      m: target.method.toUpperCase(),
      p: target.path,
      exp: this.clock.now() + this.ttlMs,
    };
    const payload = b64(JSON.stringify(signed));
    const mac = createHmac('sha256', this.key).update(payload).digest('base64url');
    return `${payload}.${mac}`;
  }

  /** Returns the claims, or undefined when the header is missing, forged, expired or signed for another request. */
  verify(header: string | string[] | undefined, target: InternalTarget): AccountClaims | undefined {
    if (typeof header !== 'string') return undefined;
    const dot = header.indexOf('.');
    if (dot <= 0) return undefined;
    const payload = header.slice(0, dot);
    const given = Buffer.from(header.slice(dot + 1), 'base64url');
    const expected = createHmac('sha256', this.key).update(payload).digest();
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as SignedClaims;
      if (typeof claims.exp !== 'number' || claims.exp < this.clock.now()) return undefined;
      if (claims.aud !== target.audience || claims.m !== target.method.toUpperCase() || claims.p !== target.path) return undefined;
      if (typeof claims.account_id !== 'string' || typeof claims.tier !== 'string') return undefined;
      // The account's fields by name, as `sign` writes them: an object of one shape (a rest
      // pattern copies whatever keys the payload has, one at a time).
      return { account_id: claims.account_id, tier: claims.tier, tier_rank: claims.tier_rank, request_id: claims.request_id };
    } catch {
      return undefined;
    }
  }
}
