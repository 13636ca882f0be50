import { describe, expect, it } from 'vitest';
import { prefixedId } from './clock';
import { prefixedIdPattern, prefixedIdRegExp, UUID_ANY_CASE, UUID_LOWER_CASE } from './ids';

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
