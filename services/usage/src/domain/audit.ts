import { type IdSource, isoTimestamp, type KeyId, type KeysetList, listTag, uuidSource } from '@fcd/service-kit/pure';

/**
 * The audit log of key management (docs/api.md, "Audit log"): one entry per change of an
 * account's keys, written in the transaction of the change. Who (the actor), which key (the
 * target), what (the action and its details: never the key nor its digest), when.
 */

/**
 * Who acts. Extended by adding a type here and to the migration's `audit_log_actor_type_check`
 * (a named CHECK, dropped and added again with the wider list).
 */
const AUDIT_ACTOR_TYPES = ['key', 'operator', 'portal_session'] as const;
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

/**
 * The account itself, through one of its keys or a customer-portal session (its public id
 * `pses_…`, never its token); or an operator (admin API or CLI).
 */
export type AuditActor = { type: 'key'; keyId: KeyId } | { type: 'portal_session'; sessionId: string } | { type: 'operator' };

export const OPERATOR: AuditActor = { type: 'operator' };

const AUDIT_ACTIONS = ['key.created', 'key.renamed', 'key.revoked', 'key.rolled'] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** What an entry says beyond its action: names, expiries, ids. Never a key or a digest. */
export type AuditDetails = Record<string, string | number | boolean | null>;

export interface AuditEntry {
  /** `aud_<uuid>` */
  id: string;
  accountId: string;
  actor: AuditActor;
  action: AuditAction;
  /** The key the action changed (for a roll, the key rolled; the new one is `details.new_key_id`). */
  targetKeyId: string;
  details: AuditDetails;
  /** ISO 8601 UTC with milliseconds. */
  occurredAt: string;
}

/** An entry as the store lists it: with its position in the log (insertion order). */
export interface AuditRecord extends AuditEntry {
  seq: number;
}

export function auditEntry(
  input: { accountId: string; actor: AuditActor; action: AuditAction; targetKeyId: string; details: AuditDetails },
  now: number,
  ids: IdSource = uuidSource,
): AuditEntry {
  return { id: `aud_${ids()}`, ...input, occurredAt: isoTimestamp(now) };
}

/**
 * Whether the actor may revoke the account's last live key. The account may not (it would lock
 * itself out: 409 LIMIT_REACHED); an operator may (a leaked key, an account being closed), and
 * the account then needs an operator to get a key again.
 */
export function mayRevokeLastLiveKey(actor: AuditActor): boolean {
  return actor.type === 'operator';
}

/** The actor as the API shows it: `{ type: "key", key_id }`, `{ type: "portal_session", session_id }` or `{ type: "operator" }`. */
function actorView(actor: AuditActor): { type: AuditActorType; key_id?: string; session_id?: string } {
  if (actor.type === 'key') return { type: 'key', key_id: actor.keyId };
  if (actor.type === 'portal_session') return { type: 'portal_session', session_id: actor.sessionId };
  return { type: actor.type };
}

/** An entry as the API shows it (the gateway's `GET /v1/account/audit-log`, the admin API, the CLI). */
export function auditView(e: AuditEntry) {
  return { id: e.id, actor: actorView(e.actor), action: e.action, key_id: e.targetKeyId, details: e.details, occurred_at: e.occurredAt };
}

/** An account's log, newest first: keyed by the entry's position, tagged per account. */
export function auditList(accountId: string): KeysetList<number, AuditRecord> {
  return {
    tag: listTag(`audit-log:${accountId}`),
    keyOf: (item) => item.seq,
    toValues: (seq) => [seq],
    fromValues: (values) => {
      const [seq] = values;
      return values.length === 1 && Number.isSafeInteger(seq) && (seq as number) > 0 ? (seq as number) : undefined;
    },
  };
}
