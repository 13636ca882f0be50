import { Type } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import {
  AnyEventEnvelopeSchema,
  EVENT_TYPES,
  EventEnvelopeSchema,
  envelope,
  eventIdOf,
  eventUuid,
  isEventType,
  subjectFor,
  subjectsOf,
} from './types';

const UUID = '3f0c2a1e-5b7d-4c8e-9f10-2a3b4c5d6e7f';

describe('event types', () => {
  it('are the four the facility service publishes', () => {
    expect(EVENT_TYPES).toEqual(['violation.new', 'case.new', 'case.updated', 'facility.status_changed']);
  });

  it('isEventType accepts exactly those', () => {
    for (const t of EVENT_TYPES) expect(isEventType(t)).toBe(true);
    expect(isEventType('webhook.test')).toBe(false);
    expect(isEventType('VIOLATION.NEW')).toBe(false);
    expect(isEventType(undefined)).toBe(false);
  });
});

describe('envelope', () => {
  it('builds evt_<uuid> ids with the keys in the order id, type, created_at, data', () => {
    const e = envelope('case.new', { case: { id: 'c1' } }, '2026-11-20T10:00:00.000Z', () => UUID);
    expect(JSON.stringify(e)).toBe(
      `{"id":"evt_${UUID}","type":"case.new","created_at":"2026-11-20T10:00:00.000Z","data":{"case":{"id":"c1"}}}`,
    );
  });

  it('eventUuid and eventIdOf convert between event ids and outbox uuids', () => {
    expect(eventUuid(`evt_${UUID}`)).toBe(UUID);
    expect(eventUuid(UUID)).toBe(UUID);
    expect(eventIdOf(UUID)).toBe(`evt_${UUID}`);
  });

  it('subjects are <prefix>.<type>, the stream takes <prefix>.>', () => {
    expect(subjectFor('events', 'violation.new')).toBe('events.violation.new');
    expect(subjectsOf('events')).toBe('events.>');
  });
});

describe('envelope schemas', () => {
  const ajv = addFormats(new Ajv({ strict: false }));
  const compile = (schema: object) => {
    const validate = ajv.compile(schema);
    return { Check: (value: unknown) => validate(value) };
  };
  const any = compile(AnyEventEnvelopeSchema);
  const valid = { id: `evt_${UUID}`, type: 'violation.new', created_at: '2026-11-20T10:00:00.000Z', data: { violation: {} } };

  it('the open schema accepts any event type with any data', () => {
    expect(any.Check(valid)).toBe(true);
    expect(Object.keys(AnyEventEnvelopeSchema.properties)).toEqual(['id', 'type', 'created_at', 'data']);
  });

  it('refuses an unknown type, a malformed id or a missing field', () => {
    expect(any.Check({ ...valid, type: 'webhook.test' })).toBe(false);
    expect(any.Check({ ...valid, id: UUID })).toBe(false);
    const { data: _data, ...noData } = valid;
    expect(any.Check(noData)).toBe(false);
  });

  it('a typed schema pins the type and the data schema', () => {
    const schema = compile(EventEnvelopeSchema(Type.Object({ n: Type.Integer() }), 'case.new'));
    expect(schema.Check({ ...valid, type: 'case.new', data: { n: 1 } })).toBe(true);
    expect(schema.Check({ ...valid, type: 'case.updated', data: { n: 1 } })).toBe(false);
    expect(schema.Check({ ...valid, type: 'case.new', data: { n: 'x' } })).toBe(false);
  });
});
