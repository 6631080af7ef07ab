import { defineConfig } from 'vitest/config';

/**
 * Tests that read V8's own call counts (precise coverage) must run in a fresh process: in a worker
 * that already ran other files, the functions they watch are optimised and inlined, and their
 * calls no longer show.
 */
const FRESH_PROCESS = ['test/telegram/join-walk.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/harness/global-setup.ts'],
    pool: 'forks',
    // Two cores: more workers only contend for the CPU with PostgreSQL.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ['default', 'json'],
    outputFile: { json: '.data/test-results.json' },
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: FRESH_PROCESS,
          // A worker process runs file after file with its module cache kept: loading the
          // backend's modules once per worker instead of once per file takes about a third off
          // the suite's time. Nothing here keeps module-level state (docs/architecture.md), and
          // each file still gets its own database, servers and fakes.
          isolate: false,
        },
      },
      { extends: true, test: { name: 'fresh', include: FRESH_PROCESS } },
    ],
  },
});
