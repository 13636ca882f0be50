import { createHmac } from 'node:crypto';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';
import { verifyDeliveryHeaders } from './receiver.js';
import { sign, signatureHeader, verifyAny } from './signature.js';
import { standardKey, standardSignature, standardSignatureHeader, verifyStandard } from './standard.js';

const NEW = `whsec_${Buffer.alloc(32, 0xfb).toString('base64')}`; // standard base64: contains + and /
const OLD_STYLE = `whsec_${Buffer.alloc(32, 0xfb).toString('base64url')}`; // a secret made before: - and _
const OTHER = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const id = 'evt_8a1f0c7e-1b2c-4d3e-8f90-0123456789ab';
const body = '{"id":"evt_8a1f0c7e-1b2c-4d3e-8f90-0123456789ab","type":"violation.new","created_at":"2026-11-24T00:00:00.000Z","data":{}}';
const nowMs = Date.parse('2026-11-24T00:00:05.000Z');
const ts = Math.floor(nowMs / 1000);

const headersOf = (signature: string, timestamp = ts, msgId = id) => ({
  'webhook-id': msgId,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

describe('standardSignature', () => {
  it('is v1, and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}" keyed by the bytes after whsec_', () => {
    const key = Buffer.alloc(32, 0xfb);
    const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
    expect(standardSignature(NEW, id, ts, body)).toBe(`v1,${expected}`);
    expect(standardKey(NEW)).toEqual(key);
  });

  it('keys a secret made before (base64url after whsec_) by the same 32 bytes', () => {
    expect(standardKey(OLD_STYLE)).toEqual(Buffer.alloc(32, 0xfb));
    expect(standardSignature(OLD_STYLE, id, ts, body)).toBe(standardSignature(NEW, id, ts, body));
  });
});

describe('independent verifiers accept what we sign', () => {
  const signature = standardSignatureHeader([NEW], id, ts, body);

  it('standardwebhooks and svix verify the Standard Webhooks headers', () => {
    const realNow = Date.now;
    Date.now = () => nowMs; // both libraries read the clock for the replay window
    try {
      expect(new StandardWebhook(NEW).verify(body, headersOf(signature))).toEqual(JSON.parse(body));
      expect(new SvixWebhook(NEW).verify(body, headersOf(signature))).toEqual(JSON.parse(body));
    } finally {
      Date.now = realNow;
    }
  });

  it('@octokit/webhooks-methods and node:crypto verify X-Service-Signature', async () => {
    const header = signatureHeader([NEW], body);
    expect(await octokitVerify(NEW, body, header)).toBe(true);
    expect(header).toBe(`sha256=${createHmac('sha256', NEW).update(body).digest('hex')}`);
  });

  it('they reject a tampered body, timestamp or id', () => {
    const realNow = Date.now;
    Date.now = () => nowMs;
    try {
      for (const Verifier of [StandardWebhook, SvixWebhook]) {
        const wh = new Verifier(NEW);
        expect(() => wh.verify(`${body} `, headersOf(signature))).toThrow();
        expect(() => wh.verify(body, headersOf(signature, ts + 1))).toThrow();
        expect(() => wh.verify(body, headersOf(signature, ts, `${id}x`))).toThrow();
      }
    } finally {
      Date.now = realNow;
    }
  });
});

describe('verifyStandard', () => {
  const signature = standardSignatureHeader([NEW], id, ts, body);
  const given = { id, timestamp: String(ts), signature };

  it('accepts the signature within the replay window and refuses it outside', () => {
    expect(verifyStandard(NEW, body, given, { nowMs })).toBe(true);
    expect(verifyStandard(NEW, body, given, { nowMs: nowMs + 300_000 })).toBe(true);
    expect(verifyStandard(NEW, body, given, { nowMs: nowMs + 301_000 })).toBe(false);
    expect(verifyStandard(NEW, body, given, { nowMs: nowMs - 301_000 })).toBe(false);
  });

  it('refuses a tampered body, id or timestamp, another secret, and malformed headers, without throwing', () => {
    expect(verifyStandard(NEW, `${body} `, given, { nowMs })).toBe(false);
    expect(verifyStandard(NEW, body, { ...given, id: `${id}x` }, { nowMs })).toBe(false);
    expect(verifyStandard(NEW, body, { ...given, timestamp: String(ts + 1) }, { nowMs })).toBe(false);
    expect(verifyStandard(OTHER, body, given, { nowMs })).toBe(false);
    for (const bad of [null, '', 'v1,', 'v2,abc', 'v1,!!!', signature.replace('v1,', 'v1a,')]) {
      expect(verifyStandard(NEW, body, { ...given, signature: bad }, { nowMs })).toBe(false);
    }
    expect(verifyStandard(NEW, body, { ...given, timestamp: '1e9' }, { nowMs })).toBe(false);
  });
});

describe('rotation overlap: one signature per valid secret, newest first', () => {
  it('webhook-signature carries space-separated v1 entries; every verifier accepts either secret', () => {
    const header = standardSignatureHeader([NEW, OTHER], id, ts, body);
    expect(header.split(' ')).toEqual([standardSignature(NEW, id, ts, body), standardSignature(OTHER, id, ts, body)]);
    expect(verifyStandard(NEW, body, { id, timestamp: String(ts), signature: header }, { nowMs })).toBe(true);
    expect(verifyStandard(OTHER, body, { id, timestamp: String(ts), signature: header }, { nowMs })).toBe(true);
    const realNow = Date.now;
    Date.now = () => nowMs;
    try {
      for (const secret of [NEW, OTHER]) {
        expect(new StandardWebhook(secret).verify(body, headersOf(header))).toEqual(JSON.parse(body));
        expect(new SvixWebhook(secret).verify(body, headersOf(header))).toEqual(JSON.parse(body));
      }
    } finally {
      Date.now = realNow;
    }
  });

  it('X-Service-Signature carries comma-separated sha256= values; the receiver helper accepts either secret', () => {
    const header = signatureHeader([NEW, OTHER], body);
    expect(header).toBe(`${sign(NEW, body)},${sign(OTHER, body)}`);
    expect(verifyAny(NEW, body, header)).toBe(true);
    expect(verifyAny(OTHER, body, header)).toBe(true);
    expect(verifyAny(OLD_STYLE, body, header)).toBe(false);
  });

  it('verifyDeliveryHeaders takes whichever convention the headers carry', () => {
    const legacy = new Map([['x-service-signature', signatureHeader([NEW, OTHER], body)]]);
    expect(verifyDeliveryHeaders(OTHER, body, (n) => legacy.get(n))).toBe(true);
    const standard = new Map(Object.entries(headersOf(standardSignatureHeader([NEW, OTHER], id, ts, body))));
    expect(verifyDeliveryHeaders([OTHER], body, (n) => standard.get(n), { nowMs })).toBe(true);
    expect(verifyDeliveryHeaders([OLD_STYLE.replace('w', 'W')], body, (n) => standard.get(n), { nowMs })).toBe(false);
    // With the Standard Webhooks headers present, a stale timestamp is refused even if X-Service-Signature matches.
    standard.set('x-service-signature', sign(NEW, body));
    expect(verifyDeliveryHeaders([NEW], body, (n) => standard.get(n), { nowMs: nowMs + 3_600_000 })).toBe(false);
  });
});
