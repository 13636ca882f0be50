// The read path's baseline (scripts/bench/read-path.mjs): bare Fastify + pg running the facility
// service's own SQL for a facility's detail and one page of a state's list, the rows sent as
// they come (no account header, no mapping, no response schema). Its own process, like the service.
import Fastify from 'fastify';
import pg from 'pg';

const { FACILITY_COLUMNS } = JSON.parse(process.env.BARE_SQL);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.PG_POOL_MAX ?? 10) });
// The database is dropped with FORCE at the end: its connections' errors are expected.
pool.on('error', () => undefined);
const app = Fastify({ logger: false });
app.get('/v1/facilities/:id', async (req, reply) => {
  const { rows } = await pool.query(`SELECT ${FACILITY_COLUMNS} FROM facility.facilities WHERE id = $1`, [req.params.id]);
  if (rows.length === 0) return reply.code(404).send({ error: { code: 'NOT_FOUND' } });
  return { data: rows[0] };
});
app.get('/v1/facilities', async (req) => {
  const limit = Number(req.query.limit ?? 50);
  const { rows } = await pool.query(`SELECT ${FACILITY_COLUMNS} FROM facility.facilities WHERE state = $1 ORDER BY registry_id LIMIT $2`, [
    req.query.state,
    limit + 1,
  ]);
  return { data: rows.slice(0, limit), has_more: rows.length > limit };
});
await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ msg: 'ready', port: app.server.address().port })}\n`);
process.on('SIGTERM', () =>
  app
    .close()
    .then(() => pool.end())
    .then(() => process.exit(0)),
);
