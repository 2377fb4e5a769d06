/**
 * At-least-once, the sweeper's side (docs/webhooks.md): app.webhook_sweep re-queues an overdue
 * pending attempt nobody holds, and leaves alone an attempt a live worker is sending (its
 * transaction holds the delivery row lock), so that attempt is sent exactly once.
 */
import type { ServerResponse } from 'node:http';
import { createLocation, mintKey, request, startTestApi, testLog, type TestApi } from '../support/harness.js';
import { makeSweepTask } from '../../src/webhooks/deliver.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type Responder, type TestPki } from '../support/https.js';
import { deliveriesOf, emit, startTestWorker, waitFor } from './support.js';

let t: TestApi;
let pki: TestPki;
let rx: HttpsReceiver;
let worker: Awaited<ReturnType<typeof startTestWorker>>;

beforeAll(async () => {
  pki = makePki();
  // A long time-out keeps the held attempt in flight for the whole test; no automatic retry.
  t = await startTestApi({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '30000' });
  rx = await startHttpsReceiver(pki);
  worker = await startTestWorker(t.cfg, t.db.url, pki);
});
afterAll(async () => {
  await worker?.stop();
  await rx?.close();
  await t?.close();
});

/** deliver_webhook jobs of one delivery (graphile_worker's jobs view has no payload). */
async function jobsOf(q: { query: TestApi['owner']['query'] }, deliveryId: string) {
  const { rows } = await q.query(
    `select j.key, j.locked_at is not null as locked
       from graphile_worker._private_jobs j join graphile_worker._private_tasks k on k.id = j.task_id
      where k.identifier = 'deliver_webhook' and j.payload ->> 'delivery_id' = $1 order by j.id`, [deliveryId]);
  return rows as Array<{ key: string | null; locked: boolean }>;
}

const requestsFor = (deliveryId: string) => rx.received.filter((r) => r.headers['svc-delivery-id'] === deliveryId);

test('the sweeper skips an attempt still in flight and re-queues an overdue one nobody holds', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
    token, body: { url: rx.url, events: ['call.ended'] },
  });
  expect(ep.status).toBe(201);
  const endpointId = ep.body.data.id as string;

  // The first request is held open (answered only when the test says so); later ones get 200.
  let held: ServerResponse | undefined;
  const hold: Responder = (_r, res) => {
    held = res;
  };
  rx.respond(hold, reply(200, 'ok'));

  // A: in flight — the worker has claimed it (row locked, transaction open) and is waiting.
  const eventA = await emit(t.owner, loc.id, 'call.ended', { id: 'call-a' });
  await waitFor(async () => held !== undefined, 'attempt A reached the receiver');
  const [a] = await deliveriesOf(t.owner, eventA);
  expect(a.status).toBe('pending');
  expect(requestsFor(a.id)).toHaveLength(1);

  // B: an attempt 5 minutes overdue whose job was lost (no job at all, no worker holds it).
  const eventB = await emit(t.owner, loc.id, 'lead.created', { id: 'lead-b' }); // not subscribed: no fan-out
  expect(await deliveriesOf(t.owner, eventB)).toEqual([]);
  const c = await t.owner.connect();
  let b: string;
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [loc.id]);
    const { rows } = await c.query(
      `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
       values ($1, $2, $3, 'lead.created', 1, 'pending', $4, now() - interval '5 minutes') returning id`,
      [loc.id, eventB, endpointId, rx.url]);
    b = rows[0].id;
    await c.query('commit');
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
  expect(await jobsOf(t.owner, b)).toEqual([]);

  // Sweep with no grace: both A and B are due and pending, but only B is free. Inspect the queue
  // inside the sweep's transaction, before the worker can see (and run) what it added.
  const s = await t.owner.connect();
  try {
    await s.query('begin');
    const { rows: [{ n }] } = await s.query('select app.webhook_sweep(0) as n');
    expect(n).toBe(1);
    expect(await jobsOf(s, a.id)).toEqual([{ key: `delivery:${a.id}`, locked: true }]); // only the running job
    expect(await jobsOf(s, b)).toEqual([{ key: `delivery:${b}`, locked: false }]);
    await s.query('commit');
  } catch (e) {
    await s.query('rollback');
    throw e;
  } finally {
    s.release();
  }

  // B is delivered by the worker; A is still in flight and was not sent again.
  await waitFor(async () => (await deliveriesOf(t.owner, eventB))[0]?.status === 'delivered', 'B delivered');
  expect(requestsFor(b)).toHaveLength(1);
  expect((await deliveriesOf(t.owner, eventA)).map((d) => d.status)).toEqual(['pending']);
  expect(requestsFor(a.id)).toHaveLength(1);
  // The cron task itself, run again now, still leaves A alone.
  await makeSweepTask({ cfg: t.cfg, log: testLog, pool: t.owner })({ grace_seconds: 0 }, {} as never);
  expect(await jobsOf(t.owner, a.id)).toEqual([{ key: `delivery:${a.id}`, locked: true }]);

  // Release A: it is recorded once, and no other request for it ever went out.
  held!.writeHead(200, { 'content-type': 'text/plain' });
  held!.end('ok');
  const rowsA = await waitFor(async () => {
    const r = await deliveriesOf(t.owner, eventA);
    return r[0]?.status === 'delivered' && r;
  }, 'A delivered');
  expect(rowsA.map((d) => [d.attempt, d.status, d.response_status])).toEqual([[1, 'delivered', 200]]);
  await waitFor(async () => (await jobsOf(t.owner, a.id)).length === 0 && (await jobsOf(t.owner, b)).length === 0, 'queue drained');
  expect(requestsFor(a.id)).toHaveLength(1);
  expect(requestsFor(b)).toHaveLength(1);
  expect(rx.received).toHaveLength(2);
});
