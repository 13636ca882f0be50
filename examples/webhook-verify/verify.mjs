// Verifying a delivery in JavaScript with the `standardwebhooks` package (npm install standardwebhooks).
import { Webhook } from 'standardwebhooks';

/**
 * Returns the event of a verified delivery; throws when webhook-signature does not verify with the
 * secret, or webhook-timestamp is more than 5 minutes away from now (a replay).
 * `rawBody` is the body exactly as received (a string or bytes), before any JSON parsing;
 * `headers` has lower-case names (as Node's `req.headers`).
 */
export function verifyWebhook(secret, headers, rawBody) {
  // `whsec_…` as shown when the subscription was created; the library uses the decoded bytes as the key.
  const webhook = new Webhook(secret);
  return webhook.verify(rawBody, {
    'webhook-id': headers['webhook-id'],
    'webhook-timestamp': headers['webhook-timestamp'],
    'webhook-signature': headers['webhook-signature'],
  });
}

// With Express, keep the raw body:
//   app.post('/hooks', express.raw({ type: 'application/json' }), (req, res) => {
//     let event;
//     try { event = verifyWebhook(process.env.WEBHOOK_SECRET, req.headers, req.body); }
//     catch { return res.sendStatus(401); }
//     // Deliveries are at least once: skip an event.id you have already handled.
//     res.sendStatus(204);
//   });
