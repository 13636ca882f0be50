import type { ListPosition } from '@fcd/webhooks';

/**
 * Opaque keyset cursor for the subscription list: base64url of the last row's
 * (created_at, id). Clients must not build or parse it.
 */
const ID = /^wh_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function encodeCursor(position: ListPosition): string {
  return Buffer.from(JSON.stringify([position.created_at, position.id]), 'utf8').toString('base64url');
}

/** undefined when the text is not a cursor this service issued. */
export function decodeCursor(text: string, idPattern: RegExp = ID): ListPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,400}$/.test(text)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) return undefined;
    const [createdAt, id] = value as unknown[];
    if (typeof createdAt !== 'string' || !ISO.test(createdAt) || Number.isNaN(Date.parse(createdAt))) return undefined;
    if (typeof id !== 'string' || !idPattern.test(id)) return undefined;
    return { created_at: createdAt, id };
  } catch {
    return undefined;
  }
}
