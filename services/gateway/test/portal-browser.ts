import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { resolve } from 'node:path';
import { repoRoot } from '@fcd/testing';
import axe from 'axe-core';
import type { Page } from 'playwright-core';

/** What the portal's browser test (portal.browser.int.test.ts) uses: Chromium, screenshots, axe, a receiver. */

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
export const WIDTHS = [1280, 390] as const;
const SCREENS = resolve(repoRoot, '.run/portal-screens');

/** Writes a full-page screenshot to .run/portal-screens/<name>.png and checks it is a PNG of the page's width. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENS, { recursive: true });
  const file = resolve(SCREENS, `${name}.png`);
  writeFileSync(file, await page.screenshot({ fullPage: true }));
  const png = readFileSync(file);
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') throw new Error(`${file} is not a PNG`);
  if (png.readUInt32BE(16) !== page.viewportSize()?.width) throw new Error(`${file} is not as wide as the page`);
  return file;
}

/**
 * axe-core's serious and critical findings on the page, as `rule: help (selectors)`. The script
 * is evaluated through the DevTools protocol (page.evaluate), which the page's CSP does not govern:
 * the page keeps its real CSP, no bypass, and nothing is added to its DOM.
 */
export async function axeFindings(page: Page): Promise<string[]> {
  await page.evaluate(axe.source);
  const violations = await page.evaluate(async () => {
    const w = globalThis as unknown as {
      axe: {
        run: (
          ctx: unknown,
          opts: unknown,
        ) => Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[] }>;
      };
      document: unknown;
    };
    const result = await w.axe.run(w.document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.targets.join(', ')}`);
}

/** [the document's scroll width, the window's width]: equal when nothing scrolls sideways. */
export async function widths(page: Page): Promise<[number, number]> {
  return page.evaluate(() => {
    const w = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
    return [w.document.documentElement.scrollWidth, w.innerWidth] as [number, number];
  });
}

/** Console errors and uncaught exceptions of a page, as they come. */
export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (error) => errors.push(error.message));
  return errors;
}

/** The focused element: its tag, accessible name (label, text or aria-label) and its outline. */
export async function focused(page: Page): Promise<{ tag: string; name: string; outline: string; visible: boolean }> {
  return page.evaluate(() => {
    const d = (globalThis as unknown as { document: { activeElement: any } }).document;
    const el = d.activeElement;
    const style = (globalThis as unknown as { getComputedStyle: (e: unknown) => any }).getComputedStyle(el);
    const rect = el.getBoundingClientRect();
    const label = el.labels?.[0]?.textContent ?? el.getAttribute('aria-label') ?? el.textContent ?? '';
    return {
      tag: String(el.tagName).toLowerCase(),
      name: String(label).trim().replace(/\s+/g, ' '),
      outline: `${style.outlineStyle} ${style.outlineWidth}`,
      visible: rect.width > 0 && rect.height > 0 && rect.top >= 0 && rect.left >= 0,
    };
  });
}

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** An HTTPS webhook receiver on loopback that answers 200 `received` and keeps every request. */
export class HookReceiver {
  readonly requests: Received[] = [];
  private readonly server: Server;
  port = 0;

  constructor(tls: { certFile: string; keyFile: string }) {
    this.server = createServer({ cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests.push({
          path: req.url ?? '',
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
          body: Buffer.concat(chunks).toString('utf8'),
        });
        res.writeHead(200, { 'content-type': 'text/plain' }).end('received');
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((done) => this.server.listen(0, '127.0.0.1', done));
    const address = this.server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
  }

  url(path: string): string {
    return `https://127.0.0.1:${this.port}${path}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((done) => this.server.close(done));
  }
}

/** The check a receiver writes with node:crypto alone: `X-Service-Signature: sha256=<hex HMAC of the body>`. */
export function signedWith(secret: string, request: Received | undefined): boolean {
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', secret)
      .update(request?.body ?? '')
      .digest('hex')}`,
  );
  const got = Buffer.from(request?.headers['x-service-signature'] ?? '');
  return got.length === expected.length && timingSafeEqual(got, expected);
}
