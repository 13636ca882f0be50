import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { eventually } from '@fcd/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpForwarder } from './tcp-forwarder';

const servers: Server[] = [];
const forwarders: TcpForwarder[] = [];

afterEach(async () => {
  await Promise.all(forwarders.splice(0).map((f) => f.close()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** An endpoint that hands each connection it accepts to `onConnection`. */
async function endpoint(onConnection: (s: Socket) => void): Promise<number> {
  const server = createServer(onConnection);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** A client that, like an HTTP/2 client, keeps its side open when the other side ends its own. */
function halfOpenClient(port: number): Socket {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  socket.on('error', () => undefined);
  socket.resume();
  return socket;
}

const ended = (s: Socket) => new Promise<void>((r) => s.once('end', r));
const closed = (s: Socket) => new Promise<void>((r) => s.once('close', r));

describe('TcpForwarder', () => {
  it('closes the client leg once the endpoint has closed its leg, though the client writes after the end', async () => {
    // The endpoint ends its side at once, as a replica that exits; the client writes once more
    // after that end, as a gateway's HTTP/2 session does, and only then ends its side.
    const port = await endpoint((s) => s.end());
    const forwarder = await TcpForwarder.start(() => port);
    forwarders.push(forwarder);
    const client = halfOpenClient(forwarder.port);
    await ended(client);
    await eventually(
      async () => forwarder.openSockets,
      (n) => n === 0,
    );
    client.end('late bytes');
    await closed(client);
    await forwarder.close();
    expect(forwarder.openSockets).toBe(0);
  });

  it('closes the endpoint leg when the client leg closes', async () => {
    const atEndpoint: Socket[] = [];
    const port = await endpoint((s) => atEndpoint.push(s));
    const forwarder = await TcpForwarder.start(() => port);
    forwarders.push(forwarder);
    const client = halfOpenClient(forwarder.port);
    await eventually(
      async () => atEndpoint.length,
      (n) => n === 1,
    );
    const endpointLeg = atEndpoint[0] as Socket;
    endpointLeg.on('error', () => undefined);
    endpointLeg.resume();
    const endpointClosed = closed(endpointLeg);
    client.destroy();
    await endpointClosed;
    await eventually(
      async () => forwarder.openSockets,
      (n) => n === 0,
    );
  });

  it('close() ends the connections still open on both sides and returns', async () => {
    const atEndpoint: Socket[] = [];
    const port = await endpoint((s) => {
      s.on('error', () => undefined);
      s.resume();
      atEndpoint.push(s);
    });
    const forwarder = await TcpForwarder.start(() => port);
    const client = halfOpenClient(forwarder.port);
    await eventually(
      async () => atEndpoint.length,
      (n) => n === 1,
    );
    // The client keeps its own side open (allowHalfOpen), so it sees the end; the endpoint closes.
    const bothEnded = Promise.all([ended(client), closed(atEndpoint[0] as Socket)]);
    await forwarder.close();
    await bothEnded;
    client.destroy();
    expect(forwarder.openSockets).toBe(0);
  });

  it('sends each new connection to the endpoint named when it arrives', async () => {
    const seen: string[] = [];
    const a = await endpoint((s) => s.end('a'));
    const b = await endpoint((s) => s.end('b'));
    const endpoints = [a, b];
    const forwarder = await TcpForwarder.start(() => endpoints[0] as number);
    forwarders.push(forwarder);
    const read = async () => {
      const s = connect(forwarder.port, '127.0.0.1');
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      await closed(s);
      seen.push(text);
    };
    await read();
    endpoints.shift();
    await read();
    expect(seen).toEqual(['a', 'b']);
  });
});
