import { describe, expect, it } from 'vitest';
import { ifNoneMatchMatches, strongEtag } from './conditional';

describe('strongEtag', () => {
  it('is the base64url SHA-256 of the exact bytes, quoted, for a string and a Buffer alike', () => {
    const body = '{"data":"é"}';
    expect(strongEtag(body)).toBe('"CwGSNk6uOVbeqBJeR4hgKORLi45p_rIAJFD1YVt4-ps"');
    expect(strongEtag(Buffer.from(body))).toBe(strongEtag(body));
    expect(ifNoneMatchMatches(`W/${strongEtag(body)}`, strongEtag(body))).toBe(true);
  });
});
