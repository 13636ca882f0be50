import { defineConfig } from 'vitest/config';

// Workspace libraries that publish a built dist/ (libs/client, libs/webhook-verify) export their
// TypeScript sources under the `source` condition: tests run the sources, never a stale build.
const conditions = ['source', 'module', 'node', 'development|production'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      {
        // Pure logic beside the code (`src/**/*.test.ts`): no Postgres, Redis or NATS, no built
        // bundles; `npm run test:unit` runs these alone, in seconds.
        extends: true,
        test: {
          name: 'unit',
          include: ['services/*/src/**/*.test.ts', 'libs/*/src/**/*.test.ts'],
          exclude: ['**/*.int.test.ts', '**/node_modules/**'],
        },
      },
      {
        // Everything under test/ and scripts/: the real services, built bundles, helm, promtool.
        extends: true,
        test: {
          name: 'integration',
          include: ['services/*/test/**/*.test.ts', 'libs/*/test/**/*.test.ts', 'scripts/**/*.test.ts', '**/src/**/*.int.test.ts'],
          exclude: ['**/node_modules/**'],
          globalSetup: ['libs/testing/src/global-setup.ts'],
        },
      },
    ],
  },
});
