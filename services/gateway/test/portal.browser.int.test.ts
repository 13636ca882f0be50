import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  type ApiStack,
  eventually,
  type ServiceProcess,
  startApiStack,
  startService,
  TEST_USAGE_GRPC_SECRET,
  type TestAccount,
  TestCertificates,
  testUrls,
  uniqueName,
  violationRow,
} from '@fcd/testing';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PORTAL_CSP } from '../src/portal/static';
import {
  axeFindings,
  CHROMIUM,
  CHROMIUM_ARGS,
  consoleErrors,
  focused,
  HookReceiver,
  screenshot,
  signedWith,
  WIDTHS,
  widths,
} from './portal-browser';

/**
 * The customer portal (docs/portal.md) in headless Chromium, as a new customer uses it, against
 * the whole system on loopback (gateway, usage, facility, webhook service, dispatcher) and an HTTPS
 * receiver in this test. Each step takes a screenshot (.run/portal-screens/) and asserts what the
 * page shows: 1. an operator-minted link signs in, and the same link a second time is refused;
 * 2. usage with the 30-day chart; 3. a key created (keyboard only) and used from this test;
 * 4. a webhook to the receiver, edited, and a test event sent; 5. the delivery in the log with its
 * attempt, retried; 6. the key revoked. Then every page at 1280 and 390 px: axe-core finds nothing
 * serious or critical, nothing scrolls sideways, and no page logged a console error.
 */

const stream = uniqueName('PORTAL_UI').toUpperCase();
const SECRET_KEY = randomBytes(32).toString('base64');
const today = new Date().toISOString().slice(0, 10);

let certs: TestCertificates;
let receiver: HookReceiver;
let stack: ApiStack;
let dispatcher: ServiceProcess | undefined;
let gateway: string;
let account: TestAccount;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let errors: string[];
const external: string[] = [];
const assets = new Set<string>();
let link: string;
let newKey: string;
let webhookSecret: string;
let webhookId: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install it with \`bash scripts/browser.sh\` (apt-get install -y chromium)`);
  }
  certs = new TestCertificates();
  receiver = new HookReceiver(certs);
  await receiver.start();
  // The receiver is on loopback: this stack allows private destinations in the API and the dispatcher.
  stack = await startApiStack({
    label: 'portal_ui',
    webhookSecretKey: SECRET_KEY,
    eventsStream: stream,
    webhookEnv: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  gateway = stack.gateway;
  dispatcher = await startService('dispatcher', {
    DATABASE_URL: stack.db.url,
    ...stack.db.env,
    NATS_URL: testUrls.nats,
    EVENTS_STREAM: stream,
    EVENTS_SUBJECT_PREFIX: stream.toLowerCase(),
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DISPATCHER_CONSUMER: 'portal-ui',
    WEBHOOK_SECRET_KEY: SECRET_KEY,
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    NODE_EXTRA_CA_CERTS: certs.certFile,
    USAGE_GRPC_ADDRESS: `127.0.0.1:${stack.usageEnv.GRPC_PORT}`,
    USAGE_GRPC_SECRET: TEST_USAGE_GRPC_SECRET,
  });
  // The operator's side: a Pro account with its first key (which the customer never sees here).
  account = await stack.createAccount('pro');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  // Nothing may leave the gateway's origin (the receiver is reached by the dispatcher, not the page).
  await context.route(
    (url) => url.origin !== gateway,
    (route) => {
      external.push(route.request().url());
      return route.abort();
    },
  );
  context.on('request', (request) => {
    if (request.url().startsWith(`${gateway}/portal/assets/`)) assets.add(request.url());
  });
  page = await context.newPage();
  errors = consoleErrors(page);
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await dispatcher?.stop();
  await stack?.stop();
  await receiver?.close();
  certs?.remove();
});

/** The API as the test calls it, with a key. */
async function api(path: string, key: string, init: { method?: string; body?: unknown } = {}) {
  const res = await fetch(`${gateway}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': key, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as any) : undefined };
}

async function mintLink(): Promise<string> {
  const minted = (await stack.cli(['accounts', 'portal-link', '--account', account.accountId, '--base-url', gateway])) as any;
  return (minted.data ?? minted).url as string;
}

/** Clicks "Refresh the log" until the delivery log shows `n` attempts of the one delivery. */
async function refreshUntilAttempts(n: number): Promise<void> {
  const delivery = page.getByTestId('delivery');
  await expect
    .poll(
      async () => {
        await page.getByRole('button', { name: 'Refresh the log' }).click();
        return [
          await delivery.count(),
          await delivery.first().getAttribute('data-attempts'),
          await delivery.first().getAttribute('data-status'),
        ];
      },
      { timeout: 30_000, interval: 250 },
    )
    .toEqual([1, String(n), 'succeeded']);
}

describe('a new customer in the portal', () => {
  it('1. opens the operator-minted link and is signed in; the same link a second time is refused', async () => {
    link = await mintLink();
    expect(link).toMatch(new RegExp(`^${gateway}/portal/login\\?token=`));
    const response = await page.goto(link);
    expect(response?.status()).toBe(200);
    await page.waitForURL(`${gateway}/portal/usage`);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Usage');
    await expect.poll(() => page.title()).toBe('Usage — Customer portal');
    expect(await page.locator('.account code').textContent()).toBe(account.accountId);
    expect(await page.locator('.tier').textContent()).toBe('pro');
    // The page as served: the strict CSP, no-cache, and only hashed assets of this origin.
    expect(response?.headers()['content-security-policy']).toBe(PORTAL_CSP);
    expect(response?.headers()['cache-control']).toBe('no-cache');
    // Every file it loaded: a hashed asset of the gateway, cached for a year.
    expect([...assets].map((url) => new URL(url).pathname.replace(/\.[A-Z0-9]{8}\./, '.<hash>.')).sort()).toEqual([
      '/portal/assets/main.<hash>.js',
      '/portal/assets/styles.<hash>.css',
    ]);
    for (const url of assets) {
      const asset = await fetch(url);
      expect([asset.status, asset.headers.get('cache-control'), asset.headers.get('x-content-type-options')]).toEqual([
        200,
        'public, max-age=31536000, immutable',
        'nosniff',
      ]);
    }
    const missing = await fetch(`${gateway}/portal/assets/main.AAAAAAAA.js`);
    expect([missing.status, (await missing.json()).error.code]).toEqual([404, 'NOT_FOUND']);
    const cookies = await context.cookies(gateway);
    expect(cookies.map((c) => [c.name, c.httpOnly])).toEqual([['fcd_portal', true]]);
    await screenshot(page, '1a-signed-in-by-link');

    // The same link again, in a browser without the session: refused, and the sign-in form explains.
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const second = await other.newPage();
      const secondErrors = consoleErrors(second);
      await second.goto(link);
      expect(second.url()).toBe(`${gateway}/portal/?error=link`);
      await expect.poll(() => second.getByRole('alert').textContent()).toContain('This sign-in link cannot be used.');
      expect(await second.getByLabel('API key').getAttribute('type')).toBe('password');
      expect(await other.cookies(gateway)).toEqual([]);
      await screenshot(second, '1b-same-link-refused');
      expect(secondErrors).toEqual([]);
    } finally {
      await other.close();
    }
  }, 60_000);

  it('2. sees the period figures and the 30-day chart, drawn from what the API answered', async () => {
    const answered = page.waitForResponse((r) => r.url().startsWith(`${gateway}/v1/account/usage/daily?`));
    await page.reload();
    const daily = (await (await answered).json()).data.days as { date: string; requests: number; included: number; overage: number }[];
    const chart = page.getByTestId('usage-chart');
    await chart.waitFor();
    const days = chart.locator('g.day');
    expect(await days.count()).toBe(30);
    expect(await days.last().getAttribute('data-date')).toBe(today);
    expect(await chart.locator('title').textContent()).toMatch(new RegExp(`^Requests per day, \\d{4}-\\d{2}-\\d{2} to ${today}$`));
    // The table under the chart shows each day the API returned, exactly.
    await page.getByText('The figures of each day').click();
    for (const day of daily) {
      const row = page.getByRole('row', { name: new RegExp(`^${day.date} `) });
      expect(await row.getByRole('cell').allTextContents()).toEqual(
        [day.requests, day.included, day.overage].map((n) => n.toLocaleString('en-US')),
      );
    }
    expect(daily.find((d) => d.date === today)?.requests).toBeGreaterThan(0);
    const usage = await api('/v1/account/usage', account.apiKey);
    expect(await page.getByTestId('period-requests').isVisible()).toBe(true);
    expect(
      await page
        .getByRole('heading', { name: `Billing period ${usage.body.data.billing_period.start} to ${usage.body.data.billing_period.end}` })
        .isVisible(),
    ).toBe(true);
    await screenshot(page, '2-usage-and-chart');
  }, 60_000);

  it("3. creates a key with the keyboard alone in the link's session, sees it once, and the test uses it", async () => {
    // From the top of a freshly loaded page: the skip link, sign out, then the navigation, each with a visible focus ring.
    await page.goto(`${gateway}/portal/usage`);
    await page.getByTestId('usage-chart').waitFor();
    await page.keyboard.press('Tab');
    const order: string[] = [];
    for (let i = 0; i < 6; i++) {
      const now = await focused(page);
      expect(now.visible, now.name).toBe(true);
      expect(now.outline, now.name).toBe('solid 3px');
      order.push(`${now.tag}:${now.name}`);
      if (now.name === 'API keys') break;
      await page.keyboard.press('Tab');
    }
    expect(order).toEqual(['a:Skip to the page', 'button:Sign out', 'a:Usage', 'a:API keys']);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${gateway}/portal/keys`);
    await expect.poll(async () => (await focused(page)).tag).toBe('h1');
    expect(await focused(page)).toMatchObject({ tag: 'h1', name: 'API keys' });
    // The form: each field reached by Tab, named by its label, with the focus ring.
    const fields: string[] = [];
    for (let i = 0; i < 12 && !fields.includes('button:Create key'); i++) {
      await page.keyboard.press('Tab');
      const now = await focused(page);
      expect(now.outline, now.name).toBe('solid 3px');
      fields.push(`${now.tag}:${now.name}`);
      if (now.name === 'Name') await page.keyboard.type('ci');
    }
    expect(fields).toEqual(['input:Name', 'select:Expires', 'button:Create key']);
    await page.keyboard.press('Enter');
    const secret = page.getByTestId('secret');
    await secret.waitFor();
    newKey = (await secret.textContent()) as string;
    expect(newKey).toMatch(/^fcd_/);
    expect(await page.getByRole('status').first().textContent()).toBe('Key ci created.');
    await screenshot(page, '3b-key-shown-once');

    // The key works, from here.
    const used = await api('/v1/account/usage', newKey);
    expect([used.status, used.body.data.tier]).toEqual([200, 'pro']);
    // The browser kept no key: nothing in storage, and once hidden it is gone from the page.
    expect(await page.evaluate(() => JSON.stringify([{ ...localStorage }, { ...sessionStorage }, document.cookie]))).toBe('[{},{},""]');
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    expect(await page.content()).not.toContain(newKey);
    const item = page.getByTestId('key-item').filter({ has: page.getByRole('heading', { name: /^ci / }) });
    await expect.poll(() => item.locator('.badge').textContent()).toBe('live');
    expect(await item.locator('code').textContent()).toBe(newKey.slice(0, 8));
    await screenshot(page, '3c-key-listed');
  }, 60_000);

  it('4. creates a webhook to the local receiver, edits its limits and sends a test event', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: 'Create a webhook' }).waitFor();
    await page.getByLabel('Endpoint URL (https)').fill(receiver.url('/hook'));
    await page.getByLabel('case.new', { exact: true }).check();
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = page.getByTestId('secret');
    await secret.waitFor();
    webhookSecret = (await secret.textContent()) as string;
    expect(webhookSecret).toMatch(/^whsec_/);
    const item = page.getByTestId('webhook-item');
    await expect.poll(() => item.count()).toBe(1);
    expect(await item.textContent()).toContain('violation.new, case.new · every facility');
    await screenshot(page, '4a-webhook-created');

    await item.getByRole('link', { name: receiver.url('/hook') }).click();
    await page.waitForURL(new RegExp(`${gateway}/portal/webhooks/wh_`));
    webhookId = page.url().split('/').pop() as string;
    await page.getByLabel('Most requests open at once (1–64)').fill('4');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Changes saved.').waitFor();
    expect((await api(`/v1/webhooks/${webhookId}`, account.apiKey)).body.data).toMatchObject({
      max_in_flight: 4,
      events: ['violation.new', 'case.new'],
    });

    await page.getByRole('button', { name: 'Send a test event' }).click();
    await expect
      .poll(() => page.getByRole('status').filter({ hasText: 'Test event' }).textContent())
      .toMatch(/^Test event evt_\S+ sent\.$/);
    const arrived = await eventually(
      async () => receiver.requests,
      (r) => r.length === 1,
    );
    const envelope = JSON.parse(arrived[0]?.body ?? '{}');
    expect([arrived[0]?.path, envelope.type, envelope.data.webhook_id]).toEqual(['/hook', 'webhook.test', webhookId]);
    expect(signedWith(webhookSecret, arrived[0])).toBe(true);
    await screenshot(page, '4b-test-event-sent');
  }, 60_000);

  it('5. watches the test event arrive in the delivery log with its attempt, and retries it', async () => {
    await refreshUntilAttempts(1);
    const delivery = page.getByTestId('delivery');
    expect(await delivery.locator('h3').textContent()).toBe('webhook.test succeeded');
    await delivery.getByText(/^Attempts of webhook\.test/).click();
    const attempt = delivery.getByTestId('attempt');
    expect(await attempt.count()).toBe(1);
    expect(await attempt.locator('p').first().textContent()).toMatch(/^Attempt 1 · \S+ \S+ UTC · success · HTTP 200 · \d+ ms$/);
    await attempt.getByText('Request and response of attempt 1').click();
    expect(await attempt.locator('pre').last().textContent()).toBe('received');
    expect(await attempt.locator('pre').first().textContent()).toContain('x-service-signature: sha256=');
    await screenshot(page, '5a-delivery-log');

    await delivery.getByRole('button', { name: /^Retry delivery / }).click();
    await refreshUntilAttempts(2);
    await eventually(
      async () => receiver.requests,
      (r) => r.length === 2,
    );
    expect(receiver.requests.map((r) => [r.path, r.headers['webhook-id']])).toEqual([
      ['/hook', receiver.requests[0]?.headers['webhook-id']],
      ['/hook', receiver.requests[0]?.headers['webhook-id']],
    ]);
    expect(signedWith(webhookSecret, receiver.requests[1])).toBe(true);
    // The attempts stay open across the refresh: now two.
    expect(await attempt.count()).toBe(2);
    await screenshot(page, '5b-delivery-retried');
  }, 90_000);

  it('browses the event log: a violation ingested now is listed', async () => {
    const registryId = `11${Date.now()}`.slice(0, 12);
    expect(
      (
        await stack.ingest({
          facilities: [{ registry_id: registryId, name: 'Acme Smelting', state: 'OH', compliance_status: 'no_violation' }],
        })
      ).status,
    ).toBe(200);
    expect((await stack.ingest({ violations: [violationRow(registryId)] })).status).toBe(200);
    await eventually(
      async () => (await api('/v1/events?type=violation.new', account.apiKey)).body.data.length,
      (n) => n === 1,
    );
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByLabel('Type', { exact: true }).selectOption('violation.new');
    await page.getByRole('button', { name: 'Show events' }).click();
    await expect.poll(() => page.getByTestId('event').count()).toBe(1);
    expect(await page.getByTestId('event').locator('h3').textContent()).toBe('violation.new');
    await screenshot(page, 'events');
  }, 60_000);

  it('6. revokes the key: the page shows it revoked and the API refuses it', async () => {
    await page.getByRole('link', { name: 'API keys' }).click();
    const item = page.getByTestId('key-item').filter({ has: page.getByRole('heading', { name: /^ci / }) });
    await item.getByRole('button', { name: 'Revoke', exact: true }).click();
    await item.getByRole('button', { name: 'Yes, revoke ci', exact: true }).click();
    await expect.poll(() => item.locator('.badge').textContent()).toBe('revoked');
    await screenshot(page, '6-key-revoked');
    await eventually(
      async () => (await api('/v1/account/usage', newKey)).status,
      (status) => status === 401,
    );
    expect((await api('/v1/account/usage', account.apiKey)).status).toBe(200);
    expect(errors).toEqual([]);
  }, 60_000);
  it('renames the first key and rolls it: the new key is shown once, and both work during the overlap', async () => {
    const byName = (name: string) =>
      page.getByTestId('key-item').filter({ has: page.getByRole('heading', { name: new RegExp(`^${name} `) }) });
    const first = byName('default');
    await first.getByRole('button', { name: 'Rename', exact: true }).click();
    await first.getByLabel('New name for default').fill('production');
    await first.getByRole('button', { name: 'Save name' }).click();
    await expect.poll(() => byName('production').count()).toBe(1);
    const production = byName('production');
    await production.getByRole('button', { name: 'Roll', exact: true }).click();
    await production.getByLabel('When the new key is made').selectOption({ label: 'Keep the old key 1 hour' });
    await production.getByRole('button', { name: 'Roll production' }).click();
    const secret = page.getByTestId('secret');
    await secret.waitFor();
    const rolled = (await secret.textContent()) as string;
    expect(rolled).toMatch(/^fcd_/);
    expect(await page.getByRole('status').filter({ hasText: 'rolled' }).textContent()).toMatch(
      /^Key production rolled: the old key works until \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\.$/,
    );
    await expect.poll(() => byName('production').count()).toBe(2);
    await screenshot(page, 'key-renamed-and-rolled');
    expect([(await api('/v1/account/usage', rolled)).status, (await api('/v1/account/usage', account.apiKey)).status]).toEqual([200, 200]);
    expect(errors).toEqual([]);
  }, 60_000);
  it('rotates the webhook secret (the next test event is signed with the new one), counts a recovery window, and deletes another webhook', async () => {
    await page.goto(`${gateway}/portal/webhooks/${webhookId}`);
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const secret = page.getByTestId('secret');
    await secret.waitFor();
    const rotated = (await secret.textContent()) as string;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(webhookSecret);
    await page.getByRole('button', { name: 'Send a test event' }).click();
    const tests = () => receiver.requests.filter((r) => JSON.parse(r.body).type === 'webhook.test');
    await eventually(
      async () => tests().length,
      (n) => n === 3,
    );
    expect([signedWith(rotated, tests()[2]), signedWith(webhookSecret, tests()[2])]).toEqual([true, false]);

    // The violation of the events step reached the receiver: nothing in today's window is missing.
    await eventually(
      async () => receiver.requests.filter((r) => JSON.parse(r.body).type === 'violation.new').length,
      (n) => n === 1,
    );
    await page.getByLabel('From (UTC)').fill(`${today}T00:00`);
    await page.getByRole('button', { name: 'Count events' }).click();
    await expect
      .poll(() => page.getByRole('status').filter({ hasText: 're-delivered' }).textContent())
      .toMatch(new RegExp(`^0 events would be re-delivered, ${today} \\d{2}:\\d{2} UTC to ${today} \\d{2}:\\d{2} UTC\\.$`));
    await screenshot(page, 'webhook-rotated-and-recovery-counted');

    await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
    await page.getByLabel('Endpoint URL (https)').fill(receiver.url('/other'));
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await expect.poll(() => page.getByTestId('webhook-item').count()).toBe(2);
    await page.getByRole('link', { name: receiver.url('/other') }).click();
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('button', { name: 'Yes, delete it' }).click();
    await page.waitForURL(`${gateway}/portal/webhooks`);
    await expect.poll(() => page.getByTestId('webhook-item').allTextContents()).toEqual([expect.stringContaining(receiver.url('/hook'))]);
    expect(errors).toEqual([]);
  }, 60_000);
});

describe('every page at both widths', () => {
  const pages = () => [
    ['usage', '/portal/usage', 'Usage'],
    ['keys', '/portal/keys', 'API keys'],
    ['webhooks', '/portal/webhooks', 'Webhooks'],
    ['webhook', `/portal/webhooks/${webhookId}`, `Webhook ${receiver.url('/hook')}`],
    ['events', '/portal/events', 'Events'],
    ['sign-in', '/portal/?error=link', 'Sign in to the customer portal'],
  ];
  for (const width of WIDTHS) {
    it(`at ${width} px: axe-core finds nothing serious or critical, nothing scrolls sideways, no console error`, async () => {
      await page.setViewportSize({ width, height: 900 });
      for (const [name, path, title] of pages()) {
        await page.goto(`${gateway}${path}`);
        await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), { message: name }).toBe(title);
        await page.waitForLoadState('networkidle');
        // Open every disclosure, so axe sees the attempts, headers and tables too.
        await page.evaluate(() => {
          for (const d of (globalThis as any).document.querySelectorAll('details')) d.open = true;
        });
        expect(await axeFindings(page), `${name} at ${width} px`).toEqual([]);
        const [scrollWidth, innerWidth] = await widths(page);
        expect([name, scrollWidth <= innerWidth, innerWidth]).toEqual([name, true, width]);
        await screenshot(page, `axe-${name}-${width}`);
      }
      expect(errors).toEqual([]);
      expect(external).toEqual([]);
    }, 120_000);
  }
});
