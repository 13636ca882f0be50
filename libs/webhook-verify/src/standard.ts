import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks signatures (the convention of the `standardwebhooks` and `svix` verifiers):
 * `webhook-id` (the event id), `webhook-timestamp` (Unix seconds of the attempt) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{raw body}">`, keyed by the
 * base64-decoded bytes after `whsec_`. During a rotation with overlap the header carries one
 * `v1,` entry per valid secret, newest first, separated by spaces.
 */
export const STANDARD_HEADERS = { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' } as const;

/** Default tolerance between a delivery's timestamp and the receiver's clock (replay protection). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

const PREFIX = 'whsec_';

/**
 * The HMAC key of a secret: the bytes its text after `whsec_` encodes. Secrets are standard
 * base64; those made before Standard Webhooks support are base64url, which node:crypto's base64
 * decoder reads too, so both give their 32 random bytes.
 */
export function standardKey(secret: string): Buffer {
  const text = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  return Buffer.from(text, 'base64');
}

/** One `v1,<base64>` signature of id, timestamp and raw body under one secret. */
export function standardSignature(secret: string, id: string, timestampSeconds: number, rawBody: string | Uint8Array): string {
  const mac = createHmac('sha256', standardKey(secret));
  mac.update(`${id}.${timestampSeconds}.`, 'utf8');
  mac.update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody);
  return `v1,${mac.digest('base64')}`;
}

/** The `webhook-signature` value for one or more valid secrets, newest first, space-separated. */
export function standardSignatureHeader(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  rawBody: string | Uint8Array,
): string {
  return secrets.map((s) => standardSignature(s, id, timestampSeconds, rawBody)).join(' ');
}

export interface StandardHeaders {
  id: string | null | undefined;
  timestamp: string | null | undefined;
  signature: string | null | undefined;
}

export interface StandardVerifyOptions {
  /** Seconds the timestamp may differ from now (default 300). */
  toleranceSeconds?: number;
  /** The receiver's clock, Unix ms (default Date.now()). */
  nowMs?: number;
}

/**
 * True when the timestamp is within the tolerance and one `v1,` entry of the header is the
 * signature of id, timestamp and body under the secret. Constant-time comparisons; never throws.
 */
export function verifyStandard(
  secret: string,
  rawBody: string | Uint8Array,
  headers: StandardHeaders,
  options: StandardVerifyOptions = {},
): boolean {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  const seconds = Number(timestamp);
  const now = Math.floor((options.nowMs ?? Date.now()) / 1000);
  if (Math.abs(now - seconds) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return false;
  const expected = Buffer.from(standardSignature(secret, id, seconds, rawBody).slice(3), 'base64');
  let ok = false;
  for (const entry of signature.split(' ', 16)) {
    if (!entry.startsWith('v1,')) continue;
    const given = Buffer.from(entry.slice(3), 'base64');
    ok = (given.length === expected.length && timingSafeEqual(given, expected)) || ok;
  }
  return ok;
}
