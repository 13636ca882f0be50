import fastJson, { type AnySchema } from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';

/** The JSON types fast-json-stringify can tell apart with `typeof` alone. */
const PRIMITIVES = new Set(['string', 'number', 'integer', 'boolean']);

type SchemaObject = Record<string, unknown>;

const isObject = (value: unknown): value is SchemaObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The `T` of `anyOf: [T, null]` (in either order) when `T` is one primitive type. */
function nullablePrimitive(schema: SchemaObject): SchemaObject | undefined {
  const anyOf = schema.anyOf;
  if (!Array.isArray(anyOf) || anyOf.length !== 2) return undefined;
  const [a, b] = anyOf as unknown[];
  if (!isObject(a) || !isObject(b)) return undefined;
  const other = b.type === 'null' ? a : a.type === 'null' ? b : undefined;
  if (other === undefined || typeof other.type !== 'string' || !PRIMITIVES.has(other.type)) return undefined;
  if ('anyOf' in other || 'oneOf' in other || 'allOf' in other || '$ref' in other) return undefined;
  return other;
}

/**
 * The copy of a response schema that fast-json-stringify compiles: every nullable primitive
 * (`Nullable(T)`, an `anyOf` of `T` and null) becomes `T` with `type: [T, 'null']`; the rest is
 * copied as it is. The schema itself (validation, the OpenAPI document) keeps its `anyOf`.
 *
 * For an `anyOf`, fast-json-stringify picks the branch by running ajv on the value, once per
 * nullable field of every object it writes; for a type list it checks `=== null`. Both write the same JSON (serializer.test.ts); the facility took 3.2 µs against
 * 2.4 (docs/benchmarks/history/2026-11-29.md). A schema the serializer does not write differently
 * (an `anyOf` of objects, of two primitives) is left alone.
 */
export function serializationSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(serializationSchema);
  if (!isObject(schema)) return schema;
  const primitive = nullablePrimitive(schema);
  if (primitive !== undefined) {
    const { anyOf: _anyOf, ...annotations } = schema;
    return { ...annotations, ...primitive, type: [primitive.type, 'null'] };
  }
  const copy: SchemaObject = {};
  for (const key of Object.keys(schema)) copy[key] = serializationSchema(schema[key]);
  return copy;
}

/** Fastify's serializer compiler: fast-json-stringify of each response schema's `serializationSchema`. */
export const responseSerializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) =>
  fastJson(serializationSchema(schema) as AnySchema);
