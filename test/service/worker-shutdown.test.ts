/**
 * SIGTERM of a worker process (`npm run start:worker`) in the middle of work: it exits 0 within
 * the shutdown budget, leaves no graphile-worker job locked and no lease held (finished sends are
 * recorded), and the sends it was waiting on are released for the next worker instead of being
 * stranded.
 */
import type { ServerResponse } from 'node:http';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type Responder, type TestPki } from '../support/https.js';
import { expectCleanExit, startService } from '../support/service.js';
import { connectIntegration, emergencyCall, notificationsOf } from '../notify/support.js';
import { deliveriesOf, emit, emitMany, waitFor } from '../webhooks/support.js';

let t: TestApi;
let pki: TestPki;
let hooks: HttpsReceiver;
let slack: HttpsReceiver;
let sms: HttpsReceiver;
const SMS = { SMS_ACCOUNT_SID: 'AC_term', SMS_AUTH_TOKEN: 'tok', SMS_FROM: '+15005550006' };

beforeAll(async () => {
  pki = makePki();
  [hooks, slack, sms] = await Promise.all([
    startHttpsReceiver(pki), startHttpsReceiver(pki, { path: '/services/T/B/Z' }), startHttpsReceiver(pki, { path: '/sms' }),
  ]);
  t = await startTestApi({ SMS_API_URL: sms.url, ...SMS });
});
afterAll(async () => {
  await Promise.all([hooks?.close(), slack?.close(), sms?.close()]);
  await t?.close();
});

test('SIGTERM mid-work: exit 0, no job row left locked, in-flight sends released', async () => {
  // Held open by their receivers: one webhook attempt and one SMS.
  const held: ServerResponse[] = [];
  const hold: Responder = (_r, res) => {
    held.push(res);
  };
  hooks.respond(hold);
  sms.respond(hold);
  // Plenty of quick work around them: 300 Slack notifications answered at once, and a job.
  slack.respond(reply(200, 'ok'));

  const loc = await createLocation(t.owner, { name: 'Graceful Gutters', owner_cell: '+12125550177' });
  await t.owner.query(`update app.notification_settings set routes = routes || '{"call.emergency": ["sms"], "lead.created": ["chat"]}' where location_id = $1`, [loc.id]);
  await connectIntegration(t.owner, loc.id, 'slack', slack.url, '#ops');
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url: hooks.url, events: ['call.ended'] } });
  expect(ep.status).toBe(201);

  const worker = await startService({
    DATABASE_URL: t.db.url, NODE_EXTRA_CA_CERTS: pki.caFile, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_TIMEOUT_MS: '60000', SMS_API_URL: sms.url, ...SMS,
  }, { mode: 'worker' });
  try {
    const webhookEvent = await emit(t.owner, loc.id, 'call.ended', { id: 'call-term' });
    const { eventId: smsEvent } = await emergencyCall(t.owner, loc.id);
    await emitMany(t.owner, loc.id, 'lead.created', 300);
    await t.owner.query(`select graphile_worker.add_job('finalize_call', json_build_object('call_id', gen_random_uuid()))`);
    await waitFor(async () => held.length === 2 && slack.received.length >= 30, 'sends in flight and others recorded', 30000);

    worker.child.kill('SIGTERM');
    await expectCleanExit(worker);
    expect(worker.output()).toMatch(/"msg":"stopped"/);

    // No job is left locked: completed ones are gone, the rest wait for the next worker.
    const { rows: [jobs] } = await t.owner.query(
      `select count(*) filter (where locked_at is not null)::int as locked, count(*)::int as total from graphile_worker._private_jobs`);
    expect(jobs.locked).toBe(0);
    // The held webhook attempt was released (due again, no lease), not recorded as a failure.
    const [d] = await deliveriesOf(t.owner, webhookEvent);
    expect(d.status).toBe('pending');
    const { rows: [lease] } = await t.owner.query('select lease_owner, lease_expires_at from app.webhook_deliveries where id = $1', [d.id]);
    expect(lease).toEqual({ lease_owner: null, lease_expires_at: null });
    // The held SMS was released too: pending, no try logged, no lease, due again at once.
    const smsRows = await notificationsOf(t.owner, smsEvent);
    expect(smsRows.map((n) => [n.channel, n.status, n.log.length])).toEqual([['sms', 'pending', 0]]);
    const { rows: [smsLease] } = await t.owner.query(
      `select lease_owner, lease_expires_at, attempts, next_attempt_at <= now() as due from app.notifications where id = $1`, [smsRows[0].id]);
    expect(smsLease).toEqual({ lease_owner: null, lease_expires_at: null, attempts: 0, due: true });
    // Every Slack post that got its answer was recorded: no notification keeps a lease.
    const { rows: [leases] } = await t.owner.query(
      `select count(*)::int as n from app.notifications where location_id = $1 and lease_owner is not null`, [loc.id]);
    expect(leases.n).toBe(0);
  } finally {
    if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
  }
}, 90_000);
