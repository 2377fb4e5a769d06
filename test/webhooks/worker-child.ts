/**
 * A separate worker process for the crash test: the real task files' code, trusting the test CA
 * through NODE_EXTRA_CA_CERTS (as an operator would). Prints "ready" once polling.
 */
import { run } from 'graphile-worker';
import { loadConfig } from '../../src/config.js';
import { createOwnerPool } from '../../src/db/pools.js';
import { createLogger } from '../../src/log.js';
import { makeDeliverTask } from '../../src/webhooks/deliver.js';

const cfg = loadConfig();
const log = createLogger('silent');
const pool = createOwnerPool(cfg.DATABASE_URL!, 5, 'crash-child');
pool.on('connect', (c) => c.on('error', () => undefined));
await run({
  pgPool: pool,
  concurrency: 1,
  noHandleSignals: true,
  pollInterval: 200,
  parsedCronItems: [],
  taskList: { deliver_webhook: makeDeliverTask({ cfg, log, pool }) },
});
process.stdout.write('ready\n');
