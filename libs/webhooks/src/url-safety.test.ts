import { describe, expect, it } from 'vitest';
import {
  type AddressClass,
  classifyAddress,
  isAddressAllowed,
  parseAllowedPorts,
  parseWebhookUrl,
  type ResolvedAddress,
  type Resolver,
} from './url-policy';
import { checkWebhookUrl, safeLookup } from './url-safety';

const dnsError = (code: string) => Object.assign(new Error(code), { code });

/** A resolver answering from a table; unknown names are NXDOMAIN. */
function fakeResolver(table: Record<string, string[] | Error>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolver = async (hostname: string): Promise<ResolvedAddress[]> => {
    calls.push(hostname);
    const entry = table[hostname];
    if (entry === undefined) throw dnsError('ENOTFOUND');
    if (entry instanceof Error) throw entry;
    return entry.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolver, { calls });
}

describe('classifyAddress', () => {
  const table: Array<[string, AddressClass]> = [
    ['93.184.215.14', 'public'],
    ['8.8.8.8', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.1.1', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.127.255.255', 'carrierGradeNat'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['::7f00:1', 'reserved'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.0.0.5', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:93.184.215.14', 'public'],
    ['64:ff9b::a00:5', 'private'],
    ['64:ff9b::5db8:d70e', 'public'],
    ['[::1]', 'loopback'],
    ['not-an-ip', 'invalid'],
    ['', 'invalid'],
  ];
  it.each(table)('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it('allows only public addresses by default; private ones when allowed, but never metadata', () => {
    expect(isAddressAllowed('93.184.215.14', false)).toBe(true);
    expect(isAddressAllowed('127.0.0.1', false)).toBe(false);
    expect(isAddressAllowed('127.0.0.1', true)).toBe(true);
    expect(isAddressAllowed('10.1.2.3', true)).toBe(true);
    expect(isAddressAllowed('169.254.169.254', true)).toBe(false);
    expect(isAddressAllowed('fd00:ec2::254', true)).toBe(false);
    expect(isAddressAllowed('::ffff:169.254.169.254', true)).toBe(false);
    expect(isAddressAllowed('garbage', true)).toBe(false);
  });
});

describe('allowed receiver ports (WEBHOOK_ALLOWED_PORTS)', () => {
  it('refuses a port the dispatcher cannot reach, naming the allowed ones, and accepts the allowed ones', () => {
    expect(parseWebhookUrl('https://example.com:8443/hook', false, [443])).toEqual({
      ok: false,
      code: 'port',
      message: 'must use port 443 (webhooks are delivered only to this port; got 8443)',
      retryable: false,
    });
    expect(parseWebhookUrl('https://example.com:9000/hook', false, [443, 8443])).toMatchObject({
      ok: false,
      code: 'port',
      message: 'must use port 443, 8443 (webhooks are delivered only to these ports; got 9000)',
    });
    expect(parseWebhookUrl('https://example.com/hook', false, [443]).ok).toBe(true);
    expect(parseWebhookUrl('https://example.com:443/hook', false, [443]).ok).toBe(true);
    expect(parseWebhookUrl('https://example.com:8443/hook', false, [443, 8443]).ok).toBe(true);
  });

  it('leaves ports open with private URLs allowed (local receivers) and without a list', () => {
    expect(parseWebhookUrl('http://127.0.0.1:23456/hook', true, [443]).ok).toBe(true);
    expect(parseWebhookUrl('https://example.com:8443/hook', false).ok).toBe(true);
  });

  it('parses the comma-separated setting', () => {
    expect(parseAllowedPorts('443')).toEqual([443]);
    expect(parseAllowedPorts(' 443, 8443 ')).toEqual([443, 8443]);
  });
});

describe('parseWebhookUrl (no network)', () => {
  const refused: Array<[string, string, RegExp]> = [
    ['http://example.com/hook', 'scheme', /https/],
    ['ftp://example.com/hook', 'scheme', /https/],
    ['https://user:pw@example.com/hook', 'credentials', /user name or password/],
    ['https://example.com:0/hook', 'invalid', /port 0/],
    ['https://user@example.com/hook', 'credentials', /user name or password/],
    ['https://@example.com/hook', 'credentials', /user name or password/],
    [`https://example.com/${'a'.repeat(2049 - 20)}`, 'too_long', /2048/],
    ['', 'invalid', /absolute https URL/],
    ['example.com/hook', 'invalid', /absolute https URL/],
    ['https://', 'invalid', /absolute https URL/],
    ['https://exa mple.com/', 'invalid', /whitespace/],
    [' https://example.com/', 'invalid', /whitespace/],
    ['https://example.com/\n', 'invalid', /whitespace/],
    ['https://127.0.0.1/hook', 'blocked_address', /loopback/],
    ['https://127.1/hook', 'blocked_address', /loopback/],
    ['https://2130706433/hook', 'blocked_address', /loopback/],
    ['https://0x7f000001/hook', 'blocked_address', /loopback/],
    ['https://10.0.0.5/hook', 'blocked_address', /private/],
    ['https://[::1]/hook', 'blocked_address', /loopback/],
    ['https://[::ffff:127.0.0.1]/hook', 'blocked_address', /loopback/],
    ['https://[fd00:ec2::254]/latest', 'blocked_address', /metadata/],
    ['https://169.254.169.254/latest/meta-data', 'blocked_address', /metadata/],
    ['https://0.0.0.0/', 'blocked_address', /unspecified/],
    ['https://metadata.google.internal/computeMetadata/v1/', 'blocked_host', /metadata/],
    ['https://METADATA.GOOGLE.INTERNAL./x', 'blocked_host', /metadata/],
    ['https://localhost:8443/hook', 'blocked_host', /loopback/],
    ['https://api.localhost/hook', 'blocked_host', /loopback/],
  ];
  it.each(refused)('refuses %s (%s)', (input, code, message) => {
    const result = parseWebhookUrl(input, false);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.code).toBe(code);
      expect(result.message).toMatch(message);
      expect(result.retryable).toBe(false);
    }
  });

  it('accepts a 2048-character https URL and reports the bare host name', () => {
    const input = `https://Example.COM./${'a'.repeat(2048 - 21)}`;
    expect(input).toHaveLength(2048);
    const result = parseWebhookUrl(input, false);
    expect(result.ok && result.hostname).toBe('example.com');
  });

  it('with private destinations allowed: http, loopback and private literals pass, metadata does not', () => {
    expect(parseWebhookUrl('http://127.0.0.1:3000/hook', true).ok).toBe(true);
    expect(parseWebhookUrl('https://[::1]/hook', true).ok).toBe(true);
    expect(parseWebhookUrl('http://localhost:3000/hook', true).ok).toBe(true);
    expect(parseWebhookUrl('http://169.254.169.254/', true).ok).toBe(false);
    expect(parseWebhookUrl('http://metadata.google.internal/', true).ok).toBe(false);
    expect(parseWebhookUrl('ftp://127.0.0.1/', true).ok).toBe(false);
    expect(parseWebhookUrl('http://u:p@127.0.0.1/', true).ok).toBe(false);
  });
});

describe('checkWebhookUrl (resolves the host)', () => {
  const resolver = fakeResolver({
    'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'internal.example.com': ['10.1.2.3'],
    'mixed.example.com': ['93.184.215.14', '192.168.0.10'],
    'mapped.example.com': ['::ffff:127.0.0.1'],
    'imds.example.com': ['169.254.169.254'],
    'cgnat.example.com': ['100.64.1.1'],
    'empty.example.com': [],
    'flaky.example.com': dnsError('EAI_AGAIN'),
    'gone.example.com': dnsError('ENODATA'),
  });

  it('accepts a host whose every address is public and returns them', async () => {
    const result = await checkWebhookUrl('https://hooks.example.com/fcd', { allowPrivate: false, resolver });
    expect(result).toMatchObject({ ok: true, hostname: 'hooks.example.com' });
    expect(result.ok && result.addresses.map((a) => a.address)).toEqual(['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c']);
  });

  it.each([
    ['internal.example.com', /private address/],
    ['mixed.example.com', /private address/],
    ['mapped.example.com', /loopback/],
    ['imds.example.com', /metadata/],
    ['cgnat.example.com', /carrier-grade NAT/],
  ])('refuses %s, which resolves to a forbidden address', async (host, message) => {
    const result = await checkWebhookUrl(`https://${host}/hook`, { allowPrivate: false, resolver });
    expect(result).toMatchObject({ ok: false, code: 'blocked_address', retryable: false });
    expect(!result.ok && result.message).toMatch(message);
  });

  it('does not resolve IP literals or URLs refused before DNS', async () => {
    const r = fakeResolver({});
    expect((await checkWebhookUrl('https://93.184.215.14/x', { allowPrivate: false, resolver: r })).ok).toBe(true);
    expect((await checkWebhookUrl('http://hooks.example.com/x', { allowPrivate: false, resolver: r })).ok).toBe(false);
    expect(r.calls).toEqual([]);
  });

  it('says a name that does not resolve is unresolvable, and a failing resolver is retryable', async () => {
    for (const host of ['nowhere.example.com', 'empty.example.com', 'gone.example.com']) {
      expect(await checkWebhookUrl(`https://${host}/`, { allowPrivate: false, resolver })).toMatchObject({
        ok: false,
        code: 'unresolvable',
      });
    }
    expect(await checkWebhookUrl('https://flaky.example.com/', { allowPrivate: false, resolver })).toMatchObject({
      ok: false,
      code: 'dns_unavailable',
      retryable: true,
    });
  });

  it('bounds a hanging resolution by the timeout', async () => {
    const hanging: Resolver = () => new Promise(() => undefined);
    expect(await checkWebhookUrl('https://slow.example.com/', { allowPrivate: false, resolver: hanging, dnsTimeoutMs: 20 })).toMatchObject({
      ok: false,
      code: 'dns_unavailable',
    });
  });

  it('allows private resolutions when private destinations are allowed, except metadata', async () => {
    expect((await checkWebhookUrl('http://internal.example.com/', { allowPrivate: true, resolver })).ok).toBe(true);
    expect((await checkWebhookUrl('https://imds.example.com/', { allowPrivate: true, resolver })).ok).toBe(false);
  });

  it('uses node:dns by default (localhost resolves to loopback addresses)', async () => {
    const result = await checkWebhookUrl('http://localhost:9/hook', { allowPrivate: true });
    expect(result.ok).toBe(true);
    expect(result.ok && result.addresses.length > 0 && result.addresses.every((a) => classifyAddress(a.address) === 'loopback')).toBe(true);
    expect(await checkWebhookUrl('https://localhost./hook', { allowPrivate: false })).toMatchObject({ ok: false, code: 'blocked_host' });
  });
});

describe('safeLookup (connection-time guard for the dispatcher)', () => {
  const resolver = fakeResolver({ 'hooks.example.com': ['93.184.215.14'], 'rebound.example.com': ['127.0.0.1'] });
  const lookup = safeLookup({ allowPrivate: false, resolver });
  const call = (host: string, options: { all?: boolean }) =>
    new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) =>
      lookup(host, options, (err, address, family) => resolve({ err, address, family })),
    );

  it('passes allowed answers through, in single and all forms', async () => {
    expect(await call('hooks.example.com', {})).toEqual({ err: null, address: '93.184.215.14', family: 4 });
    expect(await call('hooks.example.com', { all: true })).toMatchObject({ err: null, address: [{ address: '93.184.215.14', family: 4 }] });
  });

  it('fails with EBLOCKED when the name now resolves to a forbidden address', async () => {
    const { err } = await call('rebound.example.com', {});
    expect(err?.code).toBe('EBLOCKED');
    expect((await call('169.254.169.254', {})).err?.code).toBe('EBLOCKED');
    expect((await call('nowhere.example.com', {})).err?.code).toBe('ENOTFOUND');
  });
});
