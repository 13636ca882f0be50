import { defineConfig } from 'vitest/config';

export default defineConfig({
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
