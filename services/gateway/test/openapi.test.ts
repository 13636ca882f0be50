import { describe, expect, it } from 'vitest';
import { buildDocument } from '../../../scripts/openapi/document';
import { OPENAPI_DOCUMENT, renderDocsPage } from '../src/openapi';
import committed from '../src/openapi/openapi.json';

/** Without a stack: the committed document is what the route schemas produce, and /docs renders all of it. */
describe('the OpenAPI document', () => {
  it('equals a fresh generation from the route schemas (npm run openapi:gen after a schema change)', async () => {
    const { document, undocumented } = await buildDocument();
    expect(undocumented).toEqual([]);
    expect(document).toEqual(committed);
  });

  it('the /docs page shows every operation with its method, path and summary, escaped', () => {
    const page = renderDocsPage();
    const paths = OPENAPI_DOCUMENT.paths as Record<string, Record<string, { summary: string }>>;
    let operations = 0;
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, op] of Object.entries(item)) {
        operations++;
        expect(page).toContain(`<span class="method ${method}">${method.toUpperCase()}</span> <span class="path">${path}</span>`);
        expect(page).toContain(op.summary.replace(/'/g, '&#39;').replace(/`([^`]+)`/g, '<code>$1</code>'));
      }
    }
    expect(operations).toBe(19);
    expect(page).not.toMatch(/<script|https?:\/\/(?!127)/);
  });
});
