// The machine's ceiling for the benchmark: a bare Fastify route returning a JSON
// body of the given size, in its own process like the gateway.
import Fastify from 'fastify';

const size = Number(process.env.BODY_SIZE ?? 330);
const body = JSON.stringify({ data: { pad: 'x'.repeat(Math.max(0, size - 20)) } });
const app = Fastify({ logger: false });
app.get('/v1/account/usage', async (_req, reply) => reply.type('application/json; charset=utf-8').send(body));
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ msg: 'ready', port: app.server.address().port })}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
