import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `npm pack` of @fcd/client and @fcd/webhook-verify gives tarballs a customer can install: each
 * holds its built JavaScript and type declarations (no tests), installs into an empty folder (the
 * client's one dependency, openapi-fetch, from the registry or npm's cache; the verification package
 * with `--offline`, as it has none), and imports in Node and type-checks under `nodenext`.
 */

const run = promisify(execFile);
const NPM_ENV = { ...process.env, NPM_CONFIG_UPDATE_NOTIFIER: 'false', NPM_CONFIG_FUND: 'false', NPM_CONFIG_AUDIT: 'false' };
const npm = (args: string[], cwd: string) => run('npm', args, { cwd, env: NPM_ENV, maxBuffer: 16 * 1024 * 1024 });

let dir: string;
const tarballs = { client: '', verify: '' };
const packed: Record<'client' | 'verify', string[]> = { client: [], verify: [] };

async function pack(pkg: 'client' | 'webhook-verify'): Promise<{ filename: string; files: string[] }> {
  // prepack builds dist/ (tsc) first, so the tarball never holds a stale build.
  const { stdout } = await npm(['pack', '--json', '--pack-destination', join(dir, 'tarballs')], resolve(repoRoot, 'libs', pkg));
  const [info] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>;
  return { filename: join(dir, 'tarballs', info?.filename ?? ''), files: (info?.files ?? []).map((f) => f.path).sort() };
}

const PLACEHOLDERS: Record<string, string> = {
  fcd: "declare const fcd: import('@fcd/client').FcdClient;",
  save: 'declare const save: (rows: unknown[]) => Promise<void>;',
  id: 'declare const id: string;',
  baseUrl: 'declare const baseUrl: string;',
  apiKey: 'declare const apiKey: string;',
};

/** The ```ts code blocks of a Markdown file. */
const tsBlocks = (markdown: string) => [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);

async function consumer(name: string, packageJson: object = {}): Promise<string> {
  const folder = join(dir, name);
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true, type: 'module', ...packageJson }));
  return folder;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fcd-pack-'));
  await mkdir(join(dir, 'tarballs'));
  const verify = await pack('webhook-verify');
  const client = await pack('client');
  tarballs.verify = verify.filename;
  tarballs.client = client.filename;
  packed.verify = verify.files;
  packed.client = client.files;
}, 240_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('packs each package with its built JavaScript, declarations, README and sources, without tests', () => {
    expect(tarballs.verify).toMatch(/fcd-webhook-verify-0\.1\.0\.tgz$/);
    expect(tarballs.client).toMatch(/fcd-client-0\.1\.0\.tgz$/);
    for (const module of ['index', 'receiver', 'signature', 'standard']) {
      expect(packed.verify).toEqual(expect.arrayContaining([`dist/${module}.js`, `dist/${module}.d.ts`, `src/${module}.ts`]));
    }
    for (const module of ['index', 'client', 'errors', 'rate-limit', 'retry', 'webhooks', 'generated/openapi']) {
      expect(packed.client).toEqual(expect.arrayContaining([`dist/${module}.js`, `dist/${module}.d.ts`, `src/${module}.ts`]));
    }
    for (const files of [packed.verify, packed.client]) {
      expect(files).toEqual(expect.arrayContaining(['README.md', 'package.json']));
      expect(files.filter((f) => f.includes('.test.'))).toEqual([]);
    }
  });

  it('@fcd/webhook-verify installs offline on its own (no dependencies) and signs and verifies in Node', async () => {
    const folder = await consumer('verify-alone');
    await npm(['install', '--offline', tarballs.verify], folder);
    const script = [
      "import { sign, verifyDelivery, webhookHandler } from '@fcd/webhook-verify';",
      'const body = \'{"id":"evt_1"}\';',
      "const header = sign('whsec_test', body);",
      'console.log(JSON.stringify({ header, ok: verifyDelivery(["whsec_old", "whsec_test"], body, header), bad: verifyDelivery("whsec_x", body, header), handler: typeof webhookHandler }));',
    ].join('\n');
    await writeFile(join(folder, 'check.mjs'), script);
    const { stdout } = await run('node', ['check.mjs'], { cwd: folder });
    expect(JSON.parse(stdout)).toEqual({
      header: `sha256=${createHmac('sha256', 'whsec_test').update('{"id":"evt_1"}').digest('hex')}`,
      ok: true,
      bad: false,
      handler: 'function',
    });
    const installed = JSON.parse(await readFile(join(folder, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(installed.packages).sort()).toEqual(['', 'node_modules/@fcd/webhook-verify']);
  }, 120_000);

  it('@fcd/client installs with openapi-fetch, imports in Node (with /webhooks) and retries through an injected fetch', async () => {
    const folder = await consumer('client-app');
    await npm(['install', '--prefer-offline', tarballs.client, tarballs.verify], folder);
    const script = `
import { createClient, RateLimitError, FcdApiError } from '@fcd/client';
import * as hooks from '@fcd/client/webhooks';
import { sign } from '@fcd/webhook-verify';
const sent = [];
const waits = [];
const answers = [
  [503, { error: { code: 'SERVICE_UNAVAILABLE', message: 'down' } }, { 'retry-after': '1' }],
  [200, { data: { tier: 'pro' } }, { 'x-ratelimit-limit': '25000', 'x-ratelimit-remaining': '24999', 'x-ratelimit-reset': '2026-11-26T00:00:00.000Z' }],
  [429, { error: { code: 'RATE_LIMIT_EXCEEDED', message: 'over', details: { limit: 100, remaining: 0, resets_at: '2026-11-26T00:00:00.000Z' } } }, { 'retry-after': '3600' }],
];
const fcd = createClient({
  baseUrl: 'http://api.test',
  apiKey: 'fcd_key',
  sleep: async (ms) => { waits.push(ms); },
  fetch: async (request) => {
    sent.push([request.method, request.url, request.headers.get('x-api-key')]);
    const [status, body, headers] = answers[sent.length - 1];
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
  },
});
const usage = await fcd.GET('/v1/account/usage');
const error = await fcd.GET('/v1/account/usage').catch((e) => e);
console.log(JSON.stringify({
  tier: usage.data.data.tier,
  remaining: usage.rateLimit.remaining,
  sent,
  waits,
  rateLimited: error instanceof RateLimitError && error instanceof FcdApiError,
  code: error.code,
  retryAfter: error.retryAfter,
  sameVerify: hooks.sign === sign,
}));
`;
    await writeFile(join(folder, 'check.mjs'), script);
    const { stdout } = await run('node', ['check.mjs'], { cwd: folder });
    expect(JSON.parse(stdout)).toEqual({
      tier: 'pro',
      remaining: 24_999,
      sent: [
        ['GET', 'http://api.test/v1/account/usage', 'fcd_key'],
        ['GET', 'http://api.test/v1/account/usage', 'fcd_key'],
        ['GET', 'http://api.test/v1/account/usage', 'fcd_key'],
      ],
      waits: [1000],
      rateLimited: true,
      code: 'RATE_LIMIT_EXCEEDED',
      retryAfter: 3600,
      sameVerify: true,
    });
    const installed = JSON.parse(await readFile(join(folder, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string }>;
    };
    expect(installed.packages['node_modules/openapi-fetch']?.version).toBe('0.17.0');

    // The declarations serve a TypeScript project with Node's own module resolution (nodenext):
    // typed paths, bodies and errors; an unknown path is a type error.
    const source = `
import { createClient, RateLimitError } from '@fcd/client';
import { verifyDeliveryHeaders } from '@fcd/client/webhooks';
import { verifyDelivery } from '@fcd/webhook-verify';
const fcd = createClient({ baseUrl: 'https://api.example.test', apiKey: 'fcd_x' });
export async function tier(): Promise<string> {
  const { data } = await fcd.GET('/v1/account/usage');
  return data.data.tier;
}
export async function* txIds(): AsyncGenerator<string> {
  for await (const f of fcd.items('/v1/facilities', { params: { query: { state: 'TX' } } })) yield f.id;
}
export const retryAfter = (e: unknown): number | undefined => (e instanceof RateLimitError ? e.retryAfter : undefined);
// @ts-expect-error not a path of the API
export const nope = () => fcd.GET('/v1/nope');
export const ok: boolean = verifyDelivery('s', 'b', 'sha256=00') || verifyDeliveryHeaders('s', 'b', () => null);
`;
    await writeFile(join(folder, 'consumer.ts'), source);
    // The TypeScript examples of the READMEs compile against the packed packages as written.
    const examples = [
      ...tsBlocks(await readFile(resolve(repoRoot, 'README.md'), 'utf8')),
      ...tsBlocks(await readFile(resolve(repoRoot, 'libs/client/README.md'), 'utf8')),
      ...tsBlocks(await readFile(resolve(repoRoot, 'libs/webhook-verify/README.md'), 'utf8')).filter((b) => b.includes('import ')),
    ];
    expect(examples.length).toBeGreaterThanOrEqual(6);
    const exampleFiles = await Promise.all(
      examples.map(async (block, i) => {
        const file = `example-${i}.ts`;
        // Declarations of what an example uses without defining it (a client made in an earlier block).
        const preamble = Object.entries(PLACEHOLDERS)
          .filter(([name]) => new RegExp(`\\b${name}\\b`).test(block) && !new RegExp(`\\b(const|let|function) ${name}\\b`).test(block))
          .map(([, declaration]) => declaration)
          .join('\n');
        await writeFile(join(folder, file), `${preamble}\n${block}\nexport {};\n`);
        return file;
      }),
    );
    const tsc = resolve(repoRoot, 'node_modules/typescript/bin/tsc');
    const args = ['--noEmit', '--strict', '--skipLibCheck', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022'];
    const types = ['--types', 'node', '--typeRoots', resolve(repoRoot, 'node_modules/@types')];
    const checked = await run('node', [tsc, ...args, ...types, 'consumer.ts', ...exampleFiles], { cwd: folder }).then(
      () => 'ok',
      (e: { stdout?: string }) => e.stdout ?? String(e),
    );
    expect(checked).toBe('ok');
  }, 240_000);
});
