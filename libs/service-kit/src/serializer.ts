import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

/** The JSON types fast-json-stringify can tell apart with `typeof` alone. */
const PRIMITIVES = new Set(['string', 'number', 'integer', 'boolean']);

/** Keywords that only describe a schema: fast-json-stringify writes the same with or without them. */
const ANNOTATIONS = new Set(['description', 'title', 'examples', '$comment', 'deprecated', 'readOnly', 'writeOnly']);

/**
 * What a nullable primitive may hold to be rewritten: its type, its annotations, and keywords that
 * only validate (fast-json-stringify ignores them outside an `anyOf`). Not `const` or `default`,
 * which change what it writes, nor anything else.
 */
const PRIMITIVE_KEYWORDS = new Set([
  ...ANNOTATIONS,
  'type',
  'format',
  'enum',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
]);

type SchemaObject = Record<string, unknown>;

const isObject = (value: unknown): value is SchemaObject => typeof value === 'object' && value !== null && !Array.isArray(value);

const only = (schema: SchemaObject, allowed: ReadonlySet<string>) => Object.keys(schema).every((key) => allowed.has(key));

const NULL_KEYWORDS = new Set([...ANNOTATIONS, 'type']);
const isNull = (schema: SchemaObject) => schema.type === 'null' && only(schema, NULL_KEYWORDS);

/** The `T` of `anyOf: [T, null]` (in either order) when `T` is one primitive type, plain enough to rewrite. */
function nullablePrimitive(schema: SchemaObject): SchemaObject | undefined {
  const { anyOf, ...union } = schema;
  if (!Array.isArray(anyOf) || anyOf.length !== 2 || !only(union, ANNOTATIONS)) return undefined;
  const [a, b] = anyOf as unknown[];
  if (!isObject(a) || !isObject(b)) return undefined;
  const other = isNull(b) ? a : isNull(a) ? b : undefined;
  if (other === undefined || typeof other.type !== 'string' || !PRIMITIVES.has(other.type)) return undefined;
  return only(other, PRIMITIVE_KEYWORDS) ? other : undefined;
}

/**
 * The copy of a response schema that fast-json-stringify compiles: every nullable primitive
 * (`Nullable(T)`, an `anyOf` of `T` and null) becomes `T` with `type: [T, 'null']`; the rest is
 * copied as it is. The schema itself (validation, the OpenAPI document) keeps its `anyOf`.
 *
 * For an `anyOf`, fast-json-stringify picks the branch by running ajv on the value, once per
 * nullable field of every object it writes; for a type list it checks `=== null`. A value that
 * fits `T` is written the same either way (serializer.test.ts); the facility took 3.2 µs against
 * 2.4 (docs/benchmarks/history/2026-11-29.md). A value that does not fit `T`'s own constraints (its
 * enum, pattern, format or bounds) is now written as it is, as for every field that is not
 * nullable: the serializer never validated responses, and the branch check used to fail such a
 * response with a 500. `T` with `const` or `default`, which change what is written, and any
 * `anyOf` of objects or of two primitives are left alone.
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

type SerializerFactory = ReturnType<typeof SerializerSelector>;

const fastifySerializers: SerializerFactory = SerializerSelector();

/**
 * Fastify's serializer factory (`schemaController.compilersFactory.buildSerializer`): its own
 * (@fastify/fast-json-stringify-compiler, with the app's shared schemas and `serializerOpts`),
 * given each response schema's `serializationSchema`.
 */
export const responseSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = fastifySerializers(externalSchemas, options);
  return (route) => compile({ ...route, schema: serializationSchema(route.schema) });
};
