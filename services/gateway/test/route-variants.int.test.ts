import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { InternalAuth } from '@fcd/service-kit';
import { type ApiStack, gatewayEnv, startApiStack, startService, TEST_INTERNAL_AUTH_SECRET } from '@fcd/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Expectation,
  encodeChar,
  inParallel,
  OPERATIONS,
  type Operation,
  type RawAnswer,
  RawClient,
  variantsOf,
} from './route-variants';

/**
 * One authorization decision, on the routed path (docs/api.md, "Path normalisation"): every route of
 * the OpenAPI document, for each tier, under every spelling of its path (each character
 * percent-encoded, upper-case `%XX`, a trailing slash, a doubled slash, `/./`, `%2F`, a full-URL
 * request line) answers as its canonical path does, or with a 4xx, and never with a Pro answer to a
 * Free key. Through a real stack: gateway, usage, facility and webhook services.
 */
type Tier = 'free' | 'pro';
const TIERS: Tier[] = ['free', 'pro'];

let stack: ApiStack;
let client: RawClient;
const keys: Record<Tier, string> = { free: '', pro: '' };
const ids = { facility: '', case: '', webhook: '' };
/** Ids nothing has: the writes of the walk all address them, so the walk changes nothing. */
const absent = { webhook: `wh_${randomUUID()}`, delivery: `dlv_${randomUUID()}`, event: randomUUID() };
const canonical = new Map<string, RawAnswer>();

/** The canonical path the walk sends for an operation: real ids for reads, absent ones for writes. */
function canonicalPath(op: Operation): string {
  const read = op.method === 'GET';
  const values: Record<string, string> = {
    facility_id: ids.facility,
    case_id: ids.case,
    event_id: absent.event,
    webhook_id: read ? ids.webhook : absent.webhook,
    delivery_id: absent.delivery,
  };
  return op.template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] as string);
}

const opKey = (tier: Tier, op: Operation) => `${tier} ${op.method} ${op.template}`;
const errorCode = (a: RawAnswer) => (a.body as { error?: { code?: string } } | undefined)?.error?.code;

/** Why an answer to a spelling is wrong, or undefined when it is right. */
function judge(tier: Tier, op: Operation, expectation: Expectation, answer: RawAnswer): string | undefined {
  const base = canonical.get(opKey(tier, op)) as RawAnswer;
  if (answer.status >= 500) return `a ${answer.status}`;
  if (tier === 'free' && op.proOnly && answer.status < 300) return `a Pro answer (${answer.status}) to Free`;
  switch (expectation) {
    case 'same':
      // A route's own rate (a 429 with Retry-After) may interpose; nothing else differs.
      if (answer.status === 429) return undefined;
      if (answer.status !== base.status) return `${answer.status}, the canonical path ${base.status}`;
      if (answer.status >= 400 && !isDeepStrictEqual(answer.body, base.body)) return `body ${JSON.stringify(answer.body)}`;
      return undefined;
    case 'malformed': {
      const message = (answer.body as { error?: { message?: string } }).error?.message ?? '';
      if (answer.status !== 400 || errorCode(answer) !== 'BAD_REQUEST') return `${answer.status} ${errorCode(answer)}, not 400 BAD_REQUEST`;
      if (!message.startsWith('The request URL is not valid: ')) return `message ${message}`;
      return answer.rateLimited ? 'authenticated (rate-limit headers)' : undefined;
    }
    case 'trailing':
      // Not a route, or a parametric route with an empty last parameter (`/v1/webhooks/`): a 4xx either way.
      if (tier === 'free' && op.proOnly) return errorCode(answer) === 'FORBIDDEN' ? undefined : `${answer.status}, not 403`;
      return answer.status >= 400 && answer.status < 500 && errorCode(answer) ? undefined : `${answer.status}, not a 4xx`;
  }
}

async function usageCount(apiKey: string): Promise<number> {
  const res = await client.send('GET', '/v1/account/usage', apiKey);
  return (res.body as { data: { today: { request_count: number } } }).data.today.request_count;
}

beforeAll(async () => {
  stack = await startApiStack({ label: 'gateway_route_variants', webhookSecretKey: randomBytes(32).toString('base64') });
  client = new RawClient(stack.gateway);
  const ingest = await stack.ingest({
    facilities: [
      { registry_id: '110000000201', name: 'Variant Refinery', state: 'TX', compliance_status: 'violation', programs: ['CAA'] },
      { registry_id: '110000000202', name: 'Variant Mill', state: 'VT', compliance_status: 'no_violation', programs: ['CWA'] },
    ],
    violations: [
      {
        source_id: 'variant-v1',
        registry_id: '110000000201',
        program: 'CAA',
        violation_type: 'Emissions',
        violation_date: '2026-02-01',
        severity: 'significant',
      },
    ],
    cases: [
      {
        case_number: 'VARIANT-1',
        case_type: 'judicial',
        status: 'filed',
        lead_agency: 'EPA',
        filed_date: '2026-03-01',
        registry_ids: ['110000000201'],
      },
    ],
  });
  expect(ingest.status, ingest.text).toBe(200);
  expect(JSON.parse(ingest.text).data.errors, ingest.text).toEqual([]);
  // A Free account whose daily limit the walk cannot exhaust: its tier (rank 0) is what is tested.
  const free = (await stack.cli(['accounts', 'create', '--name', 'variants free', '--tier', 'free', '--daily-limit', '1000000'])) as {
    id: string;
  };
  keys.free = ((await stack.cli(['keys', 'create', '--account', free.id])) as { apiKey: string }).apiKey;
  keys.pro = (await stack.createAccount('pro')).apiKey;
  const facilities = (await client.send('GET', '/v1/facilities?state=TX', keys.pro)).body as { data: Array<{ id: string }> };
  ids.facility = facilities.data[0]?.id ?? '';
  const cases = (await client.send('GET', '/v1/cases', keys.pro)).body as { data: Array<{ id: string }> };
  ids.case = cases.data[0]?.id ?? '';
  const hook = await fetch(`${stack.gateway}/v1/webhooks`, {
    method: 'POST',
    headers: { 'x-api-key': keys.pro, 'content-type': 'application/json' },
    body: JSON.stringify({ url: 'https://93.184.215.14/hook', events: ['violation.new'] }),
  });
  ids.webhook = ((await hook.json()) as { data: { id: string } }).data.id;
  expect(Object.values(ids).every(Boolean), JSON.stringify(ids)).toBe(true);
  for (const tier of TIERS) {
    for (const op of OPERATIONS) canonical.set(opKey(tier, op), await client.send(op.method, canonicalPath(op), keys[tier]));
  }
}, 120_000);

afterAll(async () => {
  await client?.close();
  await stack?.stop();
});

describe('every documented route under every spelling of its path', () => {
  it('the canonical answers: Free gets 403 on Pro-only routes, Pro reads with real ids get 200', () => {
    for (const op of OPERATIONS) {
      const free = canonical.get(opKey('free', op)) as RawAnswer;
      const pro = canonical.get(opKey('pro', op)) as RawAnswer;
      if (op.proOnly) {
        expect(free.body, op.template).toMatchObject({ error: { code: 'FORBIDDEN', details: { required_tier: 'pro', tier: 'free' } } });
      }
      expect(free.status, `free ${op.method} ${op.template}`).toBe(op.proOnly ? 403 : pro.status);
      expect(pro.status, `pro ${op.method} ${op.template}`).toBeLessThan(500);
      if (op.method === 'GET' && !op.template.includes('{event_id}')) expect(pro.status, `pro GET ${op.template}`).toBe(200);
    }
  });

  it('answers each variant as the canonical path, or with the documented 4xx, never a Pro answer to Free', async () => {
    const jobs = TIERS.flatMap((tier) =>
      OPERATIONS.flatMap((op) => variantsOf(canonicalPath(op), stack.gateway).map((variant) => ({ tier, op, variant }))),
    );
    const problems: string[] = [];
    await inParallel(jobs, 8, async ({ tier, op, variant }) => {
      const answer = await client.send(op.method, variant.target, keys[tier]);
      const problem = judge(tier, op, variant.expect, answer);
      if (problem) problems.push(`${tier} ${op.method} ${variant.target} (${variant.name}): ${problem}`);
    });
    expect(jobs.length).toBeGreaterThan(2000);
    expect(problems).toEqual([]);
  }, 60_000);

  it('holds for random spellings too (property)', async () => {
    const twists = ['none', 'fullUrl', 'trailing', 'doubled', 'dot', 'encodedDot', 'dotDot', 'encodedSlash', 'encodedSlashLower'] as const;
    const spelling = fc.record({
      op: fc.constantFrom(...OPERATIONS),
      tier: fc.constantFrom(...TIERS),
      encodings: fc.array(fc.constantFrom('keep', 'lower', 'upper'), { minLength: 120, maxLength: 120 }),
      twist: fc.constantFrom(...twists),
      at: fc.nat(),
    });
    await fc.assert(
      fc.asyncProperty(spelling, async ({ op, tier, encodings, twist, at }) => {
        const path = canonicalPath(op);
        const encoded = [...path]
          .map((c, i) => (c === '/' || encodings[i] === 'keep' ? c : encodeChar(c, encodings[i] === 'upper')))
          .join('');
        const slashes = [...encoded].flatMap((c, i) => (c === '/' ? [i] : []));
        const s = slashes[at % slashes.length] as number;
        const inner = slashes.filter((i) => i > 0);
        const insert = (text: string) => encoded.slice(0, s) + text + encoded.slice(s);
        const replaced = (text: string) =>
          inner.length > 0
            ? encoded.slice(0, inner[at % inner.length]) + text + encoded.slice((inner[at % inner.length] as number) + 1)
            : `${encoded}${text}x`;
        const targets: Record<(typeof twists)[number], [string, Expectation]> = {
          none: [encoded, 'same'],
          fullUrl: [`${stack.gateway}${encoded}`, 'same'],
          trailing: [`${encoded}/`, 'trailing'],
          doubled: [insert('/'), 'malformed'],
          dot: [insert('/.'), 'malformed'],
          encodedDot: [insert('/%2E'), 'malformed'],
          dotDot: [insert('/x/..'), 'malformed'],
          encodedSlash: [replaced('%2F'), 'malformed'],
          encodedSlashLower: [replaced('%2f'), 'malformed'],
        };
        const [target, expectation] = targets[twist];
        const answer = await client.send(op.method, target, keys[tier]);
        expect(judge(tier, op, expectation, answer), `${tier} ${op.method} ${target}`).toBeUndefined();
      }),
      { numRuns: 400 },
    );
  }, 60_000);
});

describe('the reported cases', () => {
  it('GET /v1/%65xports/facilities (and the other exports) with a Free key is 403 FORBIDDEN, counted like the canonical path', async () => {
    const free = await stack.createAccount('free');
    for (const target of ['/v1/%65xports/facilities', '/v1/exports/%76iolations', '/v1/%65%78%70%6F%72%74%73/cases']) {
      const before = await usageCount(free.apiKey);
      const res = await client.send('GET', target, free.apiKey);
      expect(res.status, target).toBe(403);
      expect(res.body).toEqual({
        error: {
          code: 'FORBIDDEN',
          message: 'Bulk exports are available on the Pro tier and above. Upgrade the account to use them.',
          details: { required_tier: 'pro', tier: 'free' },
        },
      });
      expect(res.rateLimited).toBe(true);
      // The 403 and the usage call itself.
      expect(await usageCount(free.apiKey)).toBe(before + 2);
    }
  });

  it('the same spelling with a Pro key streams the same export as the canonical path', async () => {
    const plain = await client.send('GET', '/v1/exports/facilities', keys.pro);
    const spelled = await client.send('GET', '/v1/%65xports/facilities', keys.pro);
    expect(plain.status).toBe(200);
    expect(spelled).toEqual(plain);
    expect(String(plain.body).split('\n').filter(Boolean)).toHaveLength(3);
  });

  it('a full-URL request line and /%76%31/facilities are the canonical request (200), not a 401', async () => {
    const plain = await client.send('GET', '/v1/facilities?state=TX', keys.free);
    expect(plain.status).toBe(200);
    for (const target of [
      `${stack.gateway}/v1/facilities?state=TX`,
      '/%76%31/facilities?state=TX',
      'http://other.example/v1/facilities?state=TX',
    ]) {
      expect(await client.send('GET', target, keys.free), target).toEqual(plain);
    }
  });

  it('a malformed path is 400 BAD_REQUEST before authentication, not counted', async () => {
    const free = await stack.createAccount('free');
    const before = await usageCount(free.apiKey);
    const cases: Array<[string, string]> = [
      ['/v1//exports/facilities', 'the path has an empty segment (//)'],
      ['/v1/./exports/facilities', 'the path has a dot segment (/./ or /../)'],
      ['/v1/webhooks/../exports/facilities', 'the path has a dot segment (/./ or /../)'],
      ['/v1%2Fexports/facilities', 'the path has an encoded slash (%2F)'],
      ['/v1/exports/facilities#x', 'the request target has a fragment (#)'],
    ];
    for (const [target, reason] of cases) {
      const res = await client.send('GET', target, free.apiKey);
      expect(res.status, target).toBe(400);
      expect(res.body).toEqual({ error: { code: 'BAD_REQUEST', message: `The request URL is not valid: ${reason}.` } });
      expect(res.rateLimited, target).toBe(false);
    }
    expect(await usageCount(free.apiKey)).toBe(before + 1);
  });

  it("the facility service's export route refuses a Free claim with 403 FORBIDDEN, and serves a Pro one", async () => {
    const auth = new InternalAuth(TEST_INTERNAL_AUTH_SECRET);
    const path = '/internal/v1/exports/facilities?page_size=1000&format=ndjson';
    const call = (tier: string, tierRank: number) =>
      fetch(`${stack.facilityUrl}${path}`, {
        headers: {
          'x-fcd-account': auth.sign(
            { account_id: randomUUID(), tier, tier_rank: tierRank, request_id: 'req_variants' },
            { audience: 'facility', method: 'GET', path },
          ),
        },
      });
    const refused = await call('free', 0);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({
      error: {
        code: 'FORBIDDEN',
        message: 'Bulk exports are available on the Pro tier and above. Upgrade the account to use them.',
        details: { required_tier: 'pro', tier: 'free' },
      },
    });
    const served = await call('pro', 1);
    expect(served.status).toBe(200);
    expect(served.headers.get('x-export-rows')).toBe('2');
  });
});

describe('what a domain service receives', () => {
  it('the canonical path and query, signed as forwarded, whatever the spelling', async () => {
    // A recording facility service behind a second gateway of the same usage service.
    const auth = new InternalAuth(TEST_INTERNAL_AUTH_SECRET);
    const seen: Array<{ url: string; verified: boolean }> = [];
    const recorder = createServer((req, res) => {
      const target = { audience: 'facility', method: req.method ?? '', path: req.url ?? '' };
      seen.push({ url: req.url ?? '', verified: auth.verify(req.headers['x-fcd-account'], target) !== undefined });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}');
    });
    await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
    const facilityUrl = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
    const gateway = await startService(
      'gateway',
      await gatewayEnv(stack.usageEnv.GRPC_PORT as string, { facilityUrl, webhookUrl: stack.webhookUrl }),
    );
    const origin = `http://127.0.0.1:${(await gateway.waitForLog((l) => l.msg === 'ready')).port as number}`;
    const raw = new RawClient(origin, 1);
    try {
      const id = ids.facility;
      const spelled = [...id].map((c) => (/[a-f]/.test(c) ? encodeChar(c, true) : c)).join('');
      const targets = [
        '/v1/%66acilities?state=TX&q=a%2Fb',
        `${origin}/v1/facilities?state=TX&q=a%2Fb`,
        '/%76%31/facilitie%73?state=TX&q=a%2Fb',
        `/v1/facilities/${spelled}/cases`,
        `http://api.example.com/v1/facilities/${id}/cases`,
      ];
      for (const target of targets) expect((await raw.send('GET', target, keys.free)).status, target).toBe(200);
      const three = Array.from({ length: 3 }, () => ({ url: '/v1/facilities?state=TX&q=a%2Fb', verified: true }));
      const two = Array.from({ length: 2 }, () => ({ url: `/v1/facilities/${id}/cases`, verified: true }));
      expect(seen).toEqual([...three, ...two]);
    } finally {
      await raw.close();
      await gateway.stop();
      await new Promise((resolve) => recorder.close(resolve));
    }
  }, 30_000);
});
