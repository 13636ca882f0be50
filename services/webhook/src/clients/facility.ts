import { type AccountClaims, INTERNAL_AUTH_HEADER, type InternalAuth, sendOnceMoreAfterReset, serviceUnavailable } from '@fcd/service-kit';
import { type Dispatcher, Pool } from 'undici';
import type { FacilityDirectory as FacilityDirectoryPort } from '../domain/ports';

/** The facility client the app holds: the domain's FacilityDirectory port, and its health check and close. */
export interface FacilityDirectory extends FacilityDirectoryPort {
  /** Resolves when the facility service answers its health check (for /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface HttpFacilityDirectoryOptions {
  baseUrl: string;
  internalAuth: InternalAuth;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  retryAfterSeconds?: number;
}

/**
 * `POST {FACILITY_URL}/internal/v1/facilities/existing` `{ ids }` → `{ data: { existing } }`,
 * over a keep-alive undici pool with bounded connect and response times; sent once more when its
 * connection was reset before the answer (`sendOnceMoreAfterReset`).
 */
export class HttpFacilityDirectory implements FacilityDirectory {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly retryAfter: number;

  constructor(private readonly options: HttpFacilityDirectoryOptions) {
    const url = new URL(options.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    const timeout = options.requestTimeoutMs ?? 3000;
    this.pool = new Pool(url.origin, {
      connections: 16,
      connectTimeout: options.connectTimeoutMs ?? 1000,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      keepAliveTimeout: 10_000,
    });
    this.retryAfter = options.retryAfterSeconds ?? 2;
  }

  async existing(ids: readonly string[], account: AccountClaims): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    let status: number;
    let payload: unknown;
    const path = `${this.basePath}/internal/v1/facilities/existing`;
    const request: Dispatcher.RequestOptions = {
      path,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        [INTERNAL_AUTH_HEADER]: this.options.internalAuth.sign(account, { audience: 'facility', method: 'POST', path }),
        ...(account.request_id ? { 'x-request-id': account.request_id } : {}),
      },
      body: JSON.stringify({ ids }),
    };
    try {
      // A lookup, safe to repeat: sent once more when its connection was reset before the answer
      // (a facility replica leaving closes its idle connections; docs/operations.md "Rollouts").
      const res = await sendOnceMoreAfterReset(() => this.pool.request(request));
      status = res.statusCode;
      if (status === 200) payload = await res.body.json();
      else await res.body.dump();
    } catch (err) {
      throw serviceUnavailable('facility', this.retryAfter, err);
    }
    const existing = (payload as { data?: { existing?: unknown } } | undefined)?.data?.existing;
    if (status !== 200 || !Array.isArray(existing) || !existing.every((id) => typeof id === 'string')) {
      throw serviceUnavailable('facility', this.retryAfter, new Error(`facility service answered ${status}`));
    }
    return new Set((existing as string[]).map((id) => id.toLowerCase()));
  }

  async ping(): Promise<void> {
    const res = await this.pool.request({ path: `${this.basePath}/healthz`, method: 'GET' });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`facility /healthz answered ${res.statusCode}`);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
