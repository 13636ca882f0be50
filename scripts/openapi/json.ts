/** Plain JSON values, and the TypeBox → JSON Schema conversion the OpenAPI document uses. */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** ajv-formats' keywords, not JSON Schema: the ranges they check are stated in the parameters' descriptions. */
const NON_STANDARD_KEYWORDS = new Set(['nullable', 'formatMinimum', 'formatMaximum', 'formatExclusiveMinimum', 'formatExclusiveMaximum']);

/** TypeBox → plain JSON Schema 2020-12 (OpenAPI 3.1): drops symbols and ajv-only keywords, turns `nullable: true` into a null branch. */
export function toJsonSchema(schema: unknown): Json {
  const plain = JSON.parse(JSON.stringify(schema)) as Json;
  const walk = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(node)) if (!NON_STANDARD_KEYWORDS.has(k)) out[k] = walk(v);
    if (node.nullable === true) return { anyOf: [out, { type: 'null' }] };
    return out;
  };
  return walk(plain);
}

/** Keys sorted at every level, so the file is deterministic and diffs are readable. */
export function sortKeys(node: Json): Json {
  if (Array.isArray(node)) return node.map(sortKeys);
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.keys(node)
      .sort()
      .map((k) => [k, sortKeys(node[k] as Json)]),
  );
}

/** A `$ref` to `#/components/<kind>/<name>`. */
export const ref = (kind: string, name: string): JsonObject => ({ $ref: `#/components/${kind}/${name}` });
