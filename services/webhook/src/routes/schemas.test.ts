import { ATTEMPT_VIEW, DELIVERY_VIEW, SUBSCRIPTION_VIEW } from '@fcd/webhooks/pure';
import { describe, expect, it } from 'vitest';
import { DeliveryEnvelope, SubscriptionEnvelope } from './schemas';

describe('the subscription response schema', () => {
  it('documents exactly the fields of the public view, in its order', () => {
    expect(Object.keys(SubscriptionEnvelope.properties.data.properties)).toEqual(SUBSCRIPTION_VIEW);
  });
});

describe('the delivery response schema', () => {
  it('documents exactly the fields of the delivery and attempt views, in their order', () => {
    const delivery = DeliveryEnvelope.properties.data.properties;
    expect(Object.keys(delivery)).toEqual([...DELIVERY_VIEW, 'attempts']);
    expect(Object.keys(delivery.attempts.items.properties)).toEqual(ATTEMPT_VIEW);
  });
});
