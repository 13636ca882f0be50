import { Pool } from 'undici';
import document from '../src/openapi/openapi.json';

/**
 * The operations of the OpenAPI document and the ways one request target can be spelled, for
 * route-variants.int.test.ts (docs/api.md, "Path normalisation").
 */

export interface Operation {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** The documented path, with `{param}`s. */
  template: string;
  /** Pro and above only: the document lists a 403 for it (the only cause of a 403 in this API). */
  proOnly: boolean;
}

const paths = (document as unknown as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }).paths;

export const OPERATIONS: Operation[] = Object.entries(paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, op]) => ({
    method: method.toUpperCase() as Operation['method'],
    template,
    proOnly: '403' in op.responses,
  })),
);

/**
 * How the gateway must answer a spelling of a canonical path: `same` as the canonical path,
 * `malformed` 400 BAD_REQUEST before authentication, `trailing` (one more, empty, segment) with a
 * 4xx (403 for Free under a Pro-only prefix).
 */
export type Expectation = 'same' | 'malformed' | 'trailing';

export interface Variant {
  name: string;
  target: string;
  expect: Expectation;
}

export const encodeChar = (c: string, upper: boolean): string => {
  const hex = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? hex.toUpperCase() : hex}`;
};

/** Indexes of the slashes of a path after its first character. */
const innerSlashes = (path: string): number[] => [...path].flatMap((c, i) => (c === '/' && i > 0 ? [i] : []));

/** Every variant of a canonical path (no query) that the walk sends. */
export function variantsOf(path: string, origin: string): Variant[] {
  const out: Variant[] = [];
  [...path].forEach((c, i) => {
    if (c === '/') return;
    const lower = encodeChar(c, false);
    const upper = encodeChar(c, true);
    out.push({ name: `${lower} at ${i}`, target: path.slice(0, i) + lower + path.slice(i + 1), expect: 'same' });
    if (upper !== lower) out.push({ name: `${upper} at ${i}`, target: path.slice(0, i) + upper + path.slice(i + 1), expect: 'same' });
  });
  out.push({
    name: 'every character %XX',
    target: [...path].map((c) => (c === '/' ? c : encodeChar(c, true))).join(''),
    expect: 'same',
  });
  out.push({ name: 'full URL', target: `${origin}${path}`, expect: 'same' });
  out.push({ name: 'full URL, another host', target: `https://api.example.com${path}`, expect: 'same' });
  out.push({ name: 'trailing slash', target: `${path}/`, expect: 'trailing' });
  out.push({ name: 'doubled first slash', target: `/${path}`, expect: 'malformed' });
  for (const i of innerSlashes(path)) {
    const [before, after] = [path.slice(0, i), path.slice(i + 1)];
    out.push({ name: `doubled slash at ${i}`, target: `${before}//${after}`, expect: 'malformed' });
    out.push({ name: `/./ at ${i}`, target: `${before}/./${after}`, expect: 'malformed' });
    out.push({ name: `/%2e/ at ${i}`, target: `${before}/%2e/${after}`, expect: 'malformed' });
    out.push({ name: `%2F at ${i}`, target: `${before}%2F${after}`, expect: 'malformed' });
    out.push({ name: `%2f at ${i}`, target: `${before}%2f${after}`, expect: 'malformed' });
  }
  out.push({ name: '/../ back to the path', target: `${path}/x/..`, expect: 'malformed' });
  return out;
}

export interface RawAnswer {
  status: number;
  body: unknown;
  rateLimited: boolean;
}

/** Requests with the request target exactly as given (no normalisation by the client), over keep-alive connections. */
export class RawClient {
  private readonly pool: Pool;

  constructor(origin: string, connections = 8) {
    this.pool = new Pool(origin, { connections, pipelining: 1 });
  }

  async send(method: string, target: string, apiKey: string): Promise<RawAnswer> {
    const withBody = method === 'POST' || method === 'PATCH';
    const res = await this.pool.request({
      method,
      path: target,
      headers: { 'x-api-key': apiKey, ...(withBody ? { 'content-type': 'application/json' } : {}) },
      body: withBody ? '{}' : undefined,
    });
    const text = await res.body.text();
    const json = /^application\/json/.test(String(res.headers['content-type'] ?? ''));
    return {
      status: res.statusCode,
      body: json && text ? (JSON.parse(text) as unknown) : text,
      rateLimited: 'x-ratelimit-limit' in res.headers,
    };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** Runs `task` over `items`, `width` at a time. */
export async function inParallel<T>(items: T[], width: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await task(items[next++] as T);
    }),
  );
}
