/** What the portal's integration tests share: requests with or without the session cookie, and its attributes. */
export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export async function send(base: string, path: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await fetch(`${base}${path}`, { redirect: 'manual', ...init });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** The session token of an answer's Set-Cookie (fcd_portal), or undefined. */
export function cookieToken(answer: Answer): string | undefined {
  const header = answer.headers.getSetCookie().find((c) => c.startsWith('fcd_portal='));
  return header?.slice('fcd_portal='.length).split(';')[0];
}

/** The attributes of the fcd_portal Set-Cookie, as sent (name=value first). */
export function cookieAttributes(answer: Answer): string[] {
  const header = answer.headers.getSetCookie().find((c) => c.startsWith('fcd_portal='));
  return header ? header.split(';').map((p) => p.trim()) : [];
}

export const withCookie = (token: string, headers: Record<string, string> = {}) => ({ cookie: `fcd_portal=${token}`, ...headers });
