#!/usr/bin/env node
// Bundles one service (run from its folder) into dist/: workspace libraries
// (@fcd/*, TypeScript sources) are inlined, npm dependencies stay external and
// are resolved from node_modules at run time.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { build } from 'esbuild';
import writeFileAtomic from 'write-file-atomic';

const entries = ['src/main.ts', 'src/cli.ts', 'src/telemetry.ts'].filter((f) => existsSync(f));
// dist/ is never removed, and every file in it is replaced by a rename (write-file-atomic), never
// rewritten in place: a build (`npm run build -w …`) while a process starts from dist/ would
// otherwise let node load a truncated or empty cli.js (an empty one runs, prints nothing and exits 0).
// No fsync: the rename is what a concurrent reader needs; a build cut by a crash is built again.
const atomic = { fsync: false };
const result = await build({
  write: false,
  entryPoints: entries,
  outdir: 'dist',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  // Workspace libraries that publish a built dist/ point the `source` condition at their sources.
  conditions: ['source'],
  sourcemap: true,
  logLevel: 'warning',
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  plugins: [
    {
      name: 'externalize-npm-deps',
      setup(b) {
        b.onResolve({ filter: /^[^./]/ }, (args) => {
          if (args.path.startsWith('@fcd/')) return undefined;
          return { path: args.path, external: true };
        });
      },
    },
  ],
});
for (const file of result.outputFiles) {
  mkdirSync(dirname(file.path), { recursive: true });
  writeFileAtomic.sync(file.path, file.contents, atomic);
}

// Files the service serves that come from npm packages, copied into dist/ so the image (which has
// no dev dependencies) holds them: package.json "buildAssets": { "<path in dist>": "<package>/<file>" }.
const { buildAssets = {} } = JSON.parse(readFileSync('package.json', 'utf8'));
for (const [target, source] of Object.entries(buildAssets)) {
  const parts = source.split('/');
  const name = parts.slice(0, source.startsWith('@') ? 2 : 1).join('/');
  const file = parts.slice(source.startsWith('@') ? 2 : 1).join('/');
  let dir = process.cwd();
  while (!existsSync(join(dir, 'node_modules', name, 'package.json'))) {
    if (dirname(dir) === dir) throw new Error(`buildAssets: package ${name} is not installed`);
    dir = dirname(dir);
  }
  const to = resolve('dist', target);
  mkdirSync(dirname(to), { recursive: true });
  writeFileAtomic.sync(to, readFileSync(join(dir, 'node_modules', name, file)), atomic);
}
