import { createConnection, createServer, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { FaultProxy } from '../src/fault-proxy';

let server: Server | undefined;
let proxy: FaultProxy | undefined;

afterEach(async () => {
  await proxy?.close();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
});

/** A TCP server that collects every byte it gets; `received(n)` resolves once n bytes arrived. */
async function sink(): Promise<{ port: number; received(n: number): Promise<string> }> {
  let data = '';
  const waiters: Array<{ n: number; resolve: (s: string) => void }> = [];
  server = createServer((socket) => {
    // The proxy resets its connections when it closes.
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('utf8');
      for (const w of waiters.filter((x) => data.length >= x.n)) w.resolve(data);
    });
  });
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    received: (n) => new Promise((resolve) => (data.length >= n ? resolve(data) : waiters.push({ n, resolve }))),
  };
}

it('never reorders bytes when the latency drops while chunks are delayed (the end of a latency fault)', async () => {
  const target = await sink();
  proxy = await FaultProxy.start({ port: target.port });
  const client = createConnection({ port: proxy.port, host: '127.0.0.1' });
  client.on('error', () => undefined);
  await new Promise((r) => client.once('connect', r));
  proxy.setLatency(300);
  client.write('first;');
  // Let the proxy read the first chunk (delayed 300 ms), then heal and send more at once.
  await new Promise((r) => setTimeout(r, 50));
  proxy.setLatency(0);
  client.write('second;');
  client.write('third;');
  expect(await target.received('first;second;third;'.length)).toBe('first;second;third;');
  client.destroy();
});
