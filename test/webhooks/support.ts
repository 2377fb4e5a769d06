/**
 * Webhook test kit: the production worker (delivery engine + notification lane + jobs lane) in
 * this process, trusting the test CA, and small DB helpers. The test CA and HTTPS receivers live
 * in test/support/https.ts.
 */
import pg from 'pg';
import type { Config } from '../../src/config.js';
import { createWorkerPool } from '../../src/db/pools.js';
import { startWorker, type Worker, type WorkerOptions } from '../../src/worker/index.js';
import { testLog } from '../support/harness.js';
import type { TestPki } from '../support/https.js';

/** The production worker in this process (no crontab: tests run the sweeper themselves), trusting the test CA. */
export async function startTestWorker(cfg: Config, dbUrl: string, pki: Pick<TestPki, 'caPem'>, opts: WorkerOptions = {}): Promise<{ worker: Worker; pool: pg.Pool; stop(): Promise<void> }> {
  const pool = createWorkerPool(dbUrl, 12, 'test-worker');
  pool.on('connect', (c) => c.on('error', () => undefined));
  const worker = await startWorker({ cfg, log: testLog, pool, ca: pki.caPem }, {
    pollInterval: 200, cron: false, ...opts, engine: { pollIntervalMs: 200, ...opts.engine },
  });
  return {
    worker,
    pool,
    stop: async () => {
      await worker.stop();
      await pool.end();
    },
  };
}

/** Writes an event the way triggers do (tenant set for the transaction). */
export async function emit(owner: pg.Pool, locationId: string, type: string, data: unknown): Promise<string> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    const { rows } = await c.query('select app.emit($1, $2, $3) as id', [locationId, type, JSON.stringify(data)]);
    await c.query('commit');
    return rows[0].id as string;
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

/** `count` events of one type for one location, written in one transaction (as a burst of calls would). */
export async function emitMany(owner: pg.Pool, locationId: string, type: string, count: number): Promise<void> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    await c.query(`select app.emit($1, $2, jsonb_build_object('n', i)) from generate_series(1, $3::int) i`, [locationId, type, count]);
    await c.query('commit');
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 15000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function deliveriesOf(owner: pg.Pool, eventId: string) {
  const { rows } = await owner.query(
    `select id, attempt, status, response_status, error, endpoint_id, next_attempt_at, duration_ms, response_body
       from app.webhook_deliveries where event_id = $1 order by attempt`, [eventId]);
  return rows as Array<{ id: string; attempt: number; status: string; response_status: number | null; error: string | null; endpoint_id: string | null; next_attempt_at: Date | null; duration_ms: number | null; response_body: string | null }>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
