import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Webhook signing secrets: `whsec_` + the standard base64 of 32 bytes from the CSPRNG (44
 * characters), so both the service's own signature (keyed by the whole string) and Standard
 * Webhooks (keyed by the decoded bytes) work. Secrets made before Standard Webhooks support are
 * `whsec_` + 43 base64url characters and keep working. The dispatcher needs the clear secret to sign, so it
 * is stored encrypted (AES-256-GCM) with a key from the environment, never
 * hashed; the last 4 characters are stored apart for the redacted form.
 */
export const SECRET_PREFIX = 'whsec_';
const SECRET_PATTERN = /^whsec_[A-Za-z0-9+/_-]{32,}={0,2}$/;

export function generateSecret(random: (size: number) => Buffer = randomBytes): string {
  return SECRET_PREFIX + random(32).toString('base64');
}

export function isWellFormedSecret(value: string): boolean {
  return SECRET_PATTERN.test(value);
}

/** The last 4 characters, kept in clear for the redacted form. */
export function secretLast4(secret: string): string {
  return secret.slice(-4);
}

/** `whsec_` + 8 asterisks + the last 4 characters: what every read shows. */
export function redactSecret(secretOrLast4: string): string {
  return `${SECRET_PREFIX}********${secretOrLast4.slice(-4)}`;
}

// ---------------------------------------------------------------------------
// Encryption at rest

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const FORMAT = 'v1';

/** Base64 or base64url text that decodes to exactly 32 bytes. */
export const SECRET_KEY_PATTERN = '^[A-Za-z0-9+/_-]{42}[AEIMQUYcgkosw048]=?$';

export class SecretKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/** Decodes a 32-byte key given as base64 or base64url (the form of WEBHOOK_SECRET_KEY). */
export function decodeSecretKey(text: string): Buffer {
  const trimmed = text.trim();
  if (!new RegExp(SECRET_KEY_PATTERN).test(trimmed)) {
    throw new SecretKeyError('a webhook secret key must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)');
  }
  const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.length !== KEY_BYTES) throw new SecretKeyError('a webhook secret key must decode to exactly 32 bytes');
  return key;
}

/** A short public fingerprint of a key, stored with every ciphertext so the right key is picked after a rotation. */
export function keyId(key: Buffer): string {
  return createHash('sha256').update('fcd-webhook-secret-key\0').update(key).digest('hex').slice(0, 8);
}

/**
 * Encrypts and decrypts webhook secrets. Ciphertext format:
 * `v1:<key id>:<base64url(iv ‖ ciphertext ‖ tag)>`. The subscription id is the
 * additional authenticated data, so a ciphertext copied to another row does
 * not decrypt. Rotation: construct with the new key as `current` and the old
 * ones as `previous`; new writes use the current key, reads find theirs by id.
 */
export class SecretBox {
  private readonly currentKey: Buffer;
  private readonly currentId: string;
  private readonly keys = new Map<string, Buffer>();

  constructor(current: Buffer, previous: readonly Buffer[] = []) {
    for (const key of [current, ...previous]) {
      if (key.length !== KEY_BYTES) throw new SecretKeyError('a webhook secret key must be 32 bytes');
      const id = keyId(key);
      if (!this.keys.has(id)) this.keys.set(id, key);
    }
    this.currentKey = current;
    this.currentId = keyId(current);
  }

  /** From WEBHOOK_SECRET_KEY (and an optional comma-separated list of previous keys). */
  static fromEnv(current: string, previous?: string): SecretBox {
    const old = (previous ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map(decodeSecretKey);
    return new SecretBox(decodeSecretKey(current), old);
  }

  get keyId(): string {
    return this.currentId;
  }

  encrypt(secret: string, subscriptionId: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.currentKey, iv);
    cipher.setAAD(Buffer.from(subscriptionId, 'utf8'));
    const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    const blob = Buffer.concat([iv, body, cipher.getAuthTag()]);
    return `${FORMAT}:${this.currentId}:${blob.toString('base64url')}`;
  }

  /** Throws when the ciphertext is malformed, was written with an unknown key, or was tampered with. */
  decrypt(ciphertext: string, subscriptionId: string): string {
    const [format, id, data, ...rest] = ciphertext.split(':');
    if (format !== FORMAT || id === undefined || data === undefined || rest.length > 0) {
      throw new SecretKeyError('unrecognised webhook secret ciphertext');
    }
    const key = this.keys.get(id);
    if (!key) throw new SecretKeyError(`webhook secret was encrypted with key ${id}, which is not configured`);
    const blob = Buffer.from(data, 'base64url');
    if (blob.length < IV_BYTES + TAG_BYTES + 1) throw new SecretKeyError('webhook secret ciphertext is truncated');
    const decipher = createDecipheriv('aes-256-gcm', key, blob.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(subscriptionId, 'utf8'));
    decipher.setAuthTag(blob.subarray(blob.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(blob.subarray(IV_BYTES, blob.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretKeyError('webhook secret ciphertext failed authentication');
    }
  }

  /** True when the ciphertext was not written with the current key (a candidate for re-encryption). */
  needsRotation(ciphertext: string): boolean {
    return ciphertext.split(':')[1] !== this.currentId;
  }
}
