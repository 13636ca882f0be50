import { startDeadline } from '@fcd/webhooks/pure';
import { describe, expect, it } from 'vitest';
import { StartGates } from './start-gate';

describe('StartGates', () => {
  const T = Date.parse('2026-11-28T09:00:00.000Z');
  const startBy = startDeadline(5, T);

  it('gates a rate-limited send at its bound (open up to and at it, closed after); no gate without a rate limit', () => {
    const gates = new StartGates();
    let now = T;
    const gate = gates.gate('wh_1', startBy, () => now);
    expect(gate).toBeTypeOf('function');
    now = startBy;
    expect(gate?.()).toBe(true);
    now = startBy + 1;
    expect(gate?.()).toBe(false);
    expect(gates.gate('wh_1', null, () => now)).toBeUndefined();
  });

  it('after a send stopped at the gate, the next send of that subscription is not gated; one sent restores the gate', () => {
    const gates = new StartGates();
    const now = () => T;
    gates.settled('wh_1', true);
    expect(gates.gate('wh_1', startBy, now)).toBeUndefined();
    // Other subscriptions keep their gate.
    expect(gates.gate('wh_2', startBy, now)).toBeTypeOf('function');
    gates.settled('wh_1', false);
    expect(gates.gate('wh_1', startBy, now)).toBeTypeOf('function');
  });

  it('starts over past its size: forgetting only gates a send again', () => {
    const gates = new StartGates(2);
    const now = () => T;
    gates.settled('wh_1', true);
    gates.settled('wh_2', true);
    gates.settled('wh_3', true);
    expect(gates.gate('wh_1', startBy, now)).toBeTypeOf('function');
    expect(gates.gate('wh_2', startBy, now)).toBeTypeOf('function');
    expect(gates.gate('wh_3', startBy, now)).toBeUndefined();
  });
});
