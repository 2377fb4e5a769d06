/**
 * Webhook test kit: the production worker (delivery engine + notification lane + jobs lane) in
 * this process, trusting the test CA; the rig most webhook suites run on (API, worker and one HTTPS
 * receiver); endpoint creation and small DB helpers. The test CA and HTTPS receivers live in
 * test/support/https.ts.
 */
import pg from 'pg';
import type { Config } from '../../src/config.js';
import { createWorkerPool } from '../../src/db/pools.js';
import { startWorker, type Worker, type WorkerOptions } from '../../src/worker/index.js';
import { asLocation, request, startTestApi, tenant, testLog, waitFor, type TestApi, type TestLocation } from '../support/harness.js';
import { xactReads } from '../support/db.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
export { waitFor } from '../support/harness.js';

export type TestWorker = Awaited<ReturnType<typeof startTestWorker>>;

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
  return asLocation(owner, locationId, async (c) =>
    (await c.query('select app.emit($1, $2, $3) as id', [locationId, type, JSON.stringify(data)])).rows[0].id as string);
}

/** `count` events of one type for one location, written in one transaction (as a burst of calls would). */
export async function emitMany(owner: pg.Pool, locationId: string, type: string, count: number): Promise<void> {
  await asLocation(owner, locationId, (c) =>
    c.query(`select app.emit($1, $2, jsonb_build_object('n', i)) from generate_series(1, $3::int) i`, [locationId, type, count]));
}

export async function deliveriesOf(owner: pg.Pool, eventId: string) {
  const { rows } = await owner.query(
    `select id, attempt, status, response_status, error, endpoint_id, next_attempt_at, duration_ms, response_body
       from app.webhook_deliveries where event_id = $1 order by attempt`, [eventId]);
  return rows as Array<{ id: string; attempt: number; status: string; response_status: number | null; error: string | null; endpoint_id: string | null; next_attempt_at: Date | null; duration_ms: number | null; response_body: string | null }>;
}

/** Waits until one of the event's attempts has `status`; then all its attempts, in order. */
export const attemptsUntil = (owner: pg.Pool, eventId: string, status: string, what: string) =>
  waitFor(async () => {
    const r = await deliveriesOf(owner, eventId);
    return r.some((x) => x.status === status) && r;
  }, what);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A send's outcome as the engine hands it to app.webhook_record_batch: a 200 answered at `attemptedAt`. */
export const okResult = (attemptedAt: string) => ({
  ok: true, complete: true, blocked: false, aborted: false, response_status: 200, response_body: 'thanks', response_headers: {},
  error: null, error_code: null, duration_ms: 7, attempted_at: attemptedAt, retry_after_seconds: null,
});

/**
 * One claim of up to 64 due attempts and the record of all it claimed as delivered, on one
 * session as the engine runs them (its plans are that session's): how many were claimed and
 * recorded, and the delivery rows each of the two read.
 */
export async function claimAndRecord(c: pg.ClientBase, owner: string): Promise<{ claimed: number; recorded: number; claimRead: number; recordRead: number }> {
  const reads = async () => (await xactReads(c, ['app.webhook_deliveries'])).rows;
  await c.query('begin');
  let before = await reads();
  const { rows: [{ claims }] } = await c.query(`select app.webhook_claim_batch($1, 64, 64, 64, 40000) -> 'claims' as claims`, [owner]);
  const claimRead = (await reads()) - before;
  await c.query('commit');
  const results = (claims as { delivery_id: string; endpoint_id: string }[])
    .map((x) => ({ delivery_id: x.delivery_id, endpoint_id: x.endpoint_id, result: okResult(new Date().toISOString()) }));
  await c.query('begin');
  before = await reads();
  const { rows: [{ done }] } = await c.query(`select app.webhook_record_batch($1, '{1,5}', 20, 3600) as done`, [JSON.stringify(results)]);
  const recordRead = (await reads()) - before;
  await c.query('commit');
  const recorded = (done as { status: string }[]).filter((d) => d.status === 'delivered').length;
  return { claimed: results.length, recorded, claimRead, recordRead };
}

/** The API (a TestApi, so `t.owner`, `t.baseUrl`… read as before) with the rest of a webhook suite's set-up. */
export interface WebhookRig extends TestApi {
  pki: TestPki;
  /** The file's HTTPS receiver (the endpoints' URL). */
  rx: HttpsReceiver;
  /** The running worker, if the rig started one; a test that swaps it assigns the new one here. */
  worker?: TestWorker;
  /** Stops the running worker and starts one on `cfg` (the API's settings unless given). */
  restartWorker(cfg?: Config): Promise<void>;
  /** With `tenant: true`: a location and a key with every scope. */
  loc: TestLocation;
  token: string;
}

/**
 * Registers the file's set-up: the API on its own database with `env`, a test CA, one HTTPS
 * receiver and (unless `worker: false`) the production worker, all closed after the file; with
 * `tenant`, a location and its key. With `resetEach`, the receiver forgets what it got and answers
 * 200 again before every test. The returned object is filled in by the time the first test (or a
 * later beforeAll) runs.
 */
export function useWebhookRig(env: Record<string, string>, opts: { worker?: boolean; tenant?: boolean; resetEach?: boolean } = {}): WebhookRig {
  const rig = {
    restartWorker: async (cfg?: Config) => {
      await rig.worker?.stop();
      rig.worker = await startTestWorker(cfg ?? rig.cfg, rig.db.url, rig.pki);
    },
  } as WebhookRig;
  let api: TestApi | undefined;
  beforeAll(async () => {
    rig.pki = makePki();
    api = await startTestApi(env);
    Object.assign(rig, api);
    rig.rx = await startHttpsReceiver(rig.pki);
    if (opts.worker !== false) rig.worker = await startTestWorker(rig.cfg, rig.db.url, rig.pki);
    if (opts.tenant) Object.assign(rig, await tenant(api));
  });
  afterAll(async () => {
    await rig.worker?.stop();
    await rig.rx?.close();
    await api?.close();
  });
  if (opts.resetEach) {
    beforeEach(() => {
      rig.rx.received.length = 0;
      rig.rx.respond(reply(200, 'ok'));
    });
  }
  return rig;
}

/** POST /locations/{id}/webhook-endpoints, which must answer 201; the endpoint as created (with its secret). */
export async function createEndpoint(t: Pick<TestApi, 'baseUrl'>, token: string, locationId: string, body: Record<string, unknown>) {
  const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${locationId}/webhook-endpoints`, { token, body });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; secret: string; [k: string]: unknown };
}
