import type { GetUsageResponse } from '@fcd/proto';
import { AppError, UNAUTHORIZED_MESSAGE } from '@fcd/service-kit';
import type { FastifyRequest } from 'fastify';

/**
 * The account a /v1 request was authenticated as, and what the metering hook (auth/metering.ts)
 * leaves on the request for the routes. Its own module, below app.ts and the routes, so that the
 * routes need nothing from app.ts (no import cycle; biome's noImportCycles).
 */
export interface AuthenticatedAccount {
  accountId: string;
  tier: string;
  tierRank: number;
  /** The key that authenticated (`key_<uuid>`): the actor of the account's key changes (audit log). */
  keyId?: string;
  /** Set when the credential is a portal session (`pses_<uuid>`): then the actor of its key changes. */
  sessionId?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    account?: AuthenticatedAccount;
    /** The usage report computed with the authorization (GET /v1/account/usage). */
    usageReport?: GetUsageResponse;
    /**
     * Set for a conditional GET, authorized with a peek (not counted): it is counted before any
     * answer but a 304 is sent (docs/metering.md, "Conditional GETs").
     */
    uncounted?: { apiKey: string; path: string };
    /** The API key, kept for the per-page counts of an export. */
    meterKey?: string;
  }
}

/** The account a /v1 request was authenticated as; 401 when there is none. */
export function requireAccount(request: FastifyRequest): AuthenticatedAccount {
  if (!request.account) throw new AppError('UNAUTHORIZED', UNAUTHORIZED_MESSAGE);
  return request.account;
}
