import { freePort, type ServiceProcess, type Stack, startService, startStack } from '@fcd/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpForwarder } from './tcp-forwarder';

/**
 * A rolling update of the usage service behind one gateway: two usage replicas behind a TCP
 * forwarder that stands in for the Kubernetes Service (new connections go to the first endpoint
 * listed). As in a rollout with the chart's preStop delay, replica A leaves the endpoints first and
 * is then sent SIGTERM while requests are in flight: its open authorization stream is drained, the
 * gateway sends what A did not answer again on a new connection, which reaches B.
 */
let stack: Stack;
let replicaB: ServiceProcess;
let forwarder: TcpForwarder;
const endpoints: number[] = [];

beforeAll(async () => {
  const [aPort, bPort, forwarderPort] = [await freePort(), await freePort(), await freePort()];
  endpoints.push(aPort, bPort);
  forwarder = await TcpForwarder.start(() => endpoints[0] as number, forwarderPort);
  stack = await startStack({
    label: 'usage_rollout',
    usageEnv: { GRPC_PORT: String(aPort) },
    gatewayEnv: { USAGE_GRPC_ADDRESS: `127.0.0.1:${forwarderPort}` },
  });
  replicaB = await startService('usage', { ...stack.usageEnv, GRPC_PORT: String(bPort) });
});

afterAll(async () => {
  await replicaB?.stop();
  await stack?.stop();
  await forwarder?.close();
});

describe('usage service rolling update', () => {
  it('SIGTERM of a replica that left the endpoints fails no request and loses no count', async () => {
    const { apiKey, accountId } = await stack.createAccount('pro');
    const url = `${stack.gatewayUrls[0]}/v1/account/usage`;
    const statuses = new Map<number, number>();
    let ok = 0;
    let stop = false;
    let waiter: { at: number; resolve: () => void } | undefined;
    const worker = async () => {
      while (!stop) {
        const res = await fetch(url, { headers: { 'x-api-key': apiKey } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200) ok++;
        if (waiter && ok >= waiter.at) waiter.resolve();
      }
    };
    const until = (at: number) => new Promise<void>((resolve) => (waiter = { at, resolve }));
    const workers = Array.from({ length: 16 }, () => worker());

    await until(200);
    endpoints.shift(); // A leaves the Service's endpoints, then gets SIGTERM with requests in flight
    expect(await stack.usage.stop('SIGTERM')).toBe(0);
    await until(ok + 200); // B answers from here on
    stop = true;
    await Promise.all(workers);

    expect(Object.fromEntries(statuses)).toEqual({ 200: ok });
    expect(stack.usage.logs().map((l) => l.msg)).not.toContain('gRPC calls still open 5 s after shutdown began; forcing them closed');
    expect(await replicaB.stop('SIGTERM')).toBe(0); // its last counts flushed
    expect(await stack.storedCount(accountId)).toBe(ok);
  });
});
