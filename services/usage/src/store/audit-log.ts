import {
  fetchSize,
  type KeyId,
  type KeysetPage,
  keysetPage,
  type PageRequest,
  type Pool,
  type PoolClient,
  takeRows,
} from '@fcd/service-kit';
import {
  type AuditAction,
  type AuditActor,
  type AuditDetails,
  type AuditEntry,
  type AuditRecord,
  auditEntry,
  auditList,
} from '../domain/audit';

interface AuditRow {
  seq: string;
  id: string;
  account_id: string;
  actor_type: string;
  actor_key_id: string | null;
  actor_session_id: string | null;
  action: AuditAction;
  target_key_id: string;
  details: AuditDetails;
  occurred_at: Date;
}

function actorOf(r: AuditRow): AuditActor {
  if (r.actor_type === 'key') return { type: 'key', keyId: r.actor_key_id as KeyId };
  if (r.actor_type === 'portal_session') return { type: 'portal_session', sessionId: r.actor_session_id as string };
  return { type: 'operator' };
}

function toRecord(r: AuditRow): AuditRecord {
  const actor = actorOf(r);
  return {
    seq: Number(r.seq),
    id: r.id,
    accountId: r.account_id,
    actor,
    action: r.action,
    targetKeyId: r.target_key_id,
    details: r.details,
    occurredAt: r.occurred_at.toISOString(),
  };
}

/** Writes one entry, inside the transaction of the change it records (so both or neither are kept). */
export async function recordAudit(
  client: PoolClient,
  input: { accountId: string; actor: AuditActor; action: AuditAction; targetKeyId: string; details: AuditDetails },
  now: number,
): Promise<AuditEntry> {
  const entry = auditEntry(input, now);
  await client.query(
    `INSERT INTO usage.audit_log (id, account_id, actor_type, actor_key_id, actor_session_id, action, target_key_id, details, occurred_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      entry.id,
      entry.accountId,
      entry.actor.type,
      entry.actor.type === 'key' ? entry.actor.keyId : null,
      entry.actor.type === 'portal_session' ? entry.actor.sessionId : null,
      entry.action,
      entry.targetKeyId,
      JSON.stringify(entry.details),
      new Date(now),
    ],
  );
  return entry;
}

/** One page of an account's audit log, newest first (keysetPage: the request's limit and cursor checked). */
export async function auditLogPage(pool: Pool, accountId: string, request: PageRequest): Promise<KeysetPage<AuditRecord>> {
  return keysetPage(auditList(accountId), request, async (limit, after) => {
    const { rows } = await pool.query<AuditRow>(
      `SELECT seq::text, id, account_id, actor_type, actor_key_id, actor_session_id, action, target_key_id, details, occurred_at
         FROM usage.audit_log
        WHERE account_id = $1 AND ($2::bigint IS NULL OR seq < $2::bigint)
        ORDER BY seq DESC
        LIMIT $3`,
      [accountId, after ?? null, fetchSize(limit)],
    );
    return takeRows(rows.map(toRecord), limit);
  });
}
