/**
 * A separate worker process for the crash tests: the production worker (startWorker: delivery
 * engine, notification lane, jobs lane) trusting the test CA through NODE_EXTRA_CA_CERTS (as an
 * operator would), with the lease grace its environment sets (DELIVERY_LEASE_GRACE_MS) so a lapsed
 * lease does not take 30 s. No crontab: the test runs the sweeper itself. Prints "ready" once running.
 */
import { loadConfig } from '../../src/config.js';
import { createWorkerPool } from '../../src/db/pools.js';
import { createLogger } from '../../src/log.js';
import { startWorker } from '../../src/worker/index.js';

const cfg = loadConfig();
const log = createLogger('silent');
const pool = createWorkerPool(cfg.DATABASE_URL!, 12, 'crash-child');
pool.on('connect', (c) => c.on('error', () => undefined));
await startWorker({ cfg, log, pool }, {
  pollInterval: 200,
  cron: false,
  engine: { pollIntervalMs: 200 },
});
process.stdout.write('ready\n');
