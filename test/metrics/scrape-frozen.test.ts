/**
 * A scrape of /metrics while the database accepts connections but does not answer: the queue
 * query gives up within SCRAPE_ANSWER_MS and the scrape answers `switchboard_database_up 0`, even
 * when its source is the worker's pool, which has no bound of its own (`npm start` and
 * `start:worker` scrape through it); after the thaw the gauges come back (src/metrics/queues.ts,
 * docs/operations.md "Metrics").
 */
import type pg from 'pg';
import { createWorkerPool } from '../../src/db/pools.js';
import { operationsRouter, startAdminServer, type AdminServer } from '../../src/metrics/admin.js';
import { SCRAPE_ANSWER_MS, setQueueSource, trackPool } from '../../src/metrics/queues.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { startDbProxy, type DbProxy } from '../support/db-proxy.js';
import { timed, waitFor } from '../support/harness.js';
import { scrape } from '../support/metrics.js';

let db: TestDatabase;
let proxy: DbProxy;
let pool: pg.Pool;
let ops: AdminServer;
beforeAll(async () => {
  db = await createTestDatabase();
  proxy = await startDbProxy(db.url);
  // The service's worker pool, through the relay.
  pool = createWorkerPool(proxy.url, 2, 'test-worker');
  trackPool('worker', pool);
  setQueueSource(pool);
  ops = await startAdminServer('127.0.0.1', 0, operationsRouter([]));
});
afterAll(async () => {
  proxy?.thaw();
  await ops?.close();
  await pool?.end();
  await proxy?.close();
  await db?.drop();
});

test('a scrape answers database_up 0 within its bound on the unbounded worker pool, and 1 again after the thaw', async () => {
  // Setup: a scrape that reads the queues, leaving a pooled connection open.
  expect((await scrape(ops.url)).value('switchboard_database_up')).toBe(1);
  proxy.freeze();

  // Action
  const { outcome: frozen, ms } = await timed(scrape(ops.url), 10_000);
  proxy.thaw();

  // Assertions
  expect(frozen).not.toBe('no answer');
  const m = frozen as Exclude<typeof frozen, 'no answer' | Error>;
  expect(m.value('switchboard_database_up')).toBe(0);
  expect(m.all('switchboard_queue_depth')).toEqual([]);
  expect(ms).toBeGreaterThanOrEqual(SCRAPE_ANSWER_MS - 200);
  const after = await waitFor(async () => {
    const s = await scrape(ops.url);
    return s.value('switchboard_database_up') === 1 && s;
  }, 'the queue gauges to come back');
  expect(after.all('switchboard_queue_depth', { lane: 'webhooks' })).toHaveLength(1);
}, 30_000);
