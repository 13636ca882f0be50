import { create } from '@bufbuild/protobuf';
import { AuthorizeResultSchema, Decision } from '@fcd/proto';
import { type AppError, InternalAuth, serviceUnavailable } from '@fcd/service-kit';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { AuthorizationBatcher } from '../auth/batcher';
import type { Upstream, UpstreamPage } from '../clients/proxy';
import { registerExports } from './exports';

// The export route over scripted upstream pages and page counts: what reaches the client when a
// later page fails or cannot be counted (docs/api.md, "Bulk export"). The happy path over the real
// services, 50,000 rows and its memory bound are test/exports.int.test.ts.

/** A page of NDJSON rows `ids`, read in one chunk per row; `more`: another page follows. */
function page(ids: string[], more: boolean): UpstreamPage {
  return {
    status: 200,
    headers: { 'x-export-rows': String(ids.length), 'x-export-more': String(more), 'x-export-last': ids.at(-1) ?? '' },
    chunks: ids.map((id) => Buffer.from(`${JSON.stringify({ id })}\n`)),
  };
}

const ALLOWED = create(AuthorizeResultSchema, { decision: Decision.ALLOWED });

/** The route with `pages` answered in turn (an Error is thrown instead) and each further page's count answered by `counts`. */
async function exportWith(pages: Array<UpstreamPage | Error>, counts: Array<typeof ALLOWED> = []) {
  const asked: string[] = [];
  const facility = {
    name: 'facility',
    getInternal: async (path: string) => {
      asked.push(path);
      const next = pages.shift();
      if (next === undefined || next instanceof Error) throw next ?? new Error('no page scripted');
      return next;
    },
  } as unknown as Upstream;
  let counted = 0;
  const batcher = {
    authorize: async () => {
      counted++;
      return counts.shift() ?? ALLOWED;
    },
  } as unknown as AuthorizationBatcher;
  const app = Fastify();
  app.addHook('onRequest', async (request) => {
    request.account = { accountId: 'acct_1', tier: 'pro', tierRank: 2 };
    request.meterKey = 'fcd_test';
  });
  registerExports(app, { facility, batcher, internalAuth: new InternalAuth('export-test-secret-0123456789abcdef') });
  const res = await app.inject({ method: 'GET', url: '/v1/exports/facilities' });
  await app.close();
  const lines = res.body.trimEnd().split('\n');
  return { res, lines, asked, counted: () => counted };
}

describe('GET /v1/exports/{kind}, pages that fail or are not counted', () => {
  it('writes every page whole and in order, counts each after the first, and ends complete', async () => {
    const { res, lines, asked, counted } = await exportWith([page(['a', 'b'], true), page(['c', 'd', 'e'], false)]);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(lines).toEqual([
      '{"id":"a"}',
      '{"id":"b"}',
      '{"id":"c"}',
      '{"id":"d"}',
      '{"id":"e"}',
      '{"export":{"complete":true,"rows":5,"after":null}}',
    ]);
    expect(asked.map((p) => new URL(p, 'http://x').searchParams.get('after'))).toEqual([null, 'b']);
    expect(counted()).toBe(1);
  });

  it('a facility failing after a page ends the export with a line that resumes after its last row', async () => {
    const outage = serviceUnavailable('facility', 1);
    const { res, lines } = await exportWith([page(['a', 'b'], true), page(['c'], true), outage]);
    expect(res.statusCode).toBe(200);
    expect(lines.slice(0, 3)).toEqual(['{"id":"a"}', '{"id":"b"}', '{"id":"c"}']);
    expect(JSON.parse(lines[3] as string)).toEqual({
      export: { complete: false, rows: 3, after: 'c', error: { code: 'SERVICE_UNAVAILABLE', message: (outage as AppError).message } },
    });
    expect(lines).toHaveLength(4);
  });

  it('a page that cannot be counted is not sent: the export ends before it, resumable from the last row sent', async () => {
    const limited = create(AuthorizeResultSchema, { decision: Decision.RATE_LIMITED, dailyLimit: 1000 });
    const { lines, counted } = await exportWith([page(['a'], true), page(['b'], true), page(['c'], false)], [ALLOWED, limited]);
    expect(counted()).toBe(2);
    expect(lines.slice(0, 2)).toEqual(['{"id":"a"}', '{"id":"b"}']);
    expect(JSON.parse(lines[2] as string)).toEqual({
      export: {
        complete: false,
        rows: 2,
        after: 'b',
        error: { code: 'RATE_LIMIT_EXCEEDED', message: 'Daily request limit of 1000 requests exceeded.' },
      },
    });
    expect(lines).toHaveLength(3);
  });
});
