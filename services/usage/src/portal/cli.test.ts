import type { Pool } from '@fcd/service-kit';
import { describe, expect, it } from 'vitest';
import { portalLinkCommand } from './cli';

const noPool = {} as Pool;
const noOut = () => undefined;

describe('usage-cli accounts portal-link', () => {
  it('needs --account', async () => {
    await expect(portalLinkCommand({}, noPool, noOut)).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
      message: '--account is required',
    });
  });

  it('takes only an http(s) --base-url without a query', async () => {
    for (const base of ['api.example.com', 'ftp://api.example.com', 'https://api.example.com/?x=1', 'https://']) {
      await expect(portalLinkCommand({ account: 'acct_x', 'base-url': base }, noPool, noOut)).rejects.toMatchObject({
        code: 'VALIDATION_ERROR',
        message: '--base-url must be an http(s) URL without a query, e.g. https://api.example.com',
      });
    }
  });
});
