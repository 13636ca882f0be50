export { pick } from './schedule';

import type { HistoryWriter, RequestRecord } from './history';
import type { Receivers } from './receivers';

/** The states the soak's facilities are in; subscriptions filter on some of them. */
export const STATES = ['OH', 'TX', 'CA', 'PA', 'NY', 'IL', 'MI', 'LA'];
/** A client gives up on an answer after this long (a paused gateway holds the request). */
const CLIENT_TIMEOUT_MS = 15_000;

export interface Account {
  account: string;
  apiKey: string;
  tier: 'free' | 'pro';
}

export interface WorkloadContext {
  gatewayUrl: string;
  facilityUrl: string;
  directUrl: string;
  history: HistoryWriter;
  receivers: Receivers;
  random: () => number;
}

/** One HTTP call, recorded with its outcome (never throws). */
export async function call(
  ctx: WorkloadContext,
  base: Omit<RequestRecord, 'k' | 't0' | 't1' | 'status'>,
  url: string,
  init: RequestInit,
): Promise<{ status: number | null; body: unknown }> {
  const t0 = Date.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    const code = error?.code;
    ctx.history.write({
      k: 'req',
      ...base,
      t0,
      t1: Date.now(),
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      ...(code ? { code } : {}),
      // What a 4xx/5xx said, to chase it (an error envelope never carries a secret).
      ...(res.status >= 400 && error?.message ? { message: JSON.stringify(error).slice(0, 300) } : {}),
    });
    return { status: res.status, body };
  } catch (err) {
    ctx.history.write({ k: 'req', ...base, t0, t1: Date.now(), status: null, error: (err as Error).name });
    return { status: null, body: undefined };
  }
}
