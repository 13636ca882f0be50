#!/usr/bin/env node
// Builds the customer portal (docs/portal.md) into dist/portal/: one script and one stylesheet,
// bundled by esbuild with Preact inlined, named by their content hash (assets/main.<hash>.js), and
// the index.html that loads them. Run from services/gateway by its build script, after the service.
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import writeFileAtomic from 'write-file-atomic';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, '../dist/portal');
const assets = join(out, 'assets');
mkdirSync(assets, { recursive: true });
const before = new Set(readdirSync(assets));

// Each file is replaced by a rename, never rewritten in place, so a gateway serving dist/ during a
// build never sends a truncated file (scripts/build-service.mjs does the same).
const atomic = { fsync: false };
const result = await build({
  write: false,
  entryPoints: [join(here, 'src/main.tsx'), join(here, 'src/styles.css')],
  outdir: assets,
  entryNames: '[name].[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome109', 'firefox115', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'eof',
  metafile: true,
  logLevel: 'warning',
});

for (const file of result.outputFiles) writeFileAtomic.sync(file.path, file.contents, atomic);

const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
const script = outputs.find((f) => /^main\.[A-Z0-9]+\.js$/.test(f));
const style = outputs.find((f) => /^styles\.[A-Z0-9]+\.css$/.test(f));
if (!script || !style) throw new Error(`portal build: unexpected outputs ${outputs.join(', ')}`);

// No inline script or style: the page's CSP allows only files from the gateway (docs/portal.md).
// The empty icon keeps the browser from fetching /favicon.ico: every file the page loads is hashed.
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Customer portal — Facility Compliance Data API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/portal/assets/${style}">
<script type="module" src="/portal/assets/${script}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The customer portal needs JavaScript.</noscript>
</body>
</html>
`;
writeFileAtomic.sync(join(out, 'index.html'), html, atomic);

// Hashed files of earlier builds are removed only after the new index.html is written, and not the
// ones the new build wrote: a process serving dist/ never points at a missing file for long.
const kept = new Set(outputs);
for (const name of before) if (!kept.has(name)) rmSync(join(assets, name), { force: true });
