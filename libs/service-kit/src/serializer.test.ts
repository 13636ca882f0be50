import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Type } from '@sinclair/typebox';
import fc from 'fast-check';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { baseFastifyOptions, installHttpConventions } from './http';
import { createLogger } from './logger';
import { Nullable, StringEnum } from './schemas';
import { responseSerializers, serializationSchema } from './serializer';

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

  it('leaves a nullable primitive with const or default, or a union with more than annotations', () => {
    const kept = {
      constant: Nullable(Type.String({ const: 'live' })),
      defaulted: Nullable(Type.String({ default: 'x' })),
      unionDefault: Nullable(Type.String(), { default: null }),
    };
    const copy = serializationSchema(Type.Object(kept)) as { properties: Record<string, { anyOf?: unknown[] }> };
    for (const name of Object.keys(kept)) expect(copy.properties[name]?.anyOf, name).toHaveLength(2);
  });

  it("makes Fastify's serializer write what the anyOf schema writes, which is JSON.stringify", () => {
    const route = { method: 'GET', url: '/r', httpStatus: '200' };
    const original = SerializerSelector()()({ ...route, schema: Record });
    const fast = responseSerializers()({ ...route, schema: Record });
    fc.assert(
      fc.property(record, (value) => {
        const written = fast(value);
        expect(written).toBe(original(value));
        expect(written).toBe(JSON.stringify(value));
      }),
      { numRuns: 500 },
    );
  });

  it("writes a value that does not fit T's own constraints as it is, like a field that is not nullable", () => {
    const fast = responseSerializers()({ method: 'GET', url: '/r', httpStatus: '200', schema: Record });
    const value = {
      id: 'x',
      day: 'not-a-date',
      text: null,
      amount: -1,
      count: null,
      flag: null,
      status: 'pending',
      group: { last: null, total: 0 },
      either: null,
      codes: [],
    };
    expect(fast(value)).toBe(JSON.stringify(value));
    // The anyOf schema's branch check refused it (a 500 for the request).
    const original = SerializerSelector()()({ method: 'GET', url: '/r', httpStatus: '200', schema: Record });
    expect(() => original(value)).toThrow(/does not match schema definition/);
  });
});

describe('responses', () => {
  it('an app made with the base options writes nullable fields through the rewritten schema', async () => {
    const app = Fastify(baseFastifyOptions(createLogger({ service: 'serializer-test', level: 'silent' })));
    installHttpConventions(app);
    // `status` fits no branch of its anyOf: Fastify's own serializer would answer 500.
    const value = { id: 'x', day: null, text: 'a "quoted" text', amount: 12.5, count: null, flag: false, status: 'pending' };
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
