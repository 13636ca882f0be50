import type { IncomingMessage, ServerResponse } from 'node:http';
import { SIGNATURE_HEADER, verifyAny } from './signature.js';
import { STANDARD_HEADERS, type StandardVerifyOptions, verifyStandard } from './standard.js';

/**
 * The receiver side of a delivery: compute the signature over the raw body, compare in constant
 * time, answer 401 on a mismatch. Usable with any framework that hands over the raw body;
 * `webhookHandler` is a complete node:http handler.
 */

/** The delivery headers a receiver reads (lower case, as node:http gives them). */
export const DELIVERY_HEADERS = {
  signature: SIGNATURE_HEADER,
  eventId: 'x-service-event-id',
  eventType: 'x-service-event-type',
  deliveryId: 'x-service-delivery-id',
  attempt: 'x-service-delivery-attempt',
  standardId: STANDARD_HEADERS.id,
  standardTimestamp: STANDARD_HEADERS.timestamp,
  standardSignature: STANDARD_HEADERS.signature,
} as const;

/**
 * True when the `X-Service-Signature` header (one `sha256=` value, or several comma-separated
 * during the sender's rotation overlap) holds a valid signature of the raw body under one of the
 * secrets (several during a rotation on the receiver's side). Each comparison is constant-time.
 */
export function verifyDelivery(
  secrets: string | readonly string[],
  rawBody: string | Uint8Array,
  signatureHeader: string | null | undefined,
) {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  let ok = false;
  // Every secret is checked (no early exit), so timing does not tell which one matched.
  for (const secret of list) ok = verifyAny(secret, rawBody, signatureHeader) || ok;
  return ok;
}

type HeaderGetter = (name: string) => string | null | undefined;

/**
 * Verifies a delivery from its headers, whichever convention they carry: the Standard Webhooks
 * headers when `webhook-signature` is present (with the timestamp's replay window), else
 * `X-Service-Signature`.
 */
export function verifyDeliveryHeaders(
  secrets: string | readonly string[],
  rawBody: string | Uint8Array,
  header: HeaderGetter,
  options: StandardVerifyOptions = {},
): boolean {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  const standard = header(STANDARD_HEADERS.signature);
  if (!standard) return verifyDelivery(list, rawBody, header(SIGNATURE_HEADER));
  const given = { id: header(STANDARD_HEADERS.id), timestamp: header(STANDARD_HEADERS.timestamp), signature: standard };
  let ok = false;
  for (const secret of list) ok = verifyStandard(secret, rawBody, given, options) || ok;
  return ok;
}

export interface ReceivedDelivery {
  event: { id: string; type: string; created_at: string; data: Record<string, unknown> };
  rawBody: Buffer;
  deliveryId: string | undefined;
  attempt: number | undefined;
}

export interface WebhookHandlerOptions {
  secrets: string | readonly string[];
  /** Called once the signature is verified; a throw answers 500 (the sender retries). */
  onDelivery: (delivery: ReceivedDelivery) => Promise<void> | void;
  /** Largest body accepted (default 1 MiB); larger is 413. */
  maxBodyBytes?: number;
  /** Replay window of the Standard Webhooks timestamp (default 300 s). */
  toleranceSeconds?: number;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function answer(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/**
 * A node:http request handler for one webhook endpoint: POST only, raw body
 * read up to a cap, signature verified (401 on mismatch, before the body is
 * parsed), then `onDelivery`; 204 on success.
 */
export function webhookHandler(options: WebhookHandlerOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const max = options.maxBodyBytes ?? 1024 * 1024;
  return (req, res) => {
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      answer(res, 405, { error: 'method not allowed' });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('error', () => answer(res, 400, { error: 'bad request' }));
    req.on('end', () => {
      if (tooLarge) return answer(res, 413, { error: 'payload too large' });
      const rawBody = Buffer.concat(chunks);
      const verified = verifyDeliveryHeaders(options.secrets, rawBody, (name) => header(req, name), {
        ...(options.toleranceSeconds !== undefined ? { toleranceSeconds: options.toleranceSeconds } : {}),
      });
      if (!verified) {
        return answer(res, 401, { error: 'invalid signature' });
      }
      let event: ReceivedDelivery['event'];
      try {
        event = JSON.parse(rawBody.toString('utf8'));
      } catch {
        return answer(res, 400, { error: 'body is not JSON' });
      }
      const attempt = Number(header(req, DELIVERY_HEADERS.attempt));
      Promise.resolve()
        .then(() =>
          options.onDelivery({
            event,
            rawBody,
            deliveryId: header(req, DELIVERY_HEADERS.deliveryId),
            attempt: Number.isInteger(attempt) ? attempt : undefined,
          }),
        )
        .then(
          () => {
            res.writeHead(204).end();
          },
          () => answer(res, 500, { error: 'handler failed' }),
        );
    });
  };
}
