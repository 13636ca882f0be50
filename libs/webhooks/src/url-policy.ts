import ipaddr from 'ipaddr.js';

/**
 * Destination safety for webhook URLs (docs/webhooks.md): the API checks a URL when a
 * subscription is created or updated, and the dispatcher checks it again right
 * before each delivery against the addresses it is about to connect to (DNS
 * rebinding). One policy, one function, both places. DNS is the caller's `Resolver`; the
 * node:dns one and the checks that default to it are in ./url-safety.ts.
 */

export const MAX_URL_LENGTH = 2048;

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address (node:dns `lookup` with `all: true`, injectable in tests). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface UrlPolicy {
  /** WEBHOOK_ALLOW_PRIVATE_URLS: allows http and private, loopback and link-local destinations (local development and tests). */
  allowPrivate: boolean;
  /**
   * WEBHOOK_ALLOWED_PORTS: the ports a receiver URL may use (the dispatcher's egress opens only
   * these; default 443). Not enforced with `allowPrivate` (local receivers use any port).
   */
  allowedPorts?: readonly number[];
  resolver?: Resolver;
  /** Upper bound for one resolution. */
  dnsTimeoutMs?: number;
}

/** A policy with the resolver it resolves with (this module does no I/O of its own). */
export type ResolvingUrlPolicy = UrlPolicy & { resolver: Resolver };

export type UrlProblemCode =
  | 'too_long'
  | 'invalid'
  | 'scheme'
  | 'port'
  | 'credentials'
  | 'blocked_host'
  | 'blocked_address'
  | 'unresolvable'
  | 'dns_unavailable';

export type UrlCheck =
  | { ok: true; url: URL; hostname: string; addresses: ResolvedAddress[] }
  | {
      ok: false;
      code: UrlProblemCode;
      message: string /** True when the same URL may pass later (DNS temporarily failing). */;
      retryable: boolean;
    };

// ---------------------------------------------------------------------------
// Addresses

export type AddressClass =
  | 'public'
  | 'metadata'
  | 'loopback'
  | 'private'
  | 'linkLocal'
  | 'multicast'
  | 'unspecified'
  | 'carrierGradeNat'
  | 'uniqueLocal'
  | 'broadcast'
  | 'reserved'
  | 'invalid';

/** Cloud instance metadata endpoints: refused even when private destinations are allowed. */
const METADATA_ADDRESSES = new Set([
  '169.254.169.254', // AWS, GCP, Azure, OpenStack, DigitalOcean, ...
  '169.254.170.2', // AWS ECS task metadata
  '100.100.100.200', // Alibaba Cloud
  'fd00:ec2:0:0:0:0:0:254', // AWS IMDS over IPv6
]);
const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

const NAT64_PREFIX = ipaddr.IPv6.parse('64:ff9b::');
const IPV4_COMPATIBLE = ipaddr.IPv6.parse('::');

function embeddedIPv4(v6: ipaddr.IPv6): ipaddr.IPv4 {
  const b = v6.toByteArray();
  return new ipaddr.IPv4(b.slice(12, 16));
}

function classifyParsed(addr: ipaddr.IPv4 | ipaddr.IPv6): AddressClass {
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    // IPv4 in IPv6 clothing is judged as the IPv4 address it carries.
    if (v6.isIPv4MappedAddress()) return classifyParsed(v6.toIPv4Address());
    if (v6.match(NAT64_PREFIX, 96)) return classifyParsed(embeddedIPv4(v6));
    if (METADATA_ADDRESSES.has(v6.toNormalizedString())) return 'metadata';
    const range = v6.range();
    if (range === 'unicast') {
      // ::/96 (deprecated IPv4-compatible addresses) is not routable unicast.
      return v6.match(IPV4_COMPATIBLE, 96) ? 'reserved' : 'public';
    }
    switch (range) {
      case 'loopback':
      case 'linkLocal':
      case 'multicast':
      case 'unspecified':
      case 'uniqueLocal':
        return range;
      default:
        return 'reserved';
    }
  }
  const v4 = addr as ipaddr.IPv4;
  if (METADATA_ADDRESSES.has(v4.toString())) return 'metadata';
  const range = v4.range();
  switch (range) {
    case 'unicast':
      return 'public';
    case 'loopback':
    case 'private':
    case 'linkLocal':
    case 'multicast':
    case 'unspecified':
    case 'carrierGradeNat':
    case 'broadcast':
      return range;
    default:
      return 'reserved';
  }
}

/** Classifies an IP address literal (IPv4, IPv6, IPv4-mapped IPv6, NAT64). */
export function classifyAddress(address: string): AddressClass {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (!ipaddr.isValid(bare)) return 'invalid';
  return classifyParsed(ipaddr.parse(bare));
}

/**
 * The destination rule: only public unicast addresses, unless private
 * destinations are allowed, in which case everything but cloud metadata
 * endpoints (and garbage) passes.
 */
export function isAddressAllowed(address: string, allowPrivate: boolean): boolean {
  const cls = classifyAddress(address);
  if (cls === 'public') return true;
  if (cls === 'metadata' || cls === 'invalid') return false;
  return allowPrivate;
}

const CLASS_TEXT: Record<AddressClass, string> = {
  public: 'a public address',
  metadata: 'a cloud metadata address',
  loopback: 'a loopback address',
  private: 'a private address',
  linkLocal: 'a link-local address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  carrierGradeNat: 'a carrier-grade NAT address',
  uniqueLocal: 'a unique-local address',
  broadcast: 'a broadcast address',
  reserved: 'a reserved address',
  invalid: 'an invalid address',
};

// ---------------------------------------------------------------------------
// URLs

function fail(code: UrlProblemCode, message: string, retryable = false): UrlCheck & { ok: false } {
  return { ok: false, code, message, retryable };
}

/**
 * The checks that need no network: length, syntax, scheme, credentials, and a
 * host that is not a metadata name, `localhost`, or a disallowed IP literal.
 * Returns the parsed URL and the bare host name (IPv6 without brackets, no
 * trailing dot, lower case).
 */
export function parseWebhookUrl(
  input: string,
  allowPrivate: boolean,
  allowedPorts: readonly number[] = [],
): { ok: true; url: URL; hostname: string } | (UrlCheck & { ok: false }) {
  if (input.length > MAX_URL_LENGTH) return fail('too_long', `must be at most ${MAX_URL_LENGTH} characters`);
  if (input.length === 0) return fail('invalid', 'must be an absolute https URL');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\s\u0000-\u001f\u007f]/.test(input)) return fail('invalid', 'must not contain whitespace or control characters');
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return fail('invalid', 'must be an absolute https URL');
  }
  const schemes = allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) return fail('scheme', allowPrivate ? 'must use https or http' : 'must use https');
  if (url.username !== '' || url.password !== '' || /^[a-z]+:\/\/[^/?#]*@/i.test(input)) {
    return fail('credentials', 'must not contain a user name or password');
  }
  // The URL parser accepts port 0, to which nothing can ever be delivered.
  if (url.port === '0') return fail('invalid', 'must not use port 0');
  if (!allowPrivate && allowedPorts.length > 0) {
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    if (!allowedPorts.includes(port)) {
      const list = allowedPorts.join(', ');
      return fail(
        'port',
        `must use port ${list} (webhooks are delivered only to ${allowedPorts.length > 1 ? 'these ports' : 'this port'}; got ${port})`,
      );
    }
  }
  let hostname = url.hostname.toLowerCase();
  if (hostname.startsWith('[') && hostname.endsWith(']')) hostname = hostname.slice(1, -1);
  hostname = hostname.replace(/\.+$/, '');
  if (hostname === '') return fail('invalid', 'must have a host');
  if (METADATA_HOSTS.has(hostname)) return fail('blocked_host', 'must not point to a cloud metadata service');
  if (ipaddr.isValid(hostname)) {
    if (!isAddressAllowed(hostname, allowPrivate)) {
      return fail('blocked_address', `must not point to ${CLASS_TEXT[classifyAddress(hostname)]}`);
    }
  } else if (!allowPrivate && (hostname === 'localhost' || hostname.endsWith('.localhost'))) {
    return fail('blocked_host', `must not point to ${CLASS_TEXT.loopback}`);
  }
  return { ok: true, url, hostname };
}

const NOT_FOUND_CODES = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA', 'ENONAME']);

async function resolveWithTimeout(resolver: Resolver, hostname: string, timeoutMs: number): Promise<ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      resolver(hostname),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('DNS lookup timed out'), { code: 'ETIMEOUT' })), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The full check: `parseWebhookUrl`, then resolves the host and requires every
 * address it resolves to be allowed (one bad address is enough to refuse: the
 * client may connect to any of them). The dispatcher connects only to the
 * addresses returned here (or uses `safeLookup`), so a later DNS answer cannot
 * sneak a private address in. The resolver is the caller's (`checkWebhookUrl` uses node:dns).
 */
export async function checkWebhookUrlWith(input: string, policy: ResolvingUrlPolicy): Promise<UrlCheck> {
  const parsed = parseWebhookUrl(input, policy.allowPrivate, policy.allowedPorts);
  if (!parsed.ok) return parsed;
  const { url, hostname } = parsed;
  if (ipaddr.isValid(hostname)) {
    const family = ipaddr.parse(hostname).kind() === 'ipv6' ? 6 : 4;
    return { ok: true, url, hostname, addresses: [{ address: hostname, family }] };
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolveWithTimeout(policy.resolver, hostname, policy.dnsTimeoutMs ?? 3000);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (NOT_FOUND_CODES.has(code)) return fail('unresolvable', 'host name does not resolve');
    return fail('dns_unavailable', 'host name could not be resolved right now', true);
  }
  if (addresses.length === 0) return fail('unresolvable', 'host name does not resolve');
  for (const a of addresses) {
    if (!isAddressAllowed(a.address, policy.allowPrivate)) {
      return fail('blocked_address', `must not point to ${CLASS_TEXT[classifyAddress(a.address)]} (the host resolves to one)`);
    }
  }
  return { ok: true, url, hostname, addresses };
}

/**
 * A `lookup` for `net.connect`/undici's `connect` option that resolves like
 * node:dns but fails with EBLOCKED when an answer is not an allowed address —
 * the dispatcher's guard at connection time (`safeLookup` resolves with node:dns).
 */
export function safeLookupWith(policy: ResolvingUrlPolicy) {
  const resolver = policy.resolver;
  return (
    hostname: string,
    options: { all?: boolean; family?: number | string } | number,
    callback: (err: NodeJS.ErrnoException | null, address: string | ResolvedAddress[], family?: number) => void,
  ): void => {
    const all = typeof options === 'object' && options.all === true;
    const bare = hostname.replace(/^\[|\]$/g, '');
    const pending: Promise<ResolvedAddress[]> = ipaddr.isValid(bare)
      ? Promise.resolve([{ address: bare, family: ipaddr.parse(bare).kind() === 'ipv6' ? 6 : 4 }])
      : resolveWithTimeout(resolver, bare, policy.dnsTimeoutMs ?? 3000);
    pending.then(
      (addresses) => {
        const blocked = addresses.find((a) => !isAddressAllowed(a.address, policy.allowPrivate));
        if (blocked || addresses.length === 0) {
          const err: NodeJS.ErrnoException = new Error(
            blocked ? `refused to connect to ${hostname}: ${CLASS_TEXT[classifyAddress(blocked.address)]}` : `${hostname} does not resolve`,
          );
          err.code = blocked ? 'EBLOCKED' : 'ENOTFOUND';
          callback(err, all ? [] : '', undefined);
          return;
        }
        if (all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, all ? [] : '', undefined),
    );
  };
}

/** WEBHOOK_ALLOWED_PORTS (comma-separated TCP ports, e.g. `443,8443`) as numbers. */
export function parseAllowedPorts(value: string): number[] {
  return value
    .split(',')
    .map((p) => Number(p.trim()))
    .filter((p) => Number.isInteger(p) && p >= 1 && p <= 65535);
}
