import { SUBSCRIPTION_VIEW } from '@fcd/webhooks';
import { describe, expect, it } from 'vitest';
import { SubscriptionEnvelope } from './schemas';

describe('the subscription response schema', () => {
  it('documents exactly the fields of the public view, in its order', () => {
    expect(Object.keys(SubscriptionEnvelope.properties.data.properties)).toEqual(SUBSCRIPTION_VIEW);
  });
});
