#!/usr/bin/env node
// Bundles one service (run from its folder) into dist/: workspace libraries
// (@fcd/*, TypeScript sources) are inlined, npm dependencies stay external and
// are resolved from node_modules at run time.
import { existsSync } from 'node:fs';
import { build } from 'esbuild';

const entries = ['src/main.ts', 'src/cli.ts', 'src/telemetry.ts'].filter((f) => existsSync(f));
// dist/ is overwritten in place (not removed first), so a process started from it
// by a concurrent test run never finds it missing.
await build({
  entryPoints: entries,
  outdir: 'dist',
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
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
