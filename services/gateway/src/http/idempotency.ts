import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/**
 * `Idempotency-Key` on every POST (Stripe's convention; docs/api.md, "Idempotent POSTs"; ADR 0005).
 *
 * One Redis key per (account, Idempotency-Key): `<prefix>idem:{<account_id>}:<sha256(key)>`. The
 * first request takes it with `SET NX` as "in progress" (a short lease: the upstream timeout plus a
 * margin), does the work, then replaces it with its answer (status, the headers that describe the
 * body, the body bytes) for 24 h. The answer is encrypted (AES-256-GCM, key derived from the
 * gateway's INTERNAL_AUTH_SECRET, the Redis key as associated data): a webhook's secret is in the
 * body of its creation and rotation, and must not lie in Redis in clear.
 *
 * Each record carries a fingerprint of the request (method, path with query, JSON body): the same
 * key with another request is refused. Replacing and releasing check the lease's token, so a
 * request whose lease expired cannot overwrite the answer of the one that took the key after it.
 */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export type Begin =
  | { kind: 'run'; token: string }
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'mismatch' }
  | { kind: 'in_progress' };

/** Replaces the lease by the answer (or deletes it) only if it is still this request's lease. */
const SETTLE_LUA = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, rec = pcall(cjson.decode, v)
if not ok or rec.s ~= 'p' or rec.t ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
`;

type RedisWithSettle = Redis & { fcdIdemSettle(key: string, token: string, record: string, ttlMs: number): Promise<number> };

interface Lease {
  s: 'p';
  f: string;
  t: string;
}
interface Done {
  s: 'd';
  f: string;
  /** base64url: 12-byte IV ‖ ciphertext ‖ 16-byte tag. */
  a: string;
}

/** Visible ASCII, 1–255 characters (Stripe allows 255). */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

export class IdempotencyStore {
  private readonly redis: RedisWithSettle;
  private readonly key: Buffer;

  constructor(
    redis: Redis | Cluster,
    private readonly prefix: string,
    secret: string,
    private readonly options: { ttlMs: number; leaseMs: number },
  ) {
    redis.defineCommand('fcdIdemSettle', { numberOfKeys: 1, lua: SETTLE_LUA });
    this.redis = redis as RedisWithSettle;
    this.key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'fcd gateway idempotency v1', 32));
  }

  redisKey(accountId: string, idempotencyKey: string): string {
    return `${this.prefix}idem:{${accountId}}:${createHash('sha256').update(idempotencyKey).digest('base64url')}`;
  }

  /** The request's fingerprint: method, path with query and body, as the upstream receives them. */
  static fingerprint(method: string, url: string, body: string | undefined): string {
    return createHash('sha256')
      .update(`${method} ${url}\n${body ?? ''}`)
      .digest('base64url');
  }

  /** Takes the key (run the work), or says what is there. Throws when Redis is unreachable. */
  async begin(redisKey: string, fingerprint: string): Promise<Begin> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const token = randomUUID();
      const lease: Lease = { s: 'p', f: fingerprint, t: token };
      if ((await this.redis.set(redisKey, JSON.stringify(lease), 'PX', this.options.leaseMs, 'NX')) === 'OK') return { kind: 'run', token };
      const raw = await this.redis.get(redisKey);
      if (raw === null) continue; // expired or released in between: try to take it again
      const rec = JSON.parse(raw) as Lease | Done;
      if (rec.f !== fingerprint) return { kind: 'mismatch' };
      if (rec.s === 'p') return { kind: 'in_progress' };
      return { kind: 'replay', answer: this.open(redisKey, rec.a) };
    }
    return { kind: 'in_progress' };
  }

  /** Stores the answer for the TTL in place of this request's lease. False when the lease was lost. */
  async complete(redisKey: string, fingerprint: string, token: string, answer: StoredAnswer): Promise<boolean> {
    const done: Done = { s: 'd', f: fingerprint, a: this.seal(redisKey, answer) };
    return (await this.redis.fcdIdemSettle(redisKey, token, JSON.stringify(done), this.options.ttlMs)) === 1;
  }

  /** Releases this request's lease (the work failed retryably: the same key may run again). */
  async release(redisKey: string, token: string): Promise<void> {
    await this.redis.fcdIdemSettle(redisKey, token, '', 0);
  }

  private seal(redisKey: string, answer: StoredAnswer): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(redisKey));
    const plain = Buffer.from(JSON.stringify({ status: answer.status, headers: answer.headers, body: answer.body.toString('base64') }));
    return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]).toString('base64url');
  }

  private open(redisKey: string, sealed: string): StoredAnswer {
    const raw = Buffer.from(sealed, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(redisKey));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    const plain = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]);
    const parsed = JSON.parse(plain.toString('utf8')) as { status: number; headers: Record<string, string>; body: string };
    return { status: parsed.status, headers: parsed.headers, body: Buffer.from(parsed.body, 'base64') };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }
}
