import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP forwarder standing in for a Kubernetes Service: each new connection goes to the
 * endpoint `target()` names when it arrives, and stays with it. As through kube-proxy, a connection
 * is one connection end to end: half-closes pass through, and once either leg is closed the other
 * is closed too. Piping alone does not do that: when the endpoint closes its leg, the pipe ends the
 * client's write side and unpipes it, which leaves the client's leg paused and half-open; a peer
 * that keeps its side open (HTTP/2) and writes once more (a GOAWAY, a request it had queued) fills
 * a buffer nobody reads, so its end is never seen, the leg never closes and `server.close` never
 * returns. `close` also ends the legs still open, so it never waits on a peer.
 */
export class TcpForwarder {
  private readonly legs = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly target: () => number,
  ) {
    server.on('connection', (client) => this.forward(client));
  }

  /** Listens on `port` (default: any free port) of 127.0.0.1. */
  static async start(target: () => number, port = 0): Promise<TcpForwarder> {
    const forwarder = new TcpForwarder(createServer(), target);
    await new Promise<void>((resolve, reject) => {
      forwarder.server.once('error', reject);
      forwarder.server.listen(port, '127.0.0.1', () => resolve());
    });
    return forwarder;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Sockets (client and endpoint legs) not closed yet. */
  get openSockets(): number {
    return this.legs.size;
  }

  /** Stops accepting, ends every leg still open and resolves once they and the server have closed. */
  async close(): Promise<void> {
    const serverClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const legsClosed = [...this.legs].map((leg) => new Promise<void>((resolve) => leg.once('close', () => resolve())));
    for (const leg of this.legs) leg.destroy();
    await Promise.all([serverClosed, ...legsClosed]);
  }

  private forward(client: Socket): void {
    const upstream = connect(this.target(), '127.0.0.1');
    for (const [leg, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.legs.add(leg);
      leg.on('error', () => other.destroy());
      leg.on('close', () => {
        this.legs.delete(leg);
        other.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  }
}
