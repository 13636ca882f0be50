import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { HistoryWriter, ReceiptRecord } from './history';

/** How a receiver answers: mostly 2xx; sometimes 500, 429 with Retry-After, a hang past the dispatcher's timeout, or slowly. */
type Answer = { status: number; delayMs: number; headers?: Record<string, string> } | 'hang';

function drawAnswer(random: () => number): Answer {
  const r = random();
  if (r < 0.05) return { status: 500, delayMs: 0 };
  if (r < 0.09) return { status: 429, delayMs: 0, headers: { 'retry-after': '1' } };
  if (r < 0.1) return 'hang';
  if (r < 0.15) return { status: 200, delayMs: 300 + Math.round(random() * 1_500) };
  return { status: 204, delayMs: 0 };
}

/**
 * The subscriptions' receivers: one HTTPS server, a path per subscription (`/r/<token>`, the token
 * made before the subscription exists, so a delivery that arrives before the create's answer is
 * kept until its id is known). Every request is written to the history as it arrives.
 */
export class Receivers {
  private readonly server: Server;
  private readonly subOf = new Map<string, string>();
  private readonly waiting = new Map<string, Array<Omit<ReceiptRecord, 'sub'>>>();
  received = 0;

  constructor(
    tls: { cert: string; key: string },
    private readonly history: HistoryWriter,
    private readonly random: () => number,
  ) {
    this.server = createServer({ cert: tls.cert, key: tls.key, keepAliveTimeout: 30_000 }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const answer = drawAnswer(this.random);
        const token = (req.url ?? '').replace(/^\/r\//, '');
        let event = '';
        try {
          event = String((JSON.parse(body) as { id?: unknown }).id ?? '');
        } catch {
          // not JSON: the checker reports it (no event id)
        }
        this.record(token, {
          k: 'recv',
          t: Date.now(),
          webhookId: String(req.headers['webhook-id'] ?? ''),
          timestamp: String(req.headers['webhook-timestamp'] ?? ''),
          signature: String(req.headers['webhook-signature'] ?? ''),
          event,
          body,
          answer: answer === 'hang' ? 'timeout' : answer.status,
        });
        // A hang: never answered; the dispatcher's timeout ends it (its socket is closed then).
        if (answer === 'hang') return;
        setTimeout(() => res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers }).end('ok'), answer.delayMs);
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  url(token: string): string {
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}/r/${token}`;
  }

  /** The subscription behind a token is known: its receipts so far are written. */
  bind(token: string, sub: string): void {
    this.subOf.set(token, sub);
    for (const r of this.waiting.get(token) ?? []) this.history.write({ ...r, sub });
    this.waiting.delete(token);
  }

  /** Receipts whose subscription never became known (a create whose answer was lost): written under `unbound:<token>`. */
  flushUnbound(): void {
    for (const [token, receipts] of this.waiting) for (const r of receipts) this.history.write({ ...r, sub: `unbound:${token}` });
    this.waiting.clear();
  }

  private record(token: string, r: Omit<ReceiptRecord, 'sub'>): void {
    this.received++;
    const sub = this.subOf.get(token);
    if (sub) this.history.write({ ...r, sub });
    else this.waiting.set(token, [...(this.waiting.get(token) ?? []), r]);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}
