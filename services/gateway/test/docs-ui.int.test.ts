import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { repoRoot, type Stack, startStack } from '@fcd/testing';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCS_CSP, DOCS_INIT_PATH, SCALAR_BUNDLE_PATH } from '../src/openapi';
import openapi from '../src/openapi/openapi.json';

/**
 * /docs, the API reference (Scalar's bundle served by the gateway), in headless Chromium against a
 * running gateway and usage service: served offline with a strict CSP and nosniff, a favicon; at
 * 1280 px and 390 px no horizontal scroll and every operation listed (screenshots in .run/); the
 * request console sends GET /v1/account/usage with a demo key and shows the 200; "Receiving
 * webhooks" shows every event type and the verification examples; search finds an operation. No
 * request leaves the gateway's origin.
 */

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SUMMARIES = Object.values(openapi.paths).flatMap((item) => Object.values(item).map((op) => (op as { summary: string }).summary));
const WEBHOOK_SUMMARIES = Object.values(openapi.webhooks).map((item) => item.post.summary);

let stack: Stack;
let gateway: string;
let demoKey: string;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install it with \`bash scripts/browser.sh\` (apt-get install -y chromium)`);
  }
  stack = await startStack({ label: 'gateway_docs_ui' });
  gateway = stack.gatewayUrls[0] as string;
  demoKey = (await stack.createAccount('free')).apiKey;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

/** A page on /docs that may reach only the gateway; what it tried elsewhere and its console errors are recorded. */
async function openDocs(width: number, hash = ''): Promise<{ page: Page; external: string[]; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const external: string[] = [];
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  await page.route(
    (url) => url.origin !== gateway,
    (route) => {
      external.push(route.request().url());
      return route.abort();
    },
  );
  const response = await page.goto(`${gateway}/docs${hash}`);
  expect(response?.status()).toBe(200);
  await page.getByRole('heading', { name: 'Facility Compliance Data API' }).first().waitFor({ timeout: 60_000 });
  return { page, external, errors };
}

describe('/docs over HTTP', () => {
  it('serves the page, its scripts and the favicon from the gateway with a strict CSP and nosniff, unauthenticated and not counted', async () => {
    const page = await fetch(`${gateway}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(DOCS_CSP);
    expect(DOCS_CSP).toContain("script-src 'self';");
    expect(DOCS_CSP).toContain("default-src 'none';");
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('x-ratelimit-limit')).toBeNull();
    const html = await page.text();
    expect([...html.matchAll(/<script[^>]*>/g)].map((m) => m[0])).toEqual([
      `<script src="${SCALAR_BUNDLE_PATH}">`,
      `<script src="${DOCS_INIT_PATH}">`,
    ]);
    expect(html).not.toMatch(/https?:\/\//);

    const bundleFile = readFileSync(resolve(repoRoot, 'node_modules/@scalar/api-reference/dist/browser/standalone.js'));
    const plain = await fetch(`${gateway}${SCALAR_BUNDLE_PATH}`, { headers: { 'accept-encoding': 'identity' } });
    expect([plain.status, plain.headers.get('content-type'), plain.headers.get('x-content-type-options')]).toEqual([
      200,
      'text/javascript; charset=utf-8',
      'nosniff',
    ]);
    expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(Buffer.from(await plain.arrayBuffer()).equals(bundleFile)).toBe(true);
    // Compressed for browsers (node's fetch would decode it itself, so read the raw bytes).
    const raw = await new Promise<{ encoding: string | undefined; body: Buffer }>((done, fail) => {
      import('node:http').then(({ get }) =>
        get(`${gateway}${SCALAR_BUNDLE_PATH}`, { headers: { 'accept-encoding': 'gzip, br' } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => done({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }));
        }).on('error', fail),
      );
    });
    expect(raw.encoding).toBe('gzip');
    expect(raw.body.length).toBeLessThan(bundleFile.length / 2);
    expect(gunzipSync(raw.body).equals(bundleFile)).toBe(true);

    const init = await fetch(`${gateway}${DOCS_INIT_PATH}`);
    expect([init.status, init.headers.get('content-type'), init.headers.get('x-content-type-options')]).toEqual([
      200,
      'text/javascript; charset=utf-8',
      'nosniff',
    ]);
    expect(await init.text()).toContain(
      `Scalar.createApiReference('#docs', {"url":"/openapi.json","withDefaultFonts":false,"telemetry":false,`,
    );

    const icon = await fetch(`${gateway}/favicon.ico`);
    expect([icon.status, icon.headers.get('content-type')]).toEqual([200, 'image/x-icon']);
    const bytes = Buffer.from(await icon.arrayBuffer());
    expect(bytes.subarray(0, 8).toString('hex')).toBe('0000010001002020'); // ICO, one image, 32×32
    expect(bytes.length).toBe(6 + 16 + 40 + 32 * 32 * 4 + 128);
  });
});

describe('/docs in headless Chromium', () => {
  for (const width of [1280, 390]) {
    it(`at ${width} px: no horizontal scroll, every operation listed, nothing fetched elsewhere, no CSP error; screenshot .run/docs-${width}.png`, async () => {
      const { page, external, errors } = await openDocs(width);
      try {
        if (width < 1000) await page.getByRole('button', { name: 'Open Menu' }).click();
        for (const summary of SUMMARIES) {
          // The sidebar shows a summary as written; the content renders its Markdown code spans.
          const shown = page
            .getByText(summary)
            .or(page.getByText(summary.replace(/`/g, '')))
            .filter({ visible: true });
          await expect.poll(() => shown.count(), { message: summary, timeout: 20_000 }).toBeGreaterThan(0);
        }
        const [scrollWidth, innerWidth] = await page.evaluate(() => {
          const w = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
          return [w.document.documentElement.scrollWidth, w.innerWidth];
        });
        expect(scrollWidth).toBeLessThanOrEqual(innerWidth);
        expect(innerWidth).toBe(width);
        const dir = resolve(repoRoot, '.run');
        mkdirSync(dir, { recursive: true });
        const file = resolve(dir, `docs-${width}.png`);
        writeFileSync(file, await page.screenshot());
        const png = readFileSync(file);
        expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
        expect(png.readUInt32BE(16)).toBe(width); // IHDR width
        expect(external).toEqual([]);
        expect(errors).toEqual([]);
      } finally {
        await page.close();
      }
    }, 120_000);
  }

  it('the request console sends GET /v1/account/usage with the demo key and shows the 200', async () => {
    const { page, external, errors } = await openDocs(1280, '#tag/account/GET/v1/account/usage');
    try {
      // The operation's own section (Scalar renders sections lazily: scroll it into view first).
      const section = page.locator('[id$="/tag/account/GET/v1/account/usage"]:not([data-sidebar-id])').first();
      await section.scrollIntoViewIfNeeded();
      await section.getByRole('button', { name: 'Test Request' }).first().click();
      await expect
        .poll(() => page.getByText('/v1/account/usage', { exact: true }).filter({ visible: true }).count(), { timeout: 20_000 })
        .toBeGreaterThan(0);
      const keyInput = page.locator('input[id^="scalar-client-"].scalar-password-input').first();
      await keyInput.fill(demoKey);
      const answered = page.waitForResponse((r) => r.url().startsWith(`${gateway}/v1/`), { timeout: 30_000 });
      await page.getByRole('button', { name: 'Send' }).first().click();
      const response = await answered;
      expect(response.url()).toBe(`${gateway}/v1/account/usage`);
      expect(response.status()).toBe(200);
      expect(await response.request().headerValue('x-api-key')).toBe(demoKey);
      expect((await response.json()).data).toMatchObject({ tier: 'free', daily_limit: 100, today: { request_count: 1 } });
      await expect.poll(() => page.getByText('200 OK', { exact: true }).first().isVisible(), { timeout: 20_000 }).toBe(true);
      expect(external).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      writeFileSync(resolve(repoRoot, '.run/docs-console.png'), await page.screenshot());
      await page.close();
    }
  }, 120_000);

  it('"Receiving webhooks": the section, every event type and the JavaScript and Python verification examples', async () => {
    const { page, external, errors } = await openDocs(1280);
    try {
      // The tag's Markdown (scripts/openapi/document.ts) and the webhooks it tags.
      const section = page.locator('[id$="/tag/receiving-webhooks"]:not([data-sidebar-id])').first();
      await section.scrollIntoViewIfNeeded();
      await expect
        .poll(() => section.getByRole('heading', { name: 'Receiving webhooks' }).first().isVisible(), { timeout: 20_000 })
        .toBe(true);
      for (const name of ['Verifying a delivery', 'JavaScript (standardwebhooks)', 'Python (standard library)']) {
        expect(await section.getByRole('heading', { name, exact: true }).first().isVisible(), name).toBe(true);
      }
      for (const line of [
        'export function verifyWebhook(secret, headers, rawBody) {',
        'def verify_webhook(secret: str, headers: dict, raw_body: bytes, now=None) -> bool:',
      ]) {
        expect(await section.getByText(line).first().isVisible(), line).toBe(true);
      }
      expect(WEBHOOK_SUMMARIES).toHaveLength(5);
      for (const summary of WEBHOOK_SUMMARIES) {
        await expect
          .poll(() => page.getByText(summary, { exact: true }).filter({ visible: true }).count(), { message: summary, timeout: 20_000 })
          .toBeGreaterThan(0);
      }
      expect(external).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);

  it('search finds an operation', async () => {
    const { page, errors } = await openDocs(1280);
    try {
      await page
        .getByRole('button', { name: /Search/ })
        .first()
        .click();
      await page.keyboard.type('webhook subscription');
      await expect
        .poll(() => page.getByRole('dialog').getByText('Create a webhook subscription').first().isVisible(), { timeout: 20_000 })
        .toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);
});
