/// <reference lib="dom" />
/**
 * The portal's one way to the server: same-origin fetch with the session cookie (never an API key:
 * the browser holds no key), the CSRF token in memory on every POST, PATCH and DELETE, and the
 * API's error envelope turned into an ApiError. A 401 from /v1 means the session ended: the app
 * is told (SIGNED_OUT) and shows the sign-in form again.
 */

export interface Session {
  account_id: string;
  tier: string;
  csrf_token: string;
  expires_at: string;
}

export interface Page<T> {
  data: T[];
  pagination?: { limit: number; next_cursor: string | null; has_more: boolean };
}

export const SIGNED_OUT = 'portal:signed-out';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

let csrfToken: string | undefined;

interface Envelope {
  data?: unknown;
  error?: { code?: string; message?: string; details?: unknown };
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  try {
    return await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      body: body === undefined ? null : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'NETWORK', 'The server could not be reached. Check your connection and try again.');
  }
}

async function parse(response: Response): Promise<Envelope | undefined> {
  const text = await response.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text) as Envelope;
  } catch {
    throw new ApiError(response.status, 'BAD_RESPONSE', `The server answered ${response.status} with a body that is not JSON.`);
  }
}

/** A call to the API; resolves to the whole body (`{ data, pagination? }`), undefined for a 204. */
export async function call<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await send(method, path, body);
  const parsed = await parse(response);
  if (response.ok) return parsed as T;
  const error = parsed?.error;
  if (response.status === 401 && path.startsWith('/v1/')) window.dispatchEvent(new Event(SIGNED_OUT));
  throw new ApiError(
    response.status,
    error?.code ?? 'HTTP_ERROR',
    error?.message ?? `The server answered ${response.status}.`,
    error?.details,
  );
}

/** The `data` of a call. */
export async function data<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await call<Envelope | undefined>(method, path, body))?.data as T;
}

/** The session's body, whether the server sends it bare or as `{ data }`. */
function sessionOf(body: unknown): Session {
  const inner = (body as Envelope | undefined)?.data ?? body;
  const session = inner as Session;
  csrfToken = session.csrf_token;
  return session;
}

/** The current session, or null when there is none (401). */
export async function currentSession(): Promise<Session | null> {
  try {
    return sessionOf(await call('GET', '/portal/session'));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

/** Signs in with an API key: the key goes to the server once and is not kept in the page. */
export async function signIn(apiKey: string): Promise<Session> {
  return sessionOf(await call('POST', '/portal/session', { api_key: apiKey }));
}

export async function signOut(): Promise<void> {
  try {
    await call('DELETE', '/portal/session');
  } finally {
    csrfToken = undefined;
  }
}
