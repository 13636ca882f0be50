import { type AddressInfo, createConnection, createServer, type Server, type Socket } from 'node:net';

export type FaultMode = 'pass' | 'blackhole';

/**
 * A small TCP fault proxy in front of any backend (Postgres, Redis, NATS):
 * it forwards bytes both ways and can add latency, drop every open
 * connection, or black-hole traffic (connections are accepted and kept open,
 * nothing is forwarded in either direction, like a dead network path).
 */
export class FaultProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private mode: FaultMode = 'pass';
  private latencyMs = 0;

  private constructor(
    private readonly server: Server,
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  /** Listens on a free port of 127.0.0.1 (or `listenPort`) and forwards to target. */
  static async start(target: { host?: string; port: number }, listenPort = 0): Promise<FaultProxy> {
    const server = createServer();
    const proxy = new FaultProxy(server, target.host ?? '127.0.0.1', target.port);
    server.on('connection', (c) => proxy.accept(c));
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(listenPort, '127.0.0.1', () => res());
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Number of open client connections. */
  get connections(): number {
    return this.pairs.size;
  }

  /** Adds a delay to every chunk forwarded in either direction (0 = none). */
  setLatency(ms: number): void {
    this.latencyMs = ms;
  }

  /** Black-holes traffic: new and open connections stay open, nothing goes through. */
  blackhole(): void {
    this.mode = 'blackhole';
  }

  /** Ends the black hole; open connections (whose bytes were dropped) are reset, new ones pass. */
  heal(): void {
    if (this.mode === 'blackhole') this.dropAll();
    this.mode = 'pass';
  }

  /** Resets every open connection (both sides), like a crashed peer or a cut path. */
  dropAll(): void {
    for (const p of [...this.pairs]) {
      p.client.resetAndDestroy();
      p.upstream.resetAndDestroy();
      this.pairs.delete(p);
    }
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((res) => this.server.close(() => res()));
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
    upstream.on('error', () => undefined);
    const pair = { client, upstream };
    this.pairs.add(pair);
    const close = () => {
      if (!this.pairs.delete(pair)) return;
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
    this.pipe(client, upstream);
    this.pipe(upstream, client);
  }

  /**
   * Forwards one direction. Delayed chunks wait in a queue in arrival order, each due no earlier
   * than the one before it: when the latency drops (or ends), a new chunk waits for the delayed
   * ones, so bytes are never reordered, as TCP never reorders them. (Scheduling each chunk on its
   * own timer did reorder them at the end of a latency fault, which scrambled Redis's replies.)
   */
  private pipe(from: Socket, to: Socket): void {
    const queue: Array<{ due: number; chunk: Buffer }> = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && (queue[0] as { due: number }).due <= now) {
        const { chunk } = queue.shift() as { chunk: Buffer };
        if (!to.destroyed) to.write(chunk);
      }
      if (queue.length > 0) timer = setTimeout(drain, (queue[0] as { due: number }).due - now);
    };
    from.on('data', (chunk: Buffer) => {
      if (this.mode === 'blackhole') return;
      if (this.latencyMs === 0 && queue.length === 0) {
        to.write(chunk);
        return;
      }
      const last = queue.at(-1)?.due ?? 0;
      queue.push({ due: Math.max(Date.now() + this.latencyMs, last), chunk });
      timer ??= setTimeout(drain, Math.max(0, (queue[0] as { due: number }).due - Date.now()));
    });
    from.on('close', () => {
      if (timer) clearTimeout(timer);
      queue.length = 0;
    });
  }
}
