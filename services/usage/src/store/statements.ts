import type { Pool, PoolClient } from '@fcd/service-kit';
import { formatMicroUsd, type PeriodBounds, type StatementFigures, type TierChange, type TierLine } from '../domain/proration';

/** A closed statement as stored, with its adjustments (late corrections, oldest first). */
export interface StoredStatement {
  accountId: string;
  period: string;
  tiers: TierLine[];
  totalRequests: number;
  includedRequests: number;
  overageRequests: number;
  overageRateUsd: string;
  amountUsd: string;
  amountMicroUsd: bigint;
  closedAt: string;
  adjustments: StoredAdjustment[];
}

export interface StoredAdjustment {
  totalRequests: number;
  includedRequests: number;
  overageRequests: number;
  amountUsd: string;
  amountMicroUsd: bigint;
  createdAt: string;
}

interface StatementRow {
  account_id: string;
  period: string;
  tiers: TierLine[];
  total_requests: number;
  included_requests: number;
  overage_requests: number;
  overage_rate_usd: string;
  amount_micro_usd: string;
  closed_at: Date;
}

interface AdjustmentRow {
  account_id: string;
  period: string;
  total_requests: number;
  included_requests: number;
  overage_requests: number;
  amount_micro_usd: string;
  created_at: Date;
}

const STATEMENT_COLUMNS = `account_id, period, tiers, total_requests, included_requests, overage_requests,
  overage_rate_usd::text, amount_micro_usd::text, closed_at`;

/** "0.003000" → "0.003" (3 to 6 decimals, as the running estimate prints rates). */
function rate(value: string): string {
  const [int, frac = ''] = value.split('.');
  return `${int}.${frac.replace(/0+$/, '').padEnd(3, '0')}`;
}

function toAdjustment(r: AdjustmentRow): StoredAdjustment {
  const micros = BigInt(r.amount_micro_usd);
  return {
    totalRequests: r.total_requests,
    includedRequests: r.included_requests,
    overageRequests: r.overage_requests,
    amountUsd: formatMicroUsd(micros),
    amountMicroUsd: micros,
    createdAt: r.created_at.toISOString(),
  };
}

function toStatement(r: StatementRow, adjustments: StoredAdjustment[]): StoredStatement {
  const micros = BigInt(r.amount_micro_usd);
  return {
    accountId: r.account_id,
    period: r.period,
    tiers: r.tiers,
    totalRequests: r.total_requests,
    includedRequests: r.included_requests,
    overageRequests: r.overage_requests,
    overageRateUsd: rate(r.overage_rate_usd),
    amountUsd: formatMicroUsd(micros),
    amountMicroUsd: micros,
    closedAt: r.closed_at.toISOString(),
    adjustments,
  };
}

/**
 * An account's tier history before `endMs` (Unix ms), oldest first: what the close bills each day
 * in, and what the usage history (GET /v1/account/usage/daily) counts each day's limit from.
 */
export async function readTierHistory(db: Pool | PoolClient, accountId: string, endMs: number): Promise<TierChange[]> {
  const { rows } = await db.query<{ effective_at: Date; tier: string; daily_limit: number; hard_limit: boolean; rate: string }>(
    `SELECT effective_at, tier, daily_limit, hard_limit, overage_rate_usd::text AS rate FROM usage.tier_history
      WHERE account_id = $1 AND effective_at < $2 ORDER BY effective_at, id`,
    [accountId, new Date(endMs)],
  );
  return rows.map((r) => ({
    effectiveAt: r.effective_at.getTime(),
    tier: r.tier,
    dailyLimit: r.daily_limit,
    hardLimit: r.hard_limit,
    overageRateUsd: rate(r.rate),
  }));
}

/** The SQL of billing: tier history, stored counts of a period, statements and adjustments. */
export class StatementStore {
  constructor(readonly pool: Pool) {}

  /** Accounts that existed before the period ended (their first tier row is earlier), by id. */
  async accountsOf(bounds: PeriodBounds): Promise<string[]> {
    const { rows } = await this.pool.query<{ account_id: string }>(
      'SELECT DISTINCT account_id FROM usage.tier_history WHERE effective_at < $1 ORDER BY account_id',
      [new Date(bounds.endMs)],
    );
    return rows.map((r) => r.account_id);
  }

  /** The account's tier history up to the period's end. */
  history(client: PoolClient, accountId: string, bounds: PeriodBounds): Promise<TierChange[]> {
    return readTierHistory(client, accountId, bounds.endMs);
  }

  /** The stored daily counts of an account in the period, by day. */
  async counts(client: Pool | PoolClient, accountId: string, bounds: PeriodBounds): Promise<Map<string, number>> {
    const { rows } = await client.query<{ day: string; request_count: number }>(
      'SELECT day, request_count FROM usage.daily_usage WHERE account_id = $1 AND day BETWEEN $2 AND $3',
      [accountId, bounds.start, bounds.end],
    );
    return new Map(rows.map((r) => [r.day, r.request_count]));
  }

  /** Sum of the stored daily counts of every account in the period. */
  async totalsByAccount(bounds: PeriodBounds): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ account_id: string; total: number }>(
      `SELECT account_id, sum(request_count)::bigint AS total FROM usage.daily_usage
        WHERE day BETWEEN $1 AND $2 GROUP BY account_id`,
      [bounds.start, bounds.end],
    );
    return new Map(rows.map((r) => [r.account_id, r.total]));
  }

  /** Serialises closes of one account's period (two closes at once write one adjustment, not two). */
  async lock(client: PoolClient, accountId: string, period: string): Promise<void> {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`billing:${accountId}:${period}`]);
  }

  /** Inserts the statement unless one exists; true when inserted. */
  async insert(client: PoolClient, accountId: string, period: string, s: StatementFigures, closedAt: number): Promise<boolean> {
    const { rowCount } = await client.query(
      `INSERT INTO usage.statements (account_id, period, tiers, total_requests, included_requests, overage_requests,
         overage_rate_usd, amount_micro_usd, closed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (account_id, period) DO NOTHING`,
      [
        accountId,
        period,
        JSON.stringify(s.tiers),
        s.totalRequests,
        s.includedRequests,
        s.overageRequests,
        s.overageRateUsd,
        s.amountMicroUsd.toString(),
        new Date(closedAt),
      ],
    );
    return rowCount === 1;
  }

  async addAdjustment(
    client: PoolClient,
    accountId: string,
    period: string,
    delta: Omit<StoredAdjustment, 'amountUsd' | 'createdAt'>,
    at: number,
  ): Promise<void> {
    await client.query(
      `INSERT INTO usage.statement_adjustments (account_id, period, total_requests, included_requests, overage_requests,
         amount_micro_usd, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [
        accountId,
        period,
        delta.totalRequests,
        delta.includedRequests,
        delta.overageRequests,
        delta.amountMicroUsd.toString(),
        new Date(at),
      ],
    );
  }

  /** The statements of a period (every account), of one account (every period, newest first), or of both. */
  async list(filter: { period?: string; accountId?: string }, client: Pool | PoolClient = this.pool): Promise<StoredStatement[]> {
    const args: string[] = [];
    const conditions: string[] = [];
    if (filter.period !== undefined) conditions.push(`period = $${args.push(filter.period)}`);
    if (filter.accountId !== undefined) conditions.push(`account_id = $${args.push(filter.accountId)}`);
    if (conditions.length === 0) throw new Error('statements: a period or an account is required');
    const where = conditions.join(' AND ');
    const [statements, adjustments] = await Promise.all([
      client.query<StatementRow>(`SELECT ${STATEMENT_COLUMNS} FROM usage.statements WHERE ${where} ORDER BY period DESC, account_id`, args),
      client.query<AdjustmentRow>(
        `SELECT account_id, period, total_requests, included_requests, overage_requests, amount_micro_usd::text, created_at
           FROM usage.statement_adjustments WHERE ${where} ORDER BY id`,
        args,
      ),
    ]);
    const byKey = new Map<string, StoredAdjustment[]>();
    for (const a of adjustments.rows) {
      const key = `${a.account_id}|${a.period}`;
      byKey.set(key, [...(byKey.get(key) ?? []), toAdjustment(a)]);
    }
    return statements.rows.map((r) => toStatement(r, byKey.get(`${r.account_id}|${r.period}`) ?? []));
  }

  /** Records that a period's close ran to its end (the first time is kept). */
  async completed(period: string, accounts: number, at: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO usage.billing_closes (period, first_completed_at, last_completed_at, accounts) VALUES ($1, $2, $2, $3)
       ON CONFLICT (period) DO UPDATE SET last_completed_at = EXCLUDED.last_completed_at, accounts = EXCLUDED.accounts`,
      [period, new Date(at), accounts],
    );
  }

  /** The latest period whose close ran to its end: its statements and its amount with adjustments. */
  async latestClose(): Promise<{ period: string; statements: number; amountMicroUsd: bigint } | undefined> {
    const { rows } = await this.pool.query<{ period: string; statements: number; amount: string }>(
      `SELECT c.period,
              (SELECT count(*) FROM usage.statements s WHERE s.period = c.period)::int AS statements,
              ((SELECT COALESCE(sum(amount_micro_usd), 0) FROM usage.statements s WHERE s.period = c.period)
               + (SELECT COALESCE(sum(amount_micro_usd), 0) FROM usage.statement_adjustments a WHERE a.period = c.period))::text AS amount
         FROM usage.billing_closes c ORDER BY c.period DESC LIMIT 1`,
    );
    const r = rows[0];
    return r && { period: r.period, statements: r.statements, amountMicroUsd: BigInt(r.amount) };
  }
}
