import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayAccounts } from './gateway-account';
import { baseFastifyOptions, installHttpConventions } from './http';
import { INTERNAL_AUTH_HEADER, InternalAuth } from './internal-auth';
import { createLogger } from './logger';

const auth = new InternalAuth('gateway-account-test-secret-of-32+chars');
let app: FastifyInstance;

/** The header the gateway would send for this tier, signed for `audience`, GET and `path`. */
const signed = (tier: string, tier_rank: number, path: string, audience = 'facility') =>
  auth.sign({ account_id: `acct_${tier}`, tier, tier_rank }, { audience, method: 'GET', path });

beforeAll(async () => {
  app = Fastify(baseFastifyOptions(createLogger({ service: 'gateway-account-test', level: 'silent' })));
  installHttpConventions(app);
  const accounts = gatewayAccounts(auth, 'facility');
  await app.register(async (scope) => {
    scope.addHook('onRequest', accounts.verify);
    scope.get('/open', async (request) => ({ claims: accounts.claims(request) }));
    await scope.register(async (pro) => {
      pro.addHook('onRequest', accounts.requirePro('Bulk exports'));
      pro.get('/pro', async (request) => ({ account_id: accounts.claims(request).account_id }));
    });
  });
  // Outside the verified scope: no claims, so 401 (a route that forgot the hook fails closed).
  app.get('/unverified', async (request) => accounts.claims(request));
  await app.ready();
});

afterAll(() => app.close());

describe('gatewayAccounts', () => {
  it('verify: 401 without the header, or with one signed for another audience or path', async () => {
    for (const headers of [
      {},
      { [INTERNAL_AUTH_HEADER]: signed('pro', 1, '/open', 'webhook') },
      { [INTERNAL_AUTH_HEADER]: signed('pro', 1, '/pro') },
    ]) {
      const res = await app.inject({ method: 'GET', url: '/open', headers });
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
  });

  it('verify then claims: the verified claims of the request, whatever its tier', async () => {
    const res = await app.inject({ method: 'GET', url: '/open', headers: { [INTERNAL_AUTH_HEADER]: signed('free', 0, '/open') } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ claims: { account_id: 'acct_free', tier: 'free', tier_rank: 0 } });
  });

  it('requirePro: 403 FORBIDDEN with required_tier below Pro, the route for Pro', async () => {
    const free = await app.inject({ method: 'GET', url: '/pro', headers: { [INTERNAL_AUTH_HEADER]: signed('free', 0, '/pro') } });
    expect(free.statusCode).toBe(403);
    expect(free.json()).toEqual({
      error: {
        code: 'FORBIDDEN',
        message: 'Bulk exports are available on the Pro tier and above. Upgrade the account to use them.',
        details: { required_tier: 'pro', tier: 'free' },
      },
    });
    const pro = await app.inject({ method: 'GET', url: '/pro', headers: { [INTERNAL_AUTH_HEADER]: signed('pro', 1, '/pro') } });
    expect(pro.statusCode).toBe(200);
    expect(pro.json()).toEqual({ account_id: 'acct_pro' });
  });

  it('claims: 401 for a request verify did not pass', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/unverified',
      headers: { [INTERNAL_AUTH_HEADER]: signed('pro', 1, '/unverified') },
    });
    expect(res.statusCode).toBe(401);
  });
});
