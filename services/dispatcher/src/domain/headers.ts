import { signatureHeader, standardSignatureHeader } from '@fcd/webhook-verify';

export interface DeliveryHeadersInput {
  /** Every valid signing secret, newest first (two during a rotation overlap). */
  secrets: readonly string[];
  body: string;
  eventId: string;
  eventType: string;
  deliveryId: string;
  attempt: number;
  /** The attempt's time, Unix ms (its seconds are webhook-timestamp). */
  nowMs: number;
  userAgent: string;
}

/**
 * The delivery headers: the service's own (X-Service-*, byte-exact as documented) and the Standard
 * Webhooks ones (webhook-id = event id, webhook-timestamp, webhook-signature). Both signatures
 * cover the exact bytes sent; during a rotation overlap each carries one value per valid secret,
 * newest first.
 */
export function deliveryHeaders(input: DeliveryHeadersInput): Record<string, string> {
  const timestamp = Math.floor(input.nowMs / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': input.userAgent,
    'x-service-signature': signatureHeader(input.secrets, input.body),
    'x-service-event-id': input.eventId,
    'x-service-event-type': input.eventType,
    'x-service-delivery-id': input.deliveryId,
    'x-service-delivery-attempt': String(input.attempt),
    'webhook-id': input.eventId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': standardSignatureHeader(input.secrets, input.eventId, timestamp, input.body),
  };
}
