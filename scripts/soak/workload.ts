import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot, TEST_INGEST_TOKEN, violationRow } from '@fcd/testing';
import pg from 'pg';
import { type Account, call, pick, STATES, type WorkloadContext } from './client';
import { SubscriptionOps } from './subscription-ops';

const run = promisify(execFile);
const FACILITIES = 160;

/** Accounts and keys through the usage CLI on the database (as an operator would make them). */
export async function createAccounts(directUrl: string, free: number, pro: number): Promise<Account[]> {
  const cli = async (args: string[]) => {
    const { stdout } = await run(process.execPath, [resolve(repoRoot, 'services/usage/dist/cli.js'), ...args, '--json'], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: directUrl },
    });
    return JSON.parse(stdout) as { id: string; apiKey: string };
  };
  const one = async (tier: 'free' | 'pro', i: number): Promise<Account> => {
    const account = await cli(['accounts', 'create', '--name', `soak ${tier} ${i}`, '--tier', tier]);
    const key = await cli(['keys', 'create', '--account', account.id]);
    return { account: account.id, apiKey: key.apiKey, tier };
  };
  const tiers = [...Array.from({ length: free }, () => 'free' as const), ...Array.from({ length: pro }, () => 'pro' as const)];
  const accounts: Account[] = [];
  for (let i = 0; i < tiers.length; i += 5) accounts.push(...(await Promise.all(tiers.slice(i, i + 5).map((t, j) => one(t, i + j)))));
  return accounts;
}

/** The facilities the workload reads and writes: ingested once, their ids read back. */
export async function seedFacilities(ctx: WorkloadContext): Promise<Array<{ id: string; registryId: string; state: string }>> {
  const facilities = Array.from({ length: FACILITIES }, (_, i) => ({
    registry_id: `11${String(i).padStart(10, '0')}`,
    name: `Soak Works ${i}`,
    state: STATES[i % STATES.length] as string,
    compliance_status: 'no_violation',
  }));
  const res = await ingest(ctx, { facilities });
  if (res !== 200) throw new Error(`seeding the facilities: ingestion answered ${res}`);
  const client = new pg.Client({ connectionString: ctx.directUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; registry_id: string; state: string }>(
      'SELECT id, registry_id, state FROM facility.facilities WHERE registry_id LIKE $1',
      ['11%'],
    );
    return rows.map((r) => ({ id: r.id, registryId: r.registry_id, state: r.state }));
  } finally {
    await client.end();
  }
}

async function ingest(ctx: WorkloadContext, body: object): Promise<number | null> {
  const { status } = await call(
    ctx,
    { via: 'ingest', method: 'POST', path: '/internal/v1/ingest' },
    `${ctx.facilityUrl}/internal/v1/ingest`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    },
  );
  return status;
}

/** Runs `step` again and again, `everyMs` apart (start to start), until `running()` is false. */
async function loop(running: () => boolean, everyMs: number, step: () => Promise<unknown>): Promise<void> {
  while (running()) {
    const started = Date.now();
    await step();
    await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (Date.now() - started))));
  }
}

export interface Workload {
  stop(): Promise<void>;
}

/** Metered reads, paced ingestion and the subscriptions' lifecycle, all at once until stopped. */
export function startWorkload(
  ctx: WorkloadContext,
  accounts: Account[],
  facilities: Array<{ id: string; registryId: string; state: string }>,
): Workload {
  let on = true;
  const running = () => on;
  const { random } = ctx;
  const read = async () => {
    const a = pick(random, accounts);
    const path = random() < 0.7 ? `/v1/facilities/${pick(random, facilities).id}` : `/v1/facilities?state=${pick(random, STATES)}&limit=5`;
    await call(ctx, { via: 'gateway', method: 'GET', path, account: a.account, tier: a.tier }, `${ctx.gatewayUrl}${path}`, {
      headers: { 'x-api-key': a.apiKey },
    });
  };
  let status = 0;
  const write = async () => {
    const batch = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(random, facilities));
    const changed = random() < 0.2 ? pick(random, facilities) : undefined;
    await ingest(ctx, {
      ...(changed
        ? {
            facilities: [
              {
                registry_id: changed.registryId,
                name: `Soak Works ${changed.registryId}`,
                state: changed.state,
                compliance_status: ['no_violation', 'violation', 'significant_violation'][status++ % 3],
              },
            ],
          }
        : {}),
      violations: batch.map((f) => ({ ...violationRow(f.registryId), source_id: `SOAK-${randomUUID()}` })),
    });
  };
  const ops = new SubscriptionOps(ctx, accounts.filter((a) => a.tier === 'pro').slice(0, 5));
  const loops = [
    ...Array.from({ length: 6 }, () => loop(running, 150, read)),
    loop(running, 400, write),
    loop(running, 2_500, () => ops.step()),
  ];
  return {
    async stop() {
      on = false;
      await Promise.all(loops);
    },
  };
}
