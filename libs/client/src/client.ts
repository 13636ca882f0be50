import createFetchClient, { type Client, type ClientPathsWithMethod, type MaybeOptionalInit, type MethodResponse } from 'openapi-fetch';
import { errorFromResponse } from './errors.js';
import type { paths } from './generated/openapi.js';
import { type RateLimit, rateLimitOf } from './rate-limit.js';
import { type RetryOptions, retryingFetch, type Sleep } from './retry.js';

/**
 * A small typed client over openapi-fetch and the types generated from the API's OpenAPI document:
 * every call sends the API key, retries 429 and 503 as `Retry-After` says (capped), returns the
 * typed body with the rate-limit headers, and throws a typed error (`FcdApiError`, `RateLimitError`,
 * `ServiceUnavailableError`) for any other non-2xx answer. `pages` and `items` walk a list by its
 * `pagination.next_cursor`.
 */

type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';
type PathsWithMethod<M extends HttpMethod> = ClientPathsWithMethod<Client<paths>, M>;
type RequiredKeysOfHelper<T> = { [K in keyof T]: Record<never, never> extends Pick<T, K> ? never : K }[keyof T];
type RequiredKeysOf<T> = RequiredKeysOfHelper<T> extends undefined ? never : RequiredKeysOfHelper<T>;
/** The init argument: optional when the operation has no required parameter or body (as openapi-fetch). */
type InitParam<Init> = RequiredKeysOf<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];
type Init<P extends keyof paths, M extends HttpMethod> = MaybeOptionalInit<paths[P], M>;
/** The body of the operation's 2xx answer. */
export type SuccessData<P extends PathsWithMethod<M>, M extends HttpMethod, I = object> = MethodResponse<Client<paths>, M, P, I>;

/** A successful answer: the typed body, the answer, its rate-limit headers and request id. */
export interface Result<Data> {
  data: Data;
  response: Response;
  /** `X-RateLimit-*` of the answer (undefined for the unauthenticated health checks). */
  rateLimit: RateLimit | undefined;
  /** `X-Request-Id` of the answer. */
  requestId: string | undefined;
}

type Method<M extends HttpMethod> = <P extends PathsWithMethod<M>, I extends Init<P, M>>(
  path: P,
  ...init: InitParam<I>
) => Promise<Result<SuccessData<P, M, I>>>;

type GetPath = PathsWithMethod<'get'>;
/** The GET operations that answer a page: `{ data: [...], pagination: { next_cursor, ... } }`. */
export type ListPath = {
  [P in GetPath]: SuccessData<P, 'get'> extends { data: unknown[]; pagination: { next_cursor: string | null } } ? P : never;
}[GetPath];
/** One element of a list operation's `data`. */
export type ListItem<P extends ListPath> = SuccessData<P, 'get'> extends { data: Array<infer Item> } ? Item : never;

export interface ClientOptions {
  /** The API's base URL, e.g. `https://api.example.com` (no trailing `/v1`). */
  baseUrl: string;
  /** The account's API key (`fcd_…`), sent as `X-API-Key`. Keep it on servers. */
  apiKey: string;
  /** Retries of 429 and 503 (default: 3 retries, waits capped at 30 s); `false` turns them off. */
  retry?: RetryOptions | false;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  /** The fetch used to send (default: the global fetch), e.g. to add a proxy agent or for tests. */
  fetch?: (request: Request) => Promise<Response>;
  /** How retries wait (default: a timer); tests inject one that records and returns at once. */
  sleep?: Sleep;
  /** The clock `Retry-After` dates are read against (default `Date.now`). */
  now?: () => number;
}

export interface FcdClient {
  GET: Method<'get'>;
  POST: Method<'post'>;
  PATCH: Method<'patch'>;
  DELETE: Method<'delete'>;
  /**
   * The pages of a list, first to last, following `pagination.next_cursor`: one request per page,
   * made when the loop asks for it (`for await (const page of client.pages(...))`).
   */
  pages<P extends ListPath, I extends Init<P, 'get'>>(path: P, ...init: InitParam<I>): AsyncGenerator<Result<SuccessData<P, 'get', I>>>;
  /** The elements of every page of a list, in order (`for await (const facility of client.items(...))`). */
  items<P extends ListPath, I extends Init<P, 'get'>>(path: P, ...init: InitParam<I>): AsyncGenerator<ListItem<P>>;
  /** The rate-limit headers of the latest answer that had them. */
  readonly rateLimit: RateLimit | undefined;
  /**
   * The underlying openapi-fetch client (same key, same retries) for what the methods above do not
   * cover: it returns `{ data, error, response }` instead of throwing.
   */
  readonly raw: Client<paths>;
}

export function createClient(options: ClientOptions): FcdClient {
  if (typeof options.apiKey !== 'string' || options.apiKey === '') {
    throw new TypeError('createClient: apiKey is required (the X-API-Key of your account)');
  }
  const baseFetch = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const now = options.now ?? Date.now;
  const fetch =
    options.retry === false
      ? baseFetch
      : retryingFetch(baseFetch, {
          ...(options.retry ? { retry: options.retry } : {}),
          ...(options.sleep ? { sleep: options.sleep } : {}),
          now,
        });
  const raw = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { ...options.headers, 'X-API-Key': options.apiKey },
    fetch,
  });
  let latest: RateLimit | undefined;

  async function settle<Data>(pending: Promise<{ data?: unknown; error?: unknown; response: Response }>): Promise<Result<Data>> {
    const { data, error, response } = await pending;
    const rateLimit = rateLimitOf(response.headers);
    if (rateLimit) latest = rateLimit;
    if (!response.ok) throw errorFromResponse(response, error, now());
    return { data: data as Data, response, rateLimit, requestId: response.headers.get('x-request-id') ?? undefined };
  }

  // openapi-fetch's methods are generic over the path; the signatures above keep the typing, so
  // the calls below only forward their arguments.
  type Untyped = (path: string, init?: object) => Promise<{ data?: unknown; error?: unknown; response: Response }>;
  const method = (call: Untyped) => (path: string, init?: object) => settle(call(path, init));

  const GET = method(raw.GET as Untyped);

  async function* pages(path: string, init?: { params?: { query?: Record<string, unknown> } }) {
    let cursor = init?.params?.query?.cursor as string | undefined;
    for (;;) {
      const query = { ...init?.params?.query, ...(cursor === undefined ? {} : { cursor }) };
      const page = await GET(path, { ...init, params: { ...init?.params, query } });
      yield page;
      const next = (page.data as { pagination: { next_cursor: string | null } }).pagination.next_cursor;
      if (next === null || next === undefined || next === '') return;
      if (next === cursor) throw new Error(`pages: ${path} answered the same cursor twice`);
      cursor = next;
    }
  }

  async function* items(path: string, init?: { params?: { query?: Record<string, unknown> } }) {
    for await (const page of pages(path, init)) yield* (page.data as { data: unknown[] }).data;
  }

  return {
    GET,
    POST: method(raw.POST as Untyped),
    PATCH: method(raw.PATCH as Untyped),
    DELETE: method(raw.DELETE as Untyped),
    pages,
    items,
    get rateLimit() {
      return latest;
    },
    raw,
  } as unknown as FcdClient;
}
