/**
 * The worker keeps the queue tables' statistics current (src/worker/queue-statistics.ts,
 * app.queue_statistics_refresh): a claim and a record planned while the delivery table's
 * statistics said it was empty read the grown table whole, and read only their attempts once the
 * statistics are refreshed (docs/performance.md, "The twenty-sixth round"). Counts only.
 */
import type pg from 'pg';
import { createWorkerPool } from '../../src/db/pools.js';
import { QueueStatistics } from '../../src/worker/queue-statistics.js';
import { createLocation, mintKey, startTestApi, testLog, waitFor, type TestApi } from '../support/harness.js';
import { claimAndRecord, createEndpoint, emitMany } from '../webhooks/support.js';

let t: TestApi;
let worker: pg.Pool;

beforeAll(async () => {
  t = await startTestApi({});
  worker = createWorkerPool(t.db.url, 2, 'test-queue-statistics');
  // Only the refresh analyses the queue tables here. Autovacuum's own ANALYZE of them (its
  // threshold is lower: a tenth of the rows plus 50) resets the counters the refresh reads, so a
  // visit of it between a table's growth and the assertions left the refresh nothing to do (a
  // fresh-clone CI's run of this file timed out waiting for the worker's timer that way).
  await t.owner.query('alter table app.webhook_deliveries set (autovacuum_enabled = off); alter table app.notifications set (autovacuum_enabled = off)');
});
afterAll(async () => {
  await worker?.end();
  await t?.close();
});

const statsOf = async () => (await t.owner.query(
  `select c.reltuples::int as reltuples, s.last_analyze
     from pg_class c join pg_stat_user_tables s on s.relid = c.oid where c.oid = 'app.webhook_deliveries'::regclass`)).rows[0] as { reltuples: number; last_analyze: Date | null };

/**
 * Calls the refresh as the worker's role until it has analysed the delivery table (the other
 * sessions' counters reach the statistics within seconds): the tables analysed on the way.
 */
async function refreshed(): Promise<string[]> {
  const analysed: string[] = [];
  await waitFor(async () => {
    const { rows: [{ r }] } = await worker.query('select app.queue_statistics_refresh() as r');
    analysed.push(...(r as string[]));
    return analysed.includes('app.webhook_deliveries');
  }, 'the delivery table analysed', 30_000);
  return analysed;
}

test('a claim and a record planned on an empty queue read their attempts, not the grown table, once the statistics are refreshed', async () => {
  const loc = await createLocation(t.owner, { name: 'Empty Queue Heating' });
  const { token } = await mintKey(t.owner, loc.id);
  for (const label of ['a', 'b']) await createEndpoint(t, token, loc.id, { url: `https://receiver.example/${label}`, events: ['lead.created'] });
  // The statistics of a new installation: the delivery table analysed while empty.
  await t.owner.query('analyze app.webhook_deliveries');
  expect((await statsOf()).reltuples).toBe(0);

  const c = await t.owner.connect();
  try {
    // This session's plans are made now, on those statistics (past the custom plans PL/pgSQL tries first).
    await emitMany(t.owner, loc.id, 'lead.created', 1);
    for (let i = 0; i < 7; i++) await claimAndRecord(c, 'test-statistics');

    // A history lands: 6,000 attempts delivered, 200 pending; nothing has analysed the table since.
    await emitMany(t.owner, loc.id, 'lead.created', 3000);
    await t.owner.query(`update app.webhook_deliveries set status = 'delivered', response_status = 200, next_attempt_at = null where status = 'pending'`);
    await emitMany(t.owner, loc.id, 'lead.created', 100);
    const stale = await claimAndRecord(c, 'test-statistics');
    expect(stale.claimed).toBe(64);
    // The record planned on an empty table finds its 64 attempts by reading the table's 6,200 rows
    // (sequential scans; in the bench the claim's plans read it whole too, through another index).
    expect(stale.recordRead).toBeGreaterThan(6000);

    expect(await refreshed()).toContain('app.webhook_deliveries');
    expect((await statsOf()).reltuples).toBeGreaterThan(5000);
    const fresh = await claimAndRecord(c, 'test-statistics');
    expect(fresh.claimed).toBe(64);
    // A claim of 64 reads its candidates and the live leases; a record three rows an attempt at most.
    expect(fresh.claimRead).toBeLessThanOrEqual(64 * 4);
    expect(fresh.recordRead).toBeLessThanOrEqual(64 * 3);
  } finally {
    c.release();
  }
});

test('the refresh analyses only statistics far out of date, one caller at a time, and the worker runs it on its own', async () => {
  // Just analysed (the test above, or now): nothing to do.
  await t.owner.query('analyze app.webhook_deliveries, app.notifications');
  expect((await worker.query('select app.queue_statistics_refresh() as r')).rows[0].r).toEqual([]);

  const loc = await createLocation(t.owner, { name: 'Busy Queue Plumbing' });
  const { token } = await mintKey(t.owner, loc.id);
  await createEndpoint(t, token, loc.id, { url: 'https://receiver.example/c', events: ['lead.created'] });
  const analysedAt = (await statsOf()).last_analyze;
  await emitMany(t.owner, loc.id, 'lead.created', 5_000);

  // A caller holding the refresh's lock: another returns at once with nothing done.
  const holder = await worker.connect();
  try {
    await holder.query('begin');
    await holder.query(`select pg_advisory_xact_lock(hashtext('app.queue_statistics_refresh'))`);
    expect((await worker.query('select app.queue_statistics_refresh() as r')).rows[0].r).toEqual([]);
    await holder.query('rollback');
  } finally {
    holder.release();
  }
  expect((await statsOf()).last_analyze).toEqual(analysedAt);

  // The worker's own timer analyses the grown table.
  const stats = new QueueStatistics(worker, testLog, 100);
  await stats.start();
  try {
    await waitFor(async () => {
      const s = await statsOf();
      return s.reltuples >= 11_000 && s.last_analyze && s.last_analyze > analysedAt! && s;
    }, 'the worker analysed the grown delivery table', 30_000);
  } finally {
    await stats.stop();
  }
});
