// The proxied-path round's baseline: the least a reverse proxy in front of the facility service
// does (Fastify + an undici keep-alive pool, the gateway's pool settings), with no authentication,
// no metering, no logging: the request's path and its x-fcd-account / x-request-id headers go
// upstream as they came, the status, content-type and body come back.
import Fastify from 'fastify';
import { Pool } from 'undici';

const pool = new Pool(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8081', {
  connections: Number(process.env.UPSTREAM_CONNECTIONS ?? 64),
  pipelining: 1,
  keepAliveTimeout: 30_000,
});
const FORWARDED = ['x-fcd-account', 'x-request-id'];

const app = Fastify({ logger: false });
app.get('/*', async (req, reply) => {
  const headers = { accept: 'application/json' };
  for (const name of FORWARDED) if (typeof req.headers[name] === 'string') headers[name] = req.headers[name];
  const res = await pool.request({ method: 'GET', path: req.url, headers });
  const body = Buffer.from(await res.body.arrayBuffer());
  reply.code(res.statusCode);
  if (typeof res.headers['content-type'] === 'string') reply.type(res.headers['content-type']);
  return reply.send(body);
});
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ msg: 'ready', port: app.server.address().port })}\n`);
process.on('SIGTERM', () => app.close().then(() => pool.close().then(() => process.exit(0))));
