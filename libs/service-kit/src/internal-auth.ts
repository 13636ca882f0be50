import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Clock } from './clock';
import { systemClock } from './clock';

/**
 * The gateway forwards the authenticated account to domain services in one
 * signed header: base64url(JSON claims) "." base64url(HMAC-SHA256(claims)).
 * The claims expire quickly so a captured header is of little use.
 */
export const INTERNAL_AUTH_HEADER = 'x-fcd-account';

export interface AccountClaims {
  account_id: string;
  tier: string;
  /** Tier rank (free 0 < pro 1 < enterprise 2), so services can gate "Pro and above". */
  tier_rank: number;
  request_id?: string;
}

interface SignedClaims extends AccountClaims {
  exp: number;
}

const b64 = (buf: Buffer | string) => Buffer.from(buf).toString('base64url');

export class InternalAuth {
  private readonly key: Buffer;

  constructor(
    secret: string,
    private readonly ttlMs = 30_000,
    private readonly clock: Clock = systemClock,
  ) {
    if (secret.length < 32) throw new Error('internal auth secret must be at least 32 characters');
    this.key = Buffer.from(secret, 'utf8');
  }

  sign(claims: AccountClaims): string {
    const payload = b64(JSON.stringify({ ...claims, exp: this.clock.now() + this.ttlMs } satisfies SignedClaims));
    const mac = createHmac('sha256', this.key).update(payload).digest('base64url');
    return `${payload}.${mac}`;
  }

  /** Returns the claims, or undefined when the header is missing, forged or expired. */
  verify(header: string | string[] | undefined): AccountClaims | undefined {
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
      if (typeof claims.account_id !== 'string' || typeof claims.tier !== 'string') return undefined;
      const { exp: _exp, ...rest } = claims;
      return rest;
    } catch {
      return undefined;
    }
  }
}
