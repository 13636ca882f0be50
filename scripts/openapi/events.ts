/**
 * The events a subscription receives, described once for both generated documents: the OpenAPI
 * `webhooks` section (document.ts) and the AsyncAPI document (asyncapi.ts). The records inside
 * `data` are the facility service's response schemas (the same records the API returns), the
 * envelope and headers are the contract's (docs/webhooks.md), and the verification examples are the
 * files in examples/webhook-verify (tested by services/gateway/test/webhook-contract.int.test.ts).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventId, SubscriptionId } from '@fcd/service-kit';
import { CASE_STATUSES, COMPLIANCE_STATUSES } from '../../services/facility/src/domain/codes';
import { CaseSchema, FacilitySchema, ViolationSchema } from '../../services/facility/src/routes/schemas';
import { TIMESTAMP_PATTERN } from '../../services/webhook/src/routes/schemas';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** TypeBox → plain JSON (symbols dropped). */
const plain = (schema: unknown): JsonObject => JSON.parse(JSON.stringify(schema)) as JsonObject;

/** The records carried in `data`, by component name. */
export const RECORD_SCHEMAS: Record<string, JsonObject> = {
  Facility: {
    ...plain(FacilitySchema),
    additionalProperties: false,
    description: 'A facility, as `GET /v1/facilities/{facility_id}` returns it.',
  },
  Violation: { ...plain(ViolationSchema), additionalProperties: false, description: 'A violation, as `GET /v1/violations` returns it.' },
  EnforcementCase: {
    ...plain(CaseSchema),
    additionalProperties: false,
    description: 'An enforcement case, as `GET /v1/cases/{case_id}` returns it.',
  },
};

export interface EventInfo {
  type: string;
  /** Component name of the whole envelope. */
  name: string;
  operationId: string;
  summary: string;
  description: string;
  /** The schema of `data`; `record(name)` makes the reference in the caller's document. */
  data: (record: (name: string) => JsonObject) => JsonObject;
  example: JsonObject;
}

const FACILITY_ID = '3f0c2a1e-5b7d-4c8e-9f10-2a3b4c5d6e7f';
const VIOLATION = {
  id: '8d5e4f3a-2b1c-4d0e-8f9a-0b1c2d3e4f5a',
  facility_id: FACILITY_ID,
  facility_name: 'Gulf Coast Refinery',
  program: 'CAA',
  violation_type: 'Emissions exceedance',
  violation_date: '2026-11-20',
  severity: 'significant',
  description: 'Opacity above the permitted limit.',
  resolved_date: null,
};
const CASE = {
  id: '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
  case_number: 'CAA-06-2026-0042',
  case_type: 'judicial',
  status: 'filed',
  lead_agency: 'EPA',
  filed_date: '2026-11-21',
  settled_date: null,
  penalty_amount_usd: null,
  facility_ids: [FACILITY_ID],
  updated_at: '2026-11-21T14:03:10.512Z',
};
const FACILITY = {
  id: FACILITY_ID,
  registry_id: '110000350174',
  name: 'Gulf Coast Refinery',
  street: '1 Refinery Rd',
  city: 'Houston',
  state: 'TX',
  zip: '77001',
  county: 'Harris',
  latitude: 29.76,
  longitude: -95.37,
  naics_codes: ['324110'],
  programs: ['CAA', 'RCRA'],
  compliance_status: 'significant_violation',
  last_inspection_date: '2026-10-02',
  epa_region: '06',
  sic_codes: ['2911'],
  major: true,
  program_status: { caa: 'High Priority Violation', cwa: null, rcra: 'No Violation Identified' },
  compliance: { quarters_with_noncompliance: 7, programs_with_snc: 1, snc: true },
  inspections: { count: 6, last_date: '2026-10-02' },
  enforcement: { informal_actions: 2, formal_actions: 1, last_formal_action_date: '2025-06-11' },
  penalties: { count: 1, total_usd: 187500, last_amount_usd: 187500, last_date: '2025-08-19' },
  data_as_of: '2026-11-22T08:15:30.123Z',
  updated_at: '2026-11-22T08:15:30.123Z',
};

const object = (properties: JsonObject, required = Object.keys(properties)): JsonObject => ({
  type: 'object',
  required,
  additionalProperties: false,
  properties,
});

/** A case event's facilities: one per `case.facility_ids`, in that order. */
const FACILITIES = (record: (name: string) => JsonObject): JsonObject => ({
  type: 'array',
  items: record('Facility'),
  description: "The case's facilities as they stood when the event was written, one per `case.facility_ids`, in that order.",
});

export const EVENTS: EventInfo[] = [
  {
    type: 'violation.new',
    name: 'ViolationNewEvent',
    operationId: 'violationNew',
    summary: 'A new violation was recorded',
    description:
      'Sent when a violation of a watched facility is recorded; `facility` is the facility of the violation as it stood when the violation was recorded.',
    data: (record) => object({ violation: record('Violation'), facility: record('Facility') }),
    example: {
      id: 'evt_5c1f0e7a-9b2d-4e3f-8a1b-2c3d4e5f6a7b',
      type: 'violation.new',
      created_at: '2026-11-22T08:15:30.123Z',
      data: { violation: VIOLATION, facility: FACILITY },
    },
  },
  {
    type: 'case.new',
    name: 'CaseNewEvent',
    operationId: 'caseNew',
    summary: 'A new enforcement case was filed',
    description:
      'Sent when an enforcement case involving a watched facility is recorded (a case matches through any of its facilities); `facilities` are the facilities of the case as they stood then, one per `case.facility_ids`, in that order.',
    data: (record) => object({ case: record('EnforcementCase'), facilities: FACILITIES(record) }),
    example: {
      id: 'evt_6d2a1f8b-0c3e-4f4a-9b2c-3d4e5f6a7b8c',
      type: 'case.new',
      created_at: '2026-11-21T14:03:10.512Z',
      data: { case: CASE, facilities: [FACILITY] },
    },
  },
  {
    type: 'case.updated',
    name: 'CaseUpdatedEvent',
    operationId: 'caseUpdated',
    summary: "An enforcement case's status changed",
    description:
      'Sent when the status of a case involving a watched facility changes; `previous_status` is the status before, `facilities` are the facilities of the case as they stood then, one per `case.facility_ids`, in that order.',
    data: (record) =>
      object({
        case: record('EnforcementCase'),
        previous_status: { type: 'string', enum: [...CASE_STATUSES], description: 'The status before this change.' },
        facilities: FACILITIES(record),
      }),
    example: {
      id: 'evt_7e3b2a9c-1d4f-4a5b-8c3d-4e5f6a7b8c9d',
      type: 'case.updated',
      created_at: '2026-11-22T09:00:00.000Z',
      data: {
        case: { ...CASE, status: 'active', updated_at: '2026-11-22T09:00:00.000Z' },
        previous_status: 'filed',
        facilities: [FACILITY],
      },
    },
  },
  {
    type: 'facility.status_changed',
    name: 'FacilityStatusChangedEvent',
    operationId: 'facilityStatusChanged',
    summary: "A facility's compliance status changed",
    description: 'Sent when the compliance status of a watched facility changes; `previous_status` is the status before.',
    data: (record) =>
      object({
        facility: record('Facility'),
        previous_status: { type: 'string', enum: [...COMPLIANCE_STATUSES], description: 'The compliance status before this change.' },
      }),
    example: {
      id: 'evt_8f4c3b0d-2e5a-4b6c-9d4e-5f6a7b8c9d0e',
      type: 'facility.status_changed',
      created_at: '2026-11-22T08:15:30.123Z',
      data: { facility: FACILITY, previous_status: 'violation' },
    },
  },
  {
    type: 'webhook.test',
    name: 'WebhookTestEvent',
    operationId: 'webhookTest',
    summary: 'A test event',
    description:
      'Sent by `POST /v1/webhooks/{webhook_id}/test`, whatever the subscription lists; signed like every delivery, attempted once.',
    data: () =>
      object({
        webhook_id: { type: 'string', pattern: SubscriptionId.pattern, description: 'The subscription tested.' },
        message: { type: 'string' },
      }),
    example: {
      id: 'evt_9a5d4c1e-3f6b-4c7d-8e5f-6a7b8c9d0e1f',
      type: 'webhook.test',
      created_at: '2026-11-22T08:15:30.123Z',
      data: { webhook_id: 'wh_0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e', message: 'This is a test event sent from the webhook settings.' },
    },
  },
];

/** The envelope of one event type (docs/webhooks.md): keys in this order, compact JSON. */
export function envelopeSchema(event: EventInfo, record: (name: string) => JsonObject): JsonObject {
  return {
    type: 'object',
    description: `${event.description} The body is the envelope as compact JSON with its keys in the order id, type, created_at, data; verify the signature over these exact bytes before parsing them.`,
    required: ['id', 'type', 'created_at', 'data'],
    additionalProperties: false,
    properties: {
      id: {
        type: 'string',
        pattern: EventId.pattern,
        description: '`evt_` + UUID: the same on every attempt and in `webhook-id`; drop an id you have already handled.',
      },
      type: { type: 'string', const: event.type },
      created_at: { type: 'string', format: 'date-time', pattern: TIMESTAMP_PATTERN, description: 'When the event happened.' },
      data: event.data(record),
    },
    examples: [event.example],
  };
}

export interface DeliveryHeader {
  name: string;
  description: string;
  schema: JsonObject;
}

/** The headers of every delivery (docs/webhooks.md). Content-Type is application/json. */
export const DELIVERY_HEADERS: DeliveryHeader[] = [
  {
    name: 'webhook-id',
    description: 'Standard Webhooks: the event id (the same on every attempt).',
    schema: { type: 'string', pattern: EventId.pattern },
  },
  {
    name: 'webhook-timestamp',
    description: "Standard Webhooks: the attempt's time, Unix seconds. Refuse one more than 5 minutes from your clock (replay).",
    schema: { type: 'string', pattern: '^[0-9]{1,12}$' },
  },
  {
    name: 'webhook-signature',
    description:
      'Standard Webhooks: `v1,` + base64 of HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{raw body}`, keyed by the base64-decoded bytes after `whsec_`. During a rotation overlap, one entry per valid secret, newest first, separated by spaces.',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=( v1,[A-Za-z0-9+/]{43}=)*$' },
  },
  {
    name: 'X-Service-Signature',
    description:
      '`sha256=` + lowercase hex HMAC-SHA256 of the raw body, keyed by the whole secret string (UTF-8). During a rotation overlap, one value per valid secret, newest first, separated by commas.',
    schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}(,sha256=[0-9a-f]{64})*$' },
  },
  { name: 'X-Service-Event-Id', description: 'The event id (as `webhook-id`).', schema: { type: 'string', pattern: EventId.pattern } },
  {
    name: 'X-Service-Event-Type',
    description: 'The event type (as `type` in the body).',
    schema: { type: 'string', enum: EVENTS.map((e) => e.type) },
  },
  {
    name: 'X-Service-Delivery-Id',
    description: 'The delivery (one per event and subscription): `dlv_` + UUID, as in the delivery log.',
    schema: { type: 'string', pattern: '^dlv_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' },
  },
  {
    name: 'X-Service-Delivery-Attempt',
    description: 'The attempt number: 1, then 2 to 6 for the retries.',
    schema: { type: 'string', pattern: '^[1-9][0-9]{0,2}$' },
  },
  { name: 'User-Agent', description: 'The sender.', schema: { type: 'string', const: 'FacilityCompliance-Webhooks/1.0' } },
];

export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

/** The verification examples, read from examples/webhook-verify (where they are tested). */
export function verificationSamples(): CodeSample[] {
  return [
    {
      lang: 'JavaScript',
      label: 'JavaScript (standardwebhooks)',
      source: readFileSync(resolve(root, 'examples/webhook-verify/verify.mjs'), 'utf8'),
    },
    {
      lang: 'Python',
      label: 'Python (standard library)',
      source: readFileSync(resolve(root, 'examples/webhook-verify/verify_webhook.py'), 'utf8'),
    },
  ];
}

export const RECEIVING_WEBHOOKS = `Each matching event is POSTed to the subscription's \`url\` as its JSON envelope (compact, keys in the order id, type, created_at, data), with \`Content-Type: application/json\` and the headers below. Verify the signature over the raw body before parsing it: either the Standard Webhooks \`webhook-signature\` (any Standard Webhooks or Svix verifier works, e.g. the \`standardwebhooks\` npm package) or \`X-Service-Signature\`; answer 401 when it does not verify. Any 2xx within 10 s acknowledges the delivery; anything else (3xx included: redirects are not followed) fails and is retried at +1 min, +5 min, +30 min, +2 h and +12 h (each ±20 %), honouring \`Retry-After\` on 429 and 503. Deliveries are at least once: drop an event id you have already handled. Each attempt, with the response your endpoint gave, is in \`GET /v1/webhooks/{webhook_id}/deliveries\`.`;
