import { defineConfig } from 'vitest/config';

// Workspace libraries that publish a built dist/ (libs/client, libs/webhook-verify) export their
// TypeScript sources under the `source` condition: tests run the sources, never a stale build.
const conditions = ['source', 'module', 'node', 'development|production'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: [
      'services/*/src/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'libs/*/src/**/*.test.ts',
      'libs/*/test/**/*.test.ts',
      'scripts/**/*.test.ts',
    ],
    globalSetup: ['libs/testing/src/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
