import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, createPool, migrate, type Pool } from '@fcd/service-kit';
import { createTestDatabase, type TestDatabase, testUrls } from '@fcd/testing';
import { SecretBox, SubscriptionStore, WEBHOOK_SCHEMA, webhookMigrations } from '@fcd/webhooks';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

export const SECRET_KEY = randomBytes(32).toString('base64');
export const secretBox = SecretBox.fromEnv(SECRET_KEY);
export const silentLogger = createLogger({ service: 'dispatcher-test', level: 'silent' });

/** A self-signed certificate for localhost, 127.0.0.1 and any extra DNS names, made with the openssl CLI. */
export function testCertificate(extraNames: string[] = []): { certFile: string; cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dispatcher-cert-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      `subjectAltName=${['DNS:localhost', 'IP:127.0.0.1', ...extraNames.map((n) => `DNS:${n}`)].join(',')}`,
    ],
    { stdio: 'ignore' },
  );
  return { certFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
}

export interface Received {
  path: string;
  at: number;
  headers: Record<string, string>;
  body: string;
}

/** How the receiver answers one request: a status, a status after a delay (and with headers), or 'hang' (never answers). */
export type Behaviour = (
  r: Received,
  countForPath: number,
) => number | { status: number; delayMs: number; headers?: Record<string, string> } | 'hang';

/** A real HTTPS receiver recording every request; behaviour per path. */
export class Receiver {
  readonly requests: Received[] = [];
  readonly behaviours = new Map<string, Behaviour>();
  private server: Server;
  port = 0;

  constructor(tls: { cert: string; key: string }) {
    this.server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const r: Received = {
          path: req.url ?? '',
          at: Date.now(),
          headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])),
          body: Buffer.concat(chunks).toString('utf8'),
        };
        this.requests.push(r);
        const count = this.requests.filter((x) => x.path === r.path).length;
        const answer = (this.behaviours.get(r.path) ?? (() => 204))(r, count);
        if (answer === 'hang') return;
        if (typeof answer === 'number') res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
        else setTimeout(() => res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers }).end('ok'), answer.delayMs);
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  url(path: string): string {
    return `https://127.0.0.1:${this.port}${path}`;
  }

  at(path: string): Received[] {
    return this.requests.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

export interface TestDb {
  database: TestDatabase;
  pool: Pool;
  subscriptions: SubscriptionStore;
}

export async function setupDb(label: string): Promise<TestDb> {
  const database = await createTestDatabase(label);
  const pool = createPool({ connectionString: database.url, applicationName: 'dispatcher-test', logger: silentLogger });
  await migrate(pool, WEBHOOK_SCHEMA, webhookMigrations);
  return { database, pool, subscriptions: new SubscriptionStore(pool, secretBox) };
}

export async function teardownDb(db: TestDb | undefined): Promise<void> {
  if (!db) return;
  await db.pool.end();
  await db.database.drop();
}

export interface NewSub {
  url: string;
  /** Default `acct_test` (an account the usage service does not know). */
  account_id?: string;
  events?: string[];
  facility_ids?: string[] | null;
}

/** Creates a subscription straight in the store (the API's URL checks are the webhook service's tests). */
export async function subscribe(db: TestDb, input: NewSub): Promise<{ id: string; secret: string }> {
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  const created = await db.subscriptions.create(
    {
      id: `wh_${randomUUID()}`,
      account_id: input.account_id ?? 'acct_test',
      url: input.url,
      events: input.events ?? ['violation.new'],
      facility_ids: input.facility_ids === undefined ? null : input.facility_ids,
      secret,
      now: Date.now(),
    },
    10_000,
  );
  return { id: created.id, secret };
}

export function violationEvent(facilityId: string, extra: Record<string, unknown> = {}) {
  const id = randomUUID();
  return {
    id: `evt_${randomUUID()}`,
    type: 'violation.new',
    created_at: new Date().toISOString(),
    data: {
      violation: {
        id,
        facility_id: facilityId,
        facility_name: 'Acme Smelting',
        program: 'CAA',
        violation_type: 'emissions_exceedance',
        violation_date: '2026-11-20',
        severity: 'high',
        description: 'Opacity above limit',
        resolved_date: null,
        ...extra,
      },
    },
  };
}

export function caseEvent(facilityIds: string[], type: 'case.new' | 'case.updated' = 'case.new') {
  return {
    id: `evt_${randomUUID()}`,
    type,
    created_at: new Date().toISOString(),
    data: {
      case: {
        id: randomUUID(),
        case_number: 'CAA-2026-0001',
        case_type: 'civil',
        status: 'filed',
        facility_ids: facilityIds,
      },
    },
  };
}

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  prefix: string;
  publish(event: { id: string; type: string }, options?: { msgId?: boolean }): Promise<void>;
  close(): Promise<void>;
}

/** Publishes envelopes the way the facility relay does (subject `<prefix>.<type>`, Nats-Msg-Id = event id). */
export async function openBus(stream: string, url = testUrls.nats): Promise<Bus> {
  const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const prefix = stream.toLowerCase();
  return {
    nc,
    js,
    jsm,
    stream,
    prefix,
    async publish(event, options = {}) {
      await js.publish(`${prefix}.${event.type}`, JSON.stringify(event), options.msgId === false ? {} : { msgID: event.id });
    },
    async close() {
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
    },
  };
}

export async function attemptsOf(db: TestDb, subscriptionId: string) {
  const { rows } = await db.pool.query<{
    delivery_id: string;
    attempt: number;
    started_at: Date;
    outcome: string;
    response_status: number | null;
    error: string | null;
    duration_ms: number;
  }>(
    `SELECT a.* FROM webhook.delivery_attempts a JOIN webhook.deliveries d ON d.id = a.delivery_id
      WHERE d.subscription_id = $1 ORDER BY a.started_at`,
    [subscriptionId],
  );
  return rows;
}

export async function deliveriesOf(db: TestDb, subscriptionId: string) {
  const { rows } = await db.pool.query<{ id: string; event_id: string; status: string; attempt_count: number }>(
    'SELECT id, event_id, status, attempt_count FROM webhook.deliveries WHERE subscription_id = $1 ORDER BY created_at',
    [subscriptionId],
  );
  return rows;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A private JetStream server the tests stop and restart (@fcd/testing). */
export { PrivateNats } from '@fcd/testing';
