import { type AddressInfo, createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP balancer standing in for a Kubernetes Service (kube-proxy): each new connection
 * goes to the next endpoint in turn (round robin); a connection stays with the endpoint it was
 * given until one side closes it. `remove` takes an endpoint out of the rotation as the endpoints
 * controller does when a pod starts terminating: new connections no longer reach it, the open
 * ones are left alone (conntrack), so a keep-alive client keeps using them until the endpoint
 * closes them.
 */
export class TcpBalancer {
  private readonly endpoints: number[] = [];
  private readonly open = new Map<number, Set<Socket>>();
  private next = 0;

  private constructor(
    private readonly server: Server,
    endpoints: number[],
  ) {
    this.endpoints.push(...endpoints);
  }

  /** Listens on `listenPort` (default: any free port) of 127.0.0.1 in front of the given endpoint ports. */
  static async start(endpoints: number[], listenPort = 0): Promise<TcpBalancer> {
    const server = createServer();
    const balancer = new TcpBalancer(server, endpoints);
    server.on('connection', (c) => balancer.accept(c));
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(listenPort, '127.0.0.1', () => res());
    });
    return balancer;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Endpoint ports new connections go to. */
  get active(): readonly number[] {
    return this.endpoints;
  }

  /** Open connections to an endpoint. */
  connectionsTo(endpoint: number): number {
    return this.open.get(endpoint)?.size ?? 0;
  }

  /** Takes an endpoint out of the rotation: no new connection reaches it. */
  remove(endpoint: number): void {
    const i = this.endpoints.indexOf(endpoint);
    if (i >= 0) this.endpoints.splice(i, 1);
  }

  /** Puts an endpoint (back) into the rotation. */
  add(endpoint: number): void {
    if (!this.endpoints.includes(endpoint)) this.endpoints.push(endpoint);
  }

  async close(): Promise<void> {
    for (const sockets of this.open.values()) for (const s of sockets) s.destroy();
    await new Promise<void>((res) => this.server.close(() => res()));
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.endpoints.length === 0) {
      client.resetAndDestroy();
      return;
    }
    const endpoint = this.endpoints[this.next++ % this.endpoints.length] as number;
    const upstream = createConnection({ host: '127.0.0.1', port: endpoint });
    upstream.on('error', () => undefined);
    const sockets = this.open.get(endpoint) ?? new Set<Socket>();
    this.open.set(endpoint, sockets);
    sockets.add(client);
    // Half-closes pass through (an HTTP server that ends its side after `Connection: close`);
    // a reset on one side resets the other, as a peer's RST would reach the client.
    client.pipe(upstream);
    upstream.pipe(client);
    upstream.on('close', (hadError) => (hadError ? client.resetAndDestroy() : undefined));
    client.on('close', (hadError) => {
      sockets.delete(client);
      if (hadError) upstream.resetAndDestroy();
      else upstream.destroy();
    });
  }
}
