import { describe, expect, it } from 'vitest';
import { prefixedId } from './clock';
import {
  CaseId,
  DeliveryId,
  EventId,
  FacilityId,
  prefixedIdPattern,
  prefixedIdRegExp,
  SubscriptionId,
  UUID_ANY_CASE,
  UUID_LOWER_CASE,
  ViolationId,
} from './ids';

const id = '7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f';

describe('id shapes', () => {
  it('accept a UUID in any case, or in lower case only', () => {
    expect(UUID_ANY_CASE.test(id)).toBe(true);
    expect(UUID_ANY_CASE.test(id.toUpperCase())).toBe(true);
    expect(UUID_LOWER_CASE.test(id)).toBe(true);
    expect(UUID_LOWER_CASE.test(id.toUpperCase())).toBe(false);
    for (const bad of ['', 'x', `${id}0`, `{${id}}`, id.replace(/-/g, ''), `urn:uuid:${id}`]) {
      expect(UUID_ANY_CASE.test(bad)).toBe(false);
    }
  });

  it('match the prefixed ids prefixedId issues, and only with their own prefix', () => {
    const wh = prefixedId('wh', () => id);
    expect(wh).toBe(`wh_${id}`);
    expect(prefixedIdRegExp('wh').test(wh)).toBe(true);
    expect(prefixedIdRegExp('dlv').test(wh)).toBe(false);
    expect(prefixedIdRegExp('wh').test(`wh_${id.toUpperCase()}`)).toBe(false);
    expect(prefixedIdRegExp('wh').test(id)).toBe(false);
    expect(prefixedIdPattern('evt')).toBe('^evt_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$');
  });
});

describe('id kinds', () => {
  it('parse each id to its brand, and refuse the others', () => {
    expect(SubscriptionId.parse(`wh_${id}`)).toBe(`wh_${id}`);
    expect(SubscriptionId.parse(`dlv_${id}`)).toBeUndefined();
    expect(SubscriptionId.parse(`wh_${id.toUpperCase()}`)).toBeUndefined();
    expect(DeliveryId.parse(`dlv_${id}`)).toBe(`dlv_${id}`);
    expect(DeliveryId.parse(42)).toBeUndefined();
    expect(SubscriptionId.pattern).toBe(prefixedIdPattern('wh'));
  });

  it('take the event ids the event log keeps: evt_ and 1 to 100 letters, digits or hyphens', () => {
    for (const good of [`evt_${id}`, 'evt_1', 'evt_old', `evt_${'a'.repeat(100)}`]) expect(EventId.parse(good)).toBe(good);
    for (const bad of ['evt_', 'evt_a_b', `evt_${'a'.repeat(101)}`, `wh_${id}`, 'EVT_1', null]) expect(EventId.parse(bad)).toBeUndefined();
    expect(EventId.pattern).toBe('^evt_[A-Za-z0-9-]{1,100}$');
  });

  it('lower-case the UUID ids of the facility data, which accept any case and nothing else', () => {
    for (const kind of [FacilityId, CaseId, ViolationId]) {
      expect(kind.parse(id.toUpperCase())).toBe(id);
      expect(kind.is(id)).toBe(true);
      expect(kind.is(id.toUpperCase())).toBe(false);
      expect(kind.parse(`${id}0`)).toBeUndefined();
    }
  });
});
