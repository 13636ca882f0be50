/**
 * The `billing` commands of usage-cli (docs/metering.md, "Billing close"):
 *
 *   usage-cli billing close --period YYYY-MM|previous [--json] (needs REDIS_URL or REDIS_CLUSTER_NODES too)
 *   usage-cli billing statements --period YYYY-MM [--format json|csv|jsonl]
 *   usage-cli billing verify --period YYYY-MM [--json]          (exit 1 on a mismatch, one line each)
 */
import { AppError, type CliIo, type Pool, systemClock } from '@fcd/service-kit';
import { previousPeriod } from '../domain/proration';
import { AccountStore } from '../store/accounts';
import { StatementStore } from '../store/statements';
import { type AccountOutcome, closePeriod, requirePeriod } from './close';
import { renderStatements, STATEMENT_FORMATS, type StatementFormat } from './export';
import { landFromRedis } from './land';
import { openBillingCounters } from './redis';
import { verifyPeriod } from './verify';

export interface BillingCommand {
  values: { period?: string | undefined; format?: string | undefined };
  pool: Pool;
  io: CliIo;
  out(json: unknown, text: string): void;
}

/**
 * Test hook (never set in a deployment): after this many accounts are committed the close prints
 * `billing close: holding` on stderr and waits to be killed, so a test can SIGKILL it part-way.
 */
export const HOLD_AFTER_ENV = 'USAGE_BILLING_TEST_HOLD_AFTER';

function holdHook(io: CliIo): ((o: AccountOutcome) => Promise<void>) | undefined {
  const after = Number(io.env[HOLD_AFTER_ENV] ?? 0);
  if (!(after > 0)) return undefined;
  let done = 0;
  return async () => {
    if (++done < after) return;
    io.stderr.write('billing close: holding\n');
    await new Promise(() => undefined);
  };
}

async function close({ values, pool, io, out }: BillingCommand): Promise<void> {
  // `previous`: the month before this one, what the chart's CronJob closes on the 1st.
  const period = values.period === 'previous' ? previousPeriod(systemClock.now()) : values.period;
  requirePeriod(period);
  const { counters, close: closeRedis } = await openBillingCounters(io.env);
  try {
    const onAccount = holdHook(io);
    const r = await closePeriod(
      {
        statements: new StatementStore(pool),
        clock: systemClock,
        landCounts: landFromRedis(counters, new AccountStore(pool)),
        ...(onAccount ? { onAccount } : {}),
      },
      period,
    );
    out(r, `closed ${r.period}: ${r.accounts} accounts (${r.closed} new statements, ${r.adjusted} adjusted, ${r.unchanged} unchanged)`);
  } finally {
    closeRedis();
  }
}

function format(values: BillingCommand['values']): StatementFormat {
  const f = values.format ?? 'json';
  if (!(STATEMENT_FORMATS as readonly string[]).includes(f))
    throw new AppError('VALIDATION_ERROR', `--format must be one of ${STATEMENT_FORMATS.join(', ')} (got ${JSON.stringify(f)})`);
  return f as StatementFormat;
}

async function verify({ values, pool, out }: BillingCommand): Promise<void> {
  const r = await verifyPeriod(new StatementStore(pool), requirePeriod(values.period));
  if (r.statements === 0 && r.mismatches.length === 0)
    throw new AppError('NOT_FOUND', `no statements for ${r.period}: the period is not closed`);
  if (r.mismatches.length > 0) {
    const lines = r.mismatches.map(
      (m) => `${r.period} ${m.accountId}: statement ${m.statementRequests ?? 'missing'}, stored daily counts ${m.storedRequests} requests`,
    );
    throw new AppError('VALIDATION_ERROR', `billing verify failed: ${lines.join('; ')}`);
  }
  out(r, `verified ${r.period}: ${r.statements} statements equal the stored daily counts`);
}

/** Runs `billing <action>`; false when the action is unknown. */
export async function billingCommand(action: string | undefined, command: BillingCommand): Promise<boolean> {
  switch (action) {
    case 'close':
      await close(command);
      return true;
    case 'statements': {
      const f = format(command.values);
      const list = await new StatementStore(command.pool).list({ period: requirePeriod(command.values.period).period });
      command.io.stdout.write(f === 'json' ? `${renderStatements(list, f)}\n` : renderStatements(list, f));
      return true;
    }
    case 'verify':
      await verify(command);
      return true;
    default:
      return false;
  }
}
