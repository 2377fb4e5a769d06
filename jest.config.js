/** Jest runs the TypeScript sources as native ES modules (graphile-worker 0.18 is ESM-only). */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    // The CommonJS build avoids Jest's warnings about JSON imports without attributes.
    '^libphonenumber-js$': '<rootDir>/node_modules/libphonenumber-js/index.cjs',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, diagnostics: false }],
  },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/global-teardown.mjs',
  maxWorkers: 2,
  // Each test file's modules stay in its worker's heap (ES modules in vm contexts): by the last
  // file a worker held about 2 GB and needed more than Jest's 500 ms to tear it down on exit, so
  // Jest force-exited it ("A worker process has failed to exit gracefully"); at 1 GB it still did
  // once in three runs. A worker past this much after a file is replaced by a fresh one.
  workerIdleMemoryLimit: '512MB',
  testTimeout: 60000,
};
