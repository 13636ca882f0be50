import { decodeListCursor, type KeyId } from '@fcd/service-kit/pure';
import { describe, expect, it } from 'vitest';
import { auditEntry, auditList, auditView, mayRevokeLastLiveKey, OPERATOR } from './audit';

const NOW = Date.parse('2026-11-22T08:00:00.000Z');
const KEY = 'key_7d3f3c1e-9a4b-4c2d-8e1f-0a1b2c3d4e5f' as KeyId;
const SESSION = 'pses_0b6c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d';

describe('audit entries', () => {
  it('are aud_<id>, stamped with the injected time', () => {
    const entry = auditEntry(
      { accountId: 'acct_1', actor: { type: 'key', keyId: KEY }, action: 'key.renamed', targetKeyId: KEY, details: { name: 'ci' } },
      NOW,
      () => '00000000-0000-4000-8000-000000000009',
    );
    expect(entry).toEqual({
      id: 'aud_00000000-0000-4000-8000-000000000009',
      accountId: 'acct_1',
      actor: { type: 'key', keyId: KEY },
      action: 'key.renamed',
      targetKeyId: KEY,
      details: { name: 'ci' },
      occurredAt: '2026-11-22T08:00:00.000Z',
    });
  });

  it('show as the API does, the actor with its key or without one', () => {
    const entry = { accountId: 'acct_1', action: 'key.revoked' as const, targetKeyId: KEY, details: { was_live: true } };
    expect(auditView(auditEntry({ ...entry, actor: { type: 'key', keyId: KEY } }, NOW, () => '1'))).toEqual({
      id: 'aud_1',
      actor: { type: 'key', key_id: KEY },
      action: 'key.revoked',
      key_id: KEY,
      details: { was_live: true },
      occurred_at: '2026-11-22T08:00:00.000Z',
    });
    expect(auditView(auditEntry({ ...entry, actor: OPERATOR }, NOW, () => '2')).actor).toEqual({ type: 'operator' });
    expect(auditView(auditEntry({ ...entry, actor: { type: 'portal_session', sessionId: SESSION } }, NOW, () => '3')).actor).toEqual({
      type: 'portal_session',
      session_id: SESSION,
    });
  });

  it('let an operator revoke the last live key, never the account itself', () => {
    expect(mayRevokeLastLiveKey(OPERATOR)).toBe(true);
    expect(mayRevokeLastLiveKey({ type: 'key', keyId: KEY })).toBe(false);
    expect(mayRevokeLastLiveKey({ type: 'portal_session', sessionId: SESSION })).toBe(false);
  });
});

describe('the audit log list', () => {
  it("is tagged per account and keyed by the entry's position", () => {
    const list = auditList('acct_1');
    expect(list.tag).not.toBe(auditList('acct_2').tag);
    expect(list.tag).not.toContain('acct_1');
    expect(list.toValues(list.keyOf({ seq: 42 } as never))).toEqual([42]);
    expect(list.fromValues([42])).toBe(42);
    for (const bad of [[], [0], [-1], [1.5], ['42'], [42, 1], [Number.MAX_SAFE_INTEGER + 2]]) expect(list.fromValues(bad)).toBeUndefined();
    expect(decodeListCursor(list.tag, Buffer.from(JSON.stringify([list.tag, 7])).toString('base64url'))).toEqual([7]);
  });
});
