import { sign } from '@fcd/webhooks';

export interface DeliveryHeadersInput {
  secret: string;
  body: string;
  eventId: string;
  eventType: string;
  deliveryId: string;
  attempt: number;
  userAgent: string;
}

/** The SPEC §8 delivery headers; the signature covers the exact bytes sent. */
export function deliveryHeaders(input: DeliveryHeadersInput): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': input.userAgent,
    'x-service-signature': sign(input.secret, input.body),
    'x-service-event-id': input.eventId,
    'x-service-event-type': input.eventType,
    'x-service-delivery-id': input.deliveryId,
    'x-service-delivery-attempt': String(input.attempt),
  };
}
