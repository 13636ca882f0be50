import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import fastJson, { type AnySchema } from 'fast-json-stringify';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installHttpConventions } from './http';
import { Nullable, StringEnum } from './schemas';
import { serializationSchema } from './serializer';

/** A representation with every kind of nullable field the services' schemas use, nested too. */
const Record = Type.Object({
  id: Type.String(),
  day: Nullable(Type.String({ format: 'date' }), { description: 'a day' }),
  text: Nullable(Type.String()),
  amount: Nullable(Type.Number({ minimum: 0 })),
  count: Nullable(Type.Integer()),
  flag: Nullable(Type.Boolean()),
  status: Nullable(StringEnum(['open', 'closed'] as const)),
  group: Type.Object({ last: Nullable(Type.String({ format: 'date' })), total: Type.Integer() }),
  either: Type.Union([Type.Object({ a: Type.String() }), Type.Null()]),
  codes: Type.Array(Nullable(Type.String())),
});

const nullable = <T>(value: fc.Arbitrary<T>) => fc.option(value, { nil: null });
const day = fc
  .date({ min: new Date('1900-01-01'), max: new Date('2100-12-31'), noInvalidDate: true })
  .map((d) => d.toISOString().slice(0, 10));
const record = fc.record({
  id: fc.string(),
  day: nullable(day),
  text: nullable(fc.string()),
  amount: nullable(fc.double({ min: 0, max: 1e12, noNaN: true })),
  count: nullable(fc.integer()),
  flag: nullable(fc.boolean()),
  status: nullable(fc.constantFrom('open', 'closed')),
  group: fc.record({ last: nullable(day), total: fc.integer() }),
  either: nullable(fc.record({ a: fc.string() })),
  codes: fc.array(nullable(fc.string()), { maxLength: 4 }),
});

describe('serializationSchema', () => {
  it('writes each nullable primitive as a type list, its annotations kept, and leaves the rest', () => {
    const copy = serializationSchema(Record) as { properties: Record<string, unknown> };
    expect(copy.properties.day).toMatchObject({ type: ['string', 'null'], format: 'date', description: 'a day' });
    expect(copy.properties.day).not.toHaveProperty('anyOf');
    expect(copy.properties.amount).toMatchObject({ type: ['number', 'null'], minimum: 0 });
    expect(copy.properties.count).toMatchObject({ type: ['integer', 'null'] });
    expect(copy.properties.flag).toMatchObject({ type: ['boolean', 'null'] });
    expect(copy.properties.status).toMatchObject({ type: ['string', 'null'], enum: ['open', 'closed'] });
    expect(copy.properties.group).toMatchObject({ properties: { last: { type: ['string', 'null'] }, total: { type: 'integer' } } });
    expect(copy.properties.codes).toMatchObject({ items: { type: ['string', 'null'] } });
    // An object or null is not a primitive: fast-json-stringify keeps choosing the branch.
    expect(copy.properties.either).toEqual(JSON.parse(JSON.stringify(Record.properties.either)));
    // The schema itself is untouched (validation and the OpenAPI document read it).
    expect(Record.properties.day.anyOf).toHaveLength(2);
  });

  it('makes fast-json-stringify write what the anyOf schema writes, which is JSON.stringify', () => {
    const original = fastJson(Record);
    const fast = fastJson(serializationSchema(Record) as AnySchema);
    fc.assert(
      fc.property(record, (value) => {
        const written = fast(value);
        expect(written).toBe(original(value));
        expect(written).toBe(JSON.stringify(value));
      }),
      { numRuns: 500 },
    );
  });
});

describe('responses', () => {
  it('an app with the HTTP conventions writes nullable fields as the schema says', async () => {
    const app = Fastify();
    installHttpConventions(app);
    const value = { id: 'x', day: null, text: 'a "quoted" text', amount: 12.5, count: null, flag: false, status: null };
    const schema = Type.Object({ ...Record.properties, extra: Type.Optional(Type.String()) });
    app.get('/r', { schema: { response: { 200: schema } } }, async () => ({
      ...value,
      group: { total: 2, last: '2026-01-02' },
      either: null,
      codes: [null, 'b'],
      unknown: 'dropped',
    }));
    const res = await app.inject({ method: 'GET', url: '/r' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(JSON.stringify({ ...value, group: { last: '2026-01-02', total: 2 }, either: null, codes: [null, 'b'] }));
    await app.close();
  });
});
