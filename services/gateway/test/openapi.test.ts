import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildDocument } from '../../../scripts/openapi/document';
import { DOCS_INIT_PATH, OPENAPI_DOCUMENT, renderDocsPage, SCALAR_BUNDLE_PATH, SCALAR_VERSION } from '../src/openapi';
import committed from '../src/openapi/openapi.json';

/** Without a stack: the committed document is what the route schemas produce; the /docs page's shell. */
describe('the OpenAPI document', () => {
  it('equals a fresh generation from the route schemas (npm run openapi:gen after a schema change)', async () => {
    const { document, undocumented } = await buildDocument();
    expect(undocumented).toEqual([]);
    expect(document).toEqual(committed);
  });

  it("the /docs page loads only the gateway's two scripts (no inline script, no other origin)", () => {
    const page = renderDocsPage();
    expect([...page.matchAll(/<script[^>]*>/g)].map((m) => m[0])).toEqual([
      `<script src="${SCALAR_BUNDLE_PATH}">`,
      `<script src="${DOCS_INIT_PATH}">`,
    ]);
    expect(page).not.toMatch(/https?:\/\//);
    expect(page).toContain('<title>Facility Compliance Data API — API reference</title>');
    // The page serves the committed document, every public path of it.
    expect(Object.keys(OPENAPI_DOCUMENT.paths as object)).toEqual(Object.keys(committed.paths));
  });

  it('serves the Scalar version the gateway pins (the versioned bundle path is cached as immutable)', () => {
    const pinned = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).devDependencies['@scalar/api-reference'];
    const installed = JSON.parse(
      readFileSync(new URL('../../../node_modules/@scalar/api-reference/package.json', import.meta.url), 'utf8'),
    ).version;
    expect([pinned, installed]).toEqual([SCALAR_VERSION, SCALAR_VERSION]);
  });
});
