/**
 * The views of statements (docs/metering.md, "Billing close", "Reading statements"): JSON for the
 * APIs, CSV with fixed columns and JSON Lines (one line per account and period) for a billing system.
 */
import type { StoredStatement } from '../store/statements';

export const STATEMENT_FORMATS = ['json', 'csv', 'jsonl'] as const;
export type StatementFormat = (typeof STATEMENT_FORMATS)[number];

export const CONTENT_TYPES: Record<StatementFormat, string> = {
  json: 'application/json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  jsonl: 'application/x-ndjson; charset=utf-8',
};

/** The CSV columns, in order; a statement is one `statement` row, each adjustment one `adjustment` row after it. */
const CSV_COLUMNS = [
  'kind',
  'account_id',
  'period',
  'tiers',
  'total_requests',
  'included_requests',
  'overage_requests',
  'overage_rate_usd',
  'amount_usd',
  'at',
] as const;

/** A statement as the APIs show it (snake_case, amounts as decimal strings). */
function statementView(s: StoredStatement) {
  return {
    account_id: s.accountId,
    period: s.period,
    tiers: s.tiers.map((t) => ({
      tier: t.tier,
      days: t.days,
      daily_limit: t.dailyLimit,
      included_requests: t.includedRequests,
      overage_requests: t.overageRequests,
      overage_rate_usd: t.overageRateUsd,
      amount_usd: t.amountUsd,
    })),
    total_requests: s.totalRequests,
    included_requests: s.includedRequests,
    overage_requests: s.overageRequests,
    overage_rate_usd: s.overageRateUsd,
    amount_usd: s.amountUsd,
    closed_at: s.closedAt,
    adjustments: s.adjustments.map((a) => ({
      total_requests: a.totalRequests,
      included_requests: a.includedRequests,
      overage_requests: a.overageRequests,
      amount_usd: a.amountUsd,
      created_at: a.createdAt,
    })),
  };
}

/** RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled. */
function field(v: string | number): string {
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

function statementsCsv(list: readonly StoredStatement[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const s of list) {
    const tiers = s.tiers.map((t) => `${t.tier}:${t.days}`).join(';');
    lines.push(
      [
        'statement',
        s.accountId,
        s.period,
        tiers,
        s.totalRequests,
        s.includedRequests,
        s.overageRequests,
        s.overageRateUsd,
        s.amountUsd,
        s.closedAt,
      ]
        .map(field)
        .join(','),
    );
    for (const a of s.adjustments)
      lines.push(
        ['adjustment', s.accountId, s.period, '', a.totalRequests, a.includedRequests, a.overageRequests, '', a.amountUsd, a.createdAt]
          .map(field)
          .join(','),
      );
  }
  return `${lines.join('\r\n')}\r\n`;
}

function statementsJsonl(list: readonly StoredStatement[]): string {
  return list.map((s) => `${JSON.stringify(statementView(s))}\n`).join('');
}

/** The body of a list of statements in a format. */
export function renderStatements(list: readonly StoredStatement[], format: StatementFormat): string {
  if (format === 'csv') return statementsCsv(list);
  if (format === 'jsonl') return statementsJsonl(list);
  return JSON.stringify({ data: list.map(statementView) });
}
