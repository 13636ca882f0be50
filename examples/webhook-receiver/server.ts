// A runnable webhook receiver: verifies the signature (Standard Webhooks headers, or
// X-Service-Signature) over the raw body in
// constant time (401 on mismatch), drops duplicate event ids, logs each event.
//
//   WEBHOOK_SECRET=whsec_... PORT=3000 npx tsx examples/webhook-receiver/server.ts
//   (HTTPS: also TLS_CERT=cert.pem TLS_KEY=key.pem)
//
// WEBHOOK_SECRET may hold several comma-separated secrets while you rotate.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { webhookHandler } from '@fcd/webhook-verify';

const secrets = (process.env.WEBHOOK_SECRET ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
if (secrets.length === 0) {
  process.stderr.write('set WEBHOOK_SECRET to the subscription secret (whsec_...)\n');
  process.exit(1);
}
const port = Number(process.env.PORT ?? 3000);
const seen = new Set<string>();

const handler = webhookHandler({
  secrets,
  onDelivery: ({ event, deliveryId, attempt }) => {
    // Deliveries are at least once: the same event id may arrive again.
    if (seen.has(event.id)) return;
    seen.add(event.id);
    process.stdout.write(`${JSON.stringify({ msg: 'event', id: event.id, type: event.type, delivery_id: deliveryId, attempt })}\n`);
  },
});

const server =
  process.env.TLS_CERT && process.env.TLS_KEY
    ? createHttpsServer({ cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) }, handler)
    : createHttpServer(handler);
server.listen(port, () => {
  const a = server.address();
  process.stdout.write(`${JSON.stringify({ msg: 'ready', port: typeof a === 'object' && a ? a.port : port })}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
