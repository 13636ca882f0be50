import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError, InternalAuth } from '@fcd/service-kit';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpFacilityDirectory } from './facility';

const account = { account_id: 'acc_1', tier: 'pro', tier_rank: 2, request_id: 'req_1' };
const auth = new InternalAuth('webhook-facility-client-test-secret-0123456789');
const ID = '00000000-0000-4000-8000-000000000001';

let server: Server | undefined;
let directory: HttpFacilityDirectory | undefined;

afterEach(async () => {
  await directory?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = undefined;
  directory = undefined;
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<HttpFacilityDirectory> {
  server = createServer(handler);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  directory = new HttpFacilityDirectory({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, internalAuth: auth });
  return directory;
}

const answer = (res: ServerResponse) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: { existing: [ID] } }));

describe('HttpFacilityDirectory', () => {
  it('sends the lookup once more when its connection is reset before the answer (a replica leaving)', async () => {
    const path = '/internal/v1/facilities/existing';
    const verified: boolean[] = [];
    const d = await serve((req, res) => {
      // Each arrival carries a signed header the facility service accepts.
      verified.push(auth.verify(req.headers['x-fcd-account'], { audience: 'facility', method: 'POST', path }) !== undefined);
      if (verified.length === 1) req.socket.destroy();
      else answer(res);
    });
    expect(await d.existing([ID], account)).toEqual(new Set([ID]));
    expect(verified).toEqual([true, true]);
  });

  it('does not send it again when the connection is cut after the answer began: 503, one arrival', async () => {
    let arrived = 0;
    const d = await serve((_req, res) => {
      arrived++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"data":', () => res.socket?.destroy());
    });
    const err = await d.existing([ID], account).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as AppError).status).toBe(503);
    expect(arrived).toBe(1);
  });

  it('answers 503 when the second attempt is reset too, after two arrivals', async () => {
    let arrived = 0;
    const d = await serve((req) => {
      arrived++;
      req.socket.destroy();
    });
    const err = await d.existing([ID], account).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).status).toBe(503);
    expect(arrived).toBe(2);
  });
});
