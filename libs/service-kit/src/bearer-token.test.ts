import { request as httpRequest } from 'node:http';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireBearerToken } from './bearer-token';
import { baseFastifyOptions, installHttpConventions } from './http';
import { createLogger } from './logger';

const TOKEN = 'admin-token-0123456789abcdef0123456789';
const MESSAGE = 'A valid admin token is required in the Authorization header.';
const app = Fastify(baseFastifyOptions(createLogger({ service: 'bearer-test', level: 'silent' })));
const off = Fastify(baseFastifyOptions(createLogger({ service: 'bearer-test', level: 'silent' })));

beforeAll(async () => {
  installHttpConventions(app);
  app.addHook('onRequest', requireBearerToken(TOKEN, { message: MESSAGE }));
  app.get('/admin', async () => ({ data: { ok: true } }));
  installHttpConventions(off);
  off.addHook('preHandler', requireBearerToken(undefined));
  off.get('/admin', async () => ({ data: { ok: true } }));
  await Promise.all([app.listen({ port: 0, host: '127.0.0.1' }), off.ready()]);
});
afterAll(() => Promise.all([app.close(), off.close()]));

const unauthorized = { error: { code: 'UNAUTHORIZED', message: MESSAGE } };

describe('requireBearerToken', () => {
  it('admits the exact token, with any case of the scheme', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const res = await app.inject({ url: '/admin', headers: { authorization: `${scheme} ${TOKEN}` } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ data: { ok: true } });
    }
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['the scheme alone', 'Bearer'],
    ['another scheme', `Basic ${TOKEN}`],
    ['no scheme', TOKEN],
    ['a wrong token of the same length', `Bearer ${TOKEN.slice(0, -1)}x`],
    ['a prefix of the token', `Bearer ${TOKEN.slice(0, 8)}`],
    ['the token plus one character', `Bearer ${TOKEN}x`],
    ['a much longer token', `Bearer ${'x'.repeat(4096)}`],
    ['a token with a space inside', `Bearer ${TOKEN.slice(0, 5)} ${TOKEN.slice(5)}`],
    ['a non-ASCII token of the same length in characters', `Bearer ${'é'.repeat(TOKEN.length)}`],
    ['a non-ASCII token of the same length in bytes', `Bearer ${'é'.repeat(TOKEN.length / 2)}`],
  ])('answers %s with the 401 envelope', async (_label, authorization) => {
    const res = await app.inject({ url: '/admin', headers: authorization === undefined ? {} : { authorization } });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual(unauthorized);
    expect(res.body).not.toContain(String(TOKEN.length));
  });

  it('answers raw non-ASCII header bytes over HTTP with 401, not 500', async () => {
    const { port } = app.server.address() as { port: number };
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/admin',
          headers: { authorization: Buffer.from(`Bearer ${'\u00ff'.repeat(38)}`, 'latin1').toString('latin1') },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(401);
    expect(JSON.parse(body)).toEqual(unauthorized);
  });

  it('refuses every request, the right-looking ones too, when no token is configured', async () => {
    for (const authorization of ['Bearer ', `Bearer ${TOKEN}`, 'Bearer undefined']) {
      const res = await off.inject({ url: '/admin', headers: { authorization } });
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
  });
});
