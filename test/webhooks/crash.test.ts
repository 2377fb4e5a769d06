/**
 * A worker process killed -9 in the middle of a send: its lease lapses, the sweeper re-queues the
 * attempt, and a restarted worker sends it (at-least-once: the receiver sees it at most twice),
 * for a webhook attempt and for a notification alike. The child's lease grace is 1 s (the least
 * DELIVERY_LEASE_GRACE_MS takes), so the lease lapses 9 s after the claim rather than the production 40 s; the sweeper is called here
 * rather than waiting for the crontab minute.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createLocation, startTestApi, tenant, type TestApi } from '../support/harness.js';
import { sweep } from '../../src/worker/sweep.js';
import { makePki, reply, silence, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { emergencyCall, notificationsOf } from '../notify/support.js';
import { createEndpoint, deliveriesOf, emit, startTestWorker, waitFor } from './support.js';

const SMS = { SMS_ACCOUNT_SID: 'AC_crash', SMS_AUTH_TOKEN: 'tok', SMS_FROM: '+15005550006' };
const TIMEOUT_MS = '8000';

let t: TestApi;
let pki: TestPki;
let rx: HttpsReceiver;
let sms: HttpsReceiver;
let child: ChildProcess | undefined;

beforeAll(async () => {
  pki = makePki();
  [rx, sms] = await Promise.all([startHttpsReceiver(pki), startHttpsReceiver(pki, { path: '/sms' })]);
  t = await startTestApi({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: TIMEOUT_MS, SMS_API_URL: sms.url, ...SMS });
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await Promise.all([rx?.close(), sms?.close()]);
  await t?.close();
});

/** Starts a worker process (the production worker code) and resolves once it runs. */
async function spawnWorker(): Promise<ChildProcess> {
  const c = spawn(process.execPath, ['--import', 'tsx', path.join(process.cwd(), 'test/webhooks/worker-child.ts')], {
    env: {
      ...process.env, DATABASE_URL: t.db.url, NODE_EXTRA_CA_CERTS: pki.caFile, LOG_LEVEL: 'silent',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_TIMEOUT_MS: TIMEOUT_MS, WEBHOOK_RETRY_DELAYS: '3600',
      SMS_API_URL: sms.url, ...SMS, DELIVERY_LEASE_GRACE_MS: '1000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await waitFor(async () => new Promise<boolean>((ok) => c.stdout!.once('data', () => ok(true))), 'child ready', 30000);
  return c;
}

async function kill9(c: ChildProcess): Promise<void> {
  const exited = new Promise((ok) => c.once('exit', ok));
  c.kill('SIGKILL');
  await exited;
}

test('webhook: a worker killed -9 mid-delivery; the sweeper re-queues the attempt and it arrives', async () => {
  const { loc, token } = await tenant(t);
  await createEndpoint(t, token, loc.id, { url: rx.url, events: ['call.ended'] });

  // The receiver holds the first request open (never answers); later ones get 200.
  rx.respond(silence, reply(200, 'ok'));
  child = await spawnWorker();
  const eventId = await emit(t.owner, loc.id, 'call.ended', { id: 'call-1' });
  await waitFor(async () => rx.received.length >= 1, 'request reached the receiver', 20000);
  await kill9(child);
  child = undefined;

  // The dead worker's lease stands until it lapses; then the sweeper frees the attempt.
  const [d] = await deliveriesOf(t.owner, eventId);
  expect(d.status).toBe('pending');
  await waitFor(async () => (await sweep({ pool: t.owner }, 0)).webhooks === 1, 'sweeper re-queued the attempt', 30000);

  const worker = await startTestWorker(t.cfg, t.db.url, pki);
  try {
    const rows = await waitFor(async () => {
      const r = await deliveriesOf(t.owner, eventId);
      return r[0]?.status === 'delivered' && r;
    }, 'delivered after recovery');
    expect(rows).toHaveLength(1);
    const got = rx.received.filter((x) => x.headers['svc-event-id'] === eventId);
    expect(got).toHaveLength(2); // the lost one and the re-send: at most one extra
    expect(got[0].raw.equals(got[1].raw)).toBe(true);
    expect(got.map((x) => x.headers['svc-delivery-id'])).toEqual([d.id, d.id]);
  } finally {
    await worker.stop();
  }
});

test('notification: a worker killed -9 while the SMS is being sent; after restart it is sent (once more at most)', async () => {
  const loc = await createLocation(t.owner, { name: 'Crashy Heating', owner_cell: '+12125550199' });
  await t.owner.query(`update app.notification_settings set routes = routes || '{"call.emergency": ["sms"]}' where location_id = $1`, [loc.id]);
  sms.respond(silence, reply(201, '{"sid":"SM1"}'));
  child = await spawnWorker();
  const { eventId } = await emergencyCall(t.owner, loc.id);
  await waitFor(async () => sms.received.length >= 1, 'SMS request reached the provider', 20000);
  await kill9(child);
  child = undefined;

  const [n] = await notificationsOf(t.owner, eventId);
  expect(n.status).toBe('pending');
  // The killed worker's lease still holds it: no other engine may take it until the lease lapses.
  const lease = () => t.owner.query(
    `select lease_owner is not null as leased, next_attempt_at <= now() as due from app.notifications where id = $1`, [n.id]).then((r) => r.rows[0]);
  expect((await lease()).leased).toBe(true);
  await waitFor(async () => (await sweep({ pool: t.owner }, 0)).notifications === 1, 'sweeper re-queued the notification', 30000);
  expect(await lease()).toEqual({ leased: false, due: true });

  const worker = await startTestWorker(t.cfg, t.db.url, pki);
  try {
    const [sent] = await waitFor(async () => {
      const r = await notificationsOf(t.owner, eventId);
      return r[0]?.status === 'sent' && r;
    }, 'SMS sent after recovery');
    expect(sent.log.map((g) => [g.status, g.response_status])).toEqual([['sent', 201]]);
    expect(sms.received).toHaveLength(2); // the lost one and the re-send: at most one extra
    expect(sms.received[0].body).toBe(sms.received[1].body);
  } finally {
    await worker.stop();
  }
});
