import { create } from '@bufbuild/protobuf';
import { createClient } from '@fcd/grpc';
import { GetAccountsRequestSchema, UsageService } from '@fcd/proto';
import type { AccountDirectory } from '../domain/entitlements';

/** Tiers from the usage service's GetAccounts (unary, with a deadline; grpc-js reconnects by itself). */
export class UsageAccountDirectory implements AccountDirectory {
  private readonly client;

  constructor(address: string, callSecret: string, deadlineMs = 2000) {
    this.client = createClient(UsageService, address, { defaultDeadlineMs: deadlineMs, callSecret });
  }

  async ranks(accountIds: readonly string[]): Promise<Map<string, number>> {
    const res = await this.client.unary.getAccounts(create(GetAccountsRequestSchema, { accountIds: [...accountIds] }));
    return new Map(res.accounts.map((a) => [a.accountId, a.tierRank]));
  }

  close(): void {
    this.client.close();
  }
}
