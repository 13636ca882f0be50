/**
 * Builds the AsyncAPI 3.1 document of the event stream (served by the gateway at /asyncapi.json),
 * from the same event catalogue as the OpenAPI `webhooks` section (./events.ts).
 *
 * The application described is this API as the sender: one channel per event type, whose address
 * is the subscription's `url` (chosen by each subscriber); the messages are the envelopes with the
 * delivery headers, sent as HTTP POST (http binding). The internal JetStream subjects are not part
 * of the public contract and are not described.
 */
import { DELIVERY_HEADERS, EVENTS, envelopeSchema, RECEIVING_WEBHOOKS, RECORD_SCHEMAS } from './events';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const schemaRef = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` });

/** The delivery headers as one JSON Schema object (AsyncAPI message headers). */
function headersSchema(): JsonObject {
  return {
    type: 'object',
    required: ['content-type', ...DELIVERY_HEADERS.map((h) => h.name.toLowerCase())],
    properties: {
      'content-type': { type: 'string', const: 'application/json' },
      ...Object.fromEntries(DELIVERY_HEADERS.map((h) => [h.name.toLowerCase(), { ...h.schema, description: h.description }])),
    },
  };
}

/** The AsyncAPI document (keys in a stable order; the generator sorts them). */
export function buildAsyncApiDocument(version: string): JsonObject {
  const channels: JsonObject = {};
  const operations: JsonObject = {};
  const messages: JsonObject = {};
  for (const e of EVENTS) {
    messages[e.name] = {
      name: e.type,
      title: e.summary,
      summary: e.description,
      contentType: 'application/json',
      headers: { $ref: '#/components/schemas/DeliveryHeaders' },
      payload: schemaRef(e.name),
      bindings: { http: { bindingVersion: '0.3.0' } },
      examples: [{ name: e.operationId, payload: e.example }],
    };
    channels[e.operationId] = {
      address: null,
      title: e.type,
      description: `Deliveries of \`${e.type}\` events, POSTed to each subscription's \`url\` that lists it (\`webhook.test\`: to the subscription tested).`,
      messages: { [e.name]: { $ref: `#/components/messages/${e.name}` } },
    };
    operations[`send${e.operationId[0]?.toUpperCase()}${e.operationId.slice(1)}`] = {
      action: 'send',
      title: `Deliver ${e.type}`,
      summary: e.summary,
      channel: { $ref: `#/channels/${e.operationId}` },
      messages: [{ $ref: `#/channels/${e.operationId}/messages/${e.name}` }],
      bindings: { http: { method: 'POST', bindingVersion: '0.3.0' } },
    };
  }
  return {
    asyncapi: '3.1.0',
    info: {
      title: 'Facility Compliance Data API — events',
      version,
      description: `${RECEIVING_WEBHOOKS}\n\nThe HTTP API is described by the OpenAPI document at /openapi.json, with the same events under \`webhooks\`.`,
      license: { name: 'Proprietary' },
    },
    defaultContentType: 'application/json',
    channels,
    operations,
    components: {
      schemas: {
        ...RECORD_SCHEMAS,
        ...Object.fromEntries(EVENTS.map((e) => [e.name, envelopeSchema(e, schemaRef)])),
        DeliveryHeaders: headersSchema(),
      },
      messages,
    },
  };
}
