/**
 * Prometheus metrics after a known workload (docs/operations.md, "Metrics"): exact counts of
 * requests per route template and status class, voice webhooks by type and outcome, webhook
 * attempts by outcome (a 500 then a 200; a refused connection), the event-to-receipt histogram,
 * and the scrape-time gauges (queue depth and oldest due age per lane, endpoints failing and
 * disabled, pools), read from the admin listener's /metrics as Prometheus would.
 */
import { randomUUID } from 'node:crypto';
import { databaseCheck, operationsRouter, startAdminServer, type AdminServer } from '../../src/metrics/admin.js';
import { setQueueSource, trackPool } from '../../src/metrics/queues.js';
import { laneChecks } from '../../src/worker/health.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { makePki, reply, silence, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { scrape } from '../support/metrics.js';
import { freePort } from '../support/spawn.js';
import { emergencyCall } from '../notify/support.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation } from '../platform/support.js';
import { deliveriesOf, emit, startTestWorker, waitFor } from '../webhooks/support.js';

let t: TestApi;
let pki: TestPki;
let rx: HttpsReceiver;
let ops: AdminServer;
let worker: Awaited<ReturnType<typeof startTestWorker>> | undefined;

beforeAll(async () => {
  pki = makePki();
  t = await startTestApi({ WEBHOOK_RETRY_DELAYS: '1', WEBHOOK_TIMEOUT_MS: '2000', VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  rx = await startHttpsReceiver(pki);
  trackPool('api', t.apiPool);
  setQueueSource(t.owner);
  ops = await startAdminServer('127.0.0.1', 0, operationsRouter([
    () => databaseCheck(() => t.apiPool.query('select api.ready()')),
    async () => (worker ? laneChecks(worker.worker.lanes) : {}),
  ]));
});
afterAll(async () => {
  await worker?.stop();
  await ops?.close();
  await rx?.close();
  await t?.close();
});

test('requests: one histogram series per method, route template and status class, with exact counts', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  for (let i = 0; i < 5; i++) expect((await request(t.baseUrl, 'GET', '/api/v1/me', { token })).status).toBe(200);
  // The same operation under /api/v1 and / is one route template.
  for (const prefix of ['/api/v1', '', '/api/v1']) {
    expect((await request(t.baseUrl, 'GET', `${prefix}/locations/${loc.id}/calls`, { token })).status).toBe(200);
  }
  const other = await createLocation(t.owner);
  expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${other.id}/calls`, { token })).status).toBe(404);
  expect((await request(t.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() })).status).toBe(401);
  expect((await request(t.baseUrl, 'POST', '/api/v1/me', { token, body: {} })).status).toBe(405);
  for (let i = 0; i < 2; i++) expect((await request(t.baseUrl, 'GET', `/no/such/${randomUUID()}`)).status).toBe(404);

  const m = await scrape(ops.url);
  expect(m.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  const count = (labels: Record<string, string>) => m.value('switchboard_http_request_duration_seconds_count', labels);
  expect(count({ method: 'GET', route: '/me', status_class: '2xx' })).toBe(5);
  expect(count({ method: 'GET', route: '/me', status_class: '4xx' })).toBe(1);
  expect(count({ method: 'POST', route: '/me', status_class: '4xx' })).toBe(1);
  expect(count({ method: 'GET', route: '/locations/:locationId/calls', status_class: '2xx' })).toBe(3);
  expect(count({ method: 'GET', route: '/locations/:locationId/calls', status_class: '4xx' })).toBe(1);
  expect(count({ method: 'GET', route: 'unmatched', status_class: '4xx' })).toBe(2);
  expect(m.sum('switchboard_http_request_duration_seconds_count')).toBe(13);
  // Buckets are cumulative: the +Inf bucket holds every request of its series.
  expect(m.value('switchboard_http_request_duration_seconds_bucket', { method: 'GET', route: '/me', status_class: '2xx', le: '+Inf' })).toBe(5);
  // No id of any kind becomes a label value: not the location's, not the unmatched paths'.
  const labelValues = m.samples.flatMap((s) => Object.values(s.labels));
  expect(labelValues.filter((v) => /[0-9a-f]{8}-[0-9a-f]{4}/.test(v))).toEqual([]);
  // Pools of the process and the default process metrics (event-loop lag among them).
  expect(m.value('switchboard_db_pool_connections', { pool: 'api', state: 'in_use' })).toBe(0);
  expect(m.value('switchboard_db_pool_waiting', { pool: 'api' })).toBe(0);
  expect(m.value('nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
  expect(m.value('process_resident_memory_bytes')).toBeGreaterThan(0);
});

test('voice webhooks by type and outcome', async () => {
  const loc = await voiceLocation(t.owner);
  expect((await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc))).status).toBe(200);
  expect((await postVoice(t.baseUrl, 'post-call', voiceFixture('call-started', loc))).status).toBe(200);
  expect((await postVoice(t.baseUrl, 'post-call', voiceFixture('call-started', loc), { signature: 'v=1,d=00' })).status).toBe(401);
  const m = await scrape(ops.url);
  expect(m.all('switchboard_voice_events_total').map((s) => [s.labels.type, s.labels.outcome, s.value]).sort()).toEqual([
    ['call_started', 'recorded', 1],
    ['inbound', 'recorded', 1],
    ['unknown', 'rejected', 1],
  ]);
});

test('webhook attempts by outcome, event-to-receipt latency, queue gauges and endpoint states', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const make = async (url: string, events: string[]) => {
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url, events } });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  };
  rx.respond(reply(500, 'boom'), reply(200, 'ok'));
  await make(rx.url, ['lead.created']);
  // Nothing listens here: the connection is refused, twice (the first attempt and its one retry).
  await make(`https://127.0.0.1:${await freePort()}/hook`, ['booking.created']);
  // This one never answers: two attempts time out (WEBHOOK_TIMEOUT_MS=2000).
  const slow = await startHttpsReceiver(pki, { path: '/slow' });
  slow.respond(silence);
  await make(slow.url, ['call.ended']);

  worker = await startTestWorker(t.cfg, t.db.url, pki);
  const ok = await emit(t.owner, loc.id, 'lead.created', { n: 1 });
  const refused = await emit(t.owner, loc.id, 'booking.created', { n: 1 });
  const timedOut = await emit(t.owner, loc.id, 'call.ended', { n: 1 });
  await waitFor(async () => (await deliveriesOf(t.owner, ok)).some((d) => d.status === 'delivered'), 'delivered after a 500');
  await waitFor(async () => (await deliveriesOf(t.owner, refused)).length === 2
    && (await deliveriesOf(t.owner, refused)).every((d) => d.status !== 'pending'), 'both refused attempts recorded');
  await waitFor(async () => (await deliveriesOf(t.owner, timedOut)).length === 2
    && (await deliveriesOf(t.owner, timedOut)).every((d) => d.status !== 'pending'), 'both timed-out attempts recorded', 30_000);
  await slow.close();

  const m = await scrape(ops.url);
  const attempts = (outcome: string) => m.value('switchboard_webhook_attempts_total', { outcome });
  expect(attempts('5xx')).toBe(1);
  expect(attempts('2xx')).toBe(1);
  expect(attempts('refused')).toBe(2);
  expect(attempts('timeout')).toBe(2);
  expect(m.sum('switchboard_webhook_attempts_total')).toBe(6);
  // One event reached its receiver: one latency observation, after the 1 s retry delay.
  expect(m.value('switchboard_webhook_delivery_latency_seconds_count')).toBe(1);
  expect(m.value('switchboard_webhook_delivery_latency_seconds_bucket', { le: '0.5' })).toBe(0);
  expect(m.value('switchboard_webhook_endpoints', { state: 'failing' })).toBe(2);
  expect(m.value('switchboard_webhook_endpoints', { state: 'disabled' })).toBe(0);
  // The worker's lanes have claimed: ready, and their claim ages reported.
  const ready = await fetch(`${ops.url}/readyz`);
  expect(ready.status).toBe(200);
  expect(((await ready.json()) as any).data.checks).toEqual({
    database: { ok: true }, lane_webhooks: { ok: true }, lane_notifications: { ok: true }, lane_jobs: { ok: true }, lane_syncs: { ok: true },
  });
  expect(m.all('switchboard_engine_last_claim_age_seconds').map((s) => s.labels.lane).sort()).toEqual(['jobs', 'notifications', 'syncs', 'webhooks']);

  // Without a worker, work queues up: 3 webhook attempts and an emergency SMS become due.
  await worker.stop();
  worker = undefined;
  await t.owner.query('update app.webhook_endpoints set failure_count = 0 where location_id = $1', [loc.id]);
  await t.owner.query(`update app.webhook_endpoints set active = false where location_id = $1 and events <> '{lead.created}'`, [loc.id]);
  for (let i = 0; i < 3; i++) await emit(t.owner, loc.id, 'lead.created', { n: i });
  const voice = await voiceLocation(t.owner, { owner_cell: '+12125550123' });
  await t.owner.query(`update app.notification_settings set routes = '{"call.emergency": ["sms"]}' where location_id = $1`, [voice.id]);
  await emergencyCall(t.owner, voice.id);
  // A job due an hour ago, as a stalled jobs lane would leave it.
  await t.owner.query(`select graphile_worker.add_job('finalize_call', json_build_object('call_id', gen_random_uuid()), run_at := now() - interval '1 hour')`);
  const { rows: [jobs] } = await t.owner.query(`select count(*)::int as n from graphile_worker.jobs where run_at <= now() and locked_at is null and attempts < max_attempts`);

  const q = await scrape(ops.url);
  const depth = (lane: string, channel?: string) => q.value('switchboard_queue_depth', channel ? { lane, channel } : { lane });
  expect(depth('webhooks')).toBe(3);
  expect(depth('notifications', 'sms')).toBe(1);
  expect(depth('notifications', 'email')).toBe(0);
  expect(depth('jobs')).toBe(jobs.n);
  expect(q.value('switchboard_queue_oldest_due_age_seconds', { lane: 'jobs' })).toBeGreaterThanOrEqual(3600);
  expect(q.value('switchboard_queue_oldest_due_age_seconds', { lane: 'notifications', channel: 'chat' })).toBe(0);
  expect(q.value('switchboard_webhook_endpoints', { state: 'failing' })).toBe(0);
  expect(q.value('switchboard_database_up')).toBe(1);

  // A paused endpoint's attempts wait on purpose: they are not a stalled lane.
  await t.owner.query('update app.webhook_endpoints set active = false where location_id = $1', [loc.id]);
  expect((await scrape(ops.url)).value('switchboard_queue_depth', { lane: 'webhooks' })).toBe(0);
});

test('readiness: a lane with no claim for longer than the limit, or a database out of reach, is not ready', async () => {
  const lane = { name: 'webhooks', lastOkAt: () => 1_000_000, saturated: () => false };
  expect(laneChecks([lane], 1_000_000 + 15_000)).toEqual({ lane_webhooks: { ok: true } });
  expect(laneChecks([lane], 1_000_000 + 16_000)).toEqual({ lane_webhooks: { ok: false, detail: 'last successful claim 16 s ago' } });
  // Every slot busy counts as claiming: it claims again as one frees.
  expect(laneChecks([{ ...lane, saturated: () => true }], 1_000_000 + 60_000)).toEqual({ lane_webhooks: { ok: true } });

  const dead = `postgres://postgres:x@127.0.0.1:${await freePort()}/switchboard`;
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionString: dead });
  pool.on('error', () => undefined);
  const down = await startAdminServer('127.0.0.1', 0, operationsRouter([() => databaseCheck(() => pool.query('select 1'))]));
  try {
    const res = await fetch(`${down.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: { code: 'unavailable', message: 'Not ready: database', details: { checks: { database: { ok: false, detail: 'ECONNREFUSED' } } } } });
    expect((await fetch(`${down.url}/healthz`)).status).toBe(200);
  } finally {
    await down.close();
    await pool.end();
  }
});

test('notification tries by channel, priority and outcome: an emergency SMS failing once, then sent', async () => {
  const sms = await startHttpsReceiver(pki, { path: '/sms' });
  // Left pending by the test above (no worker then): not this test's workload.
  await t.owner.query(`delete from app.notifications where status = 'pending'`);
  const cfg = { ...t.cfg, SMS_API_URL: sms.url, SMS_ACCOUNT_SID: 'AC_metrics', SMS_AUTH_TOKEN: 'tok', SMS_FROM: '+15005550006' };
  const w = await startTestWorker(cfg, t.db.url, pki);
  try {
    sms.respond(reply(500, '{"message":"try again"}'), reply(201, '{"sid":"SM1"}'));
    const loc = await voiceLocation(t.owner, { owner_cell: '+12125550124' });
    await t.owner.query(`update app.notification_settings set routes = '{"call.emergency": ["sms"]}' where location_id = $1`, [loc.id]);
    const { eventId } = await emergencyCall(t.owner, loc.id);
    await waitFor(async () => (await t.owner.query(`select status from app.notifications where event_id = $1`, [eventId])).rows[0]?.status === 'sent',
      'the SMS sent on its second try');
    const m = await scrape(ops.url);
    expect(m.all('switchboard_notification_attempts_total').map((s) => [s.labels.channel, s.labels.priority, s.labels.outcome, s.value]).sort()).toEqual([
      ['sms', 'emergency', 'failed', 1],
      ['sms', 'emergency', 'sent', 1],
    ]);
  } finally {
    await w.stop();
    await sms.close();
  }
});
