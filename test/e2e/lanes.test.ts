/**
 * The notification lane (docs/delivery-engine.md): with a 2,000-event webhook backlog queued
 * ahead of it, an emergency call's SMS, e-mail and Slack notifications are sent while the backlog
 * is still draining, by the production worker (startWorker). Order and counts only.
 */
import { useFanoutRig } from '../support/receivers.js';
import { callFn } from '../../src/db/pools.js';
import { createLocation, mintKey, request } from '../support/harness.js';
import { reply, startHttpsReceiver, type Responder } from '../support/https.js';
import { connectIntegration, emergencyCall, notificationsOf } from '../notify/support.js';
import { emitMany, waitFor } from '../webhooks/support.js';

const BACKLOG = 2000;

const t = useFanoutRig('lane', { MAIL_FROM: 'alerts@switchboard.test', SMS_AUTH_TOKEN: 'tok', WEBHOOK_RETRY_DELAYS: '3600' }, { hooks: '/crm', slack: '/services/T0/B0/X', sms: '/sms' });

test('an emergency call’s SMS, e-mail and chat are sent while a 2,000-event webhook backlog is still draining', async () => {
  // A busy location: a CRM endpoint answering in 20 ms, with 2,000 lead events queued for it.
  const busy = await createLocation(t.owner, { name: 'Busy Roofing' });
  const { token } = await mintKey(t.owner, busy.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${busy.id}/webhook-endpoints`, {
    token, body: { url: t.rx.hooks.url, events: ['lead.created'] },
  });
  expect(ep.status).toBe(201);
  const slow: Responder = (r, res) => {
    setTimeout(() => reply(200, 'ok')(r, res), 20);
  };
  t.rx.hooks.respond(slow);
  await emitMany(t.owner, busy.id, 'lead.created', BACKLOG);

  // Another location's emergency, queued after the whole backlog.
  const loc = await createLocation(t.owner, { name: 'Acme Heating', owner_cell: '+12125550100' });
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'owner@acme.test', 'owner', 'Olive Owner']);
  await connectIntegration(t.owner, loc.id, 'slack', t.rx.slack.url, '#dispatch');
  // Each notification receiver notes how much of the backlog had been delivered when it got its message.
  const seen: Record<string, number> = {};
  const note = (what: string, r: Responder): Responder => (req, res) => {
    seen[what] ??= t.rx.hooks.received.length;
    r(req, res);
  };
  t.rx.sms.respond(note('sms', reply(201, '{"sid":"SM1"}')));
  t.rx.slack.respond(note('chat', reply(200, 'ok')));
  const { eventId } = await emergencyCall(t.owner, loc.id);

  await t.startWorker();

  await waitFor(async () => t.rx.smtp.messages.length >= 1 && seen.sms !== undefined && seen.chat !== undefined, 'emergency notifications sent', 45000);
  seen.email = t.rx.hooks.received.length; // e-mail has no responder hook: read it right after it arrived
  const ns = await waitFor(async () => {
    const r = await notificationsOf(t.owner, eventId);
    return r.every((n) => n.status === 'sent') && r;
  }, 'notifications recorded sent');
  expect(ns.map((n) => n.channel).sort()).toEqual(['chat', 'email', 'sms']);
  // The backlog was still draining: most of it not yet delivered when each message went out.
  for (const what of ['sms', 'chat', 'email']) expect(seen[what]).toBeLessThan(BACKLOG / 2);
  const { rows: [{ pending }] } = await t.owner.query(
    `select count(*)::int as pending from app.webhook_deliveries where location_id = $1 and status = 'pending'`, [busy.id]);
  expect(pending).toBeGreaterThan(0);

  // Stop the backlog so teardown is quick.
  expect((await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${ep.body.data.id}`, { token })).status).toBe(200);
});

test('emergency notifications go first: queued behind 40 lead notifications, the emergency Slack post is sent first', async () => {
  await t.worker?.stop(); // queue everything first, then start the worker
  t.worker = undefined;
  const loc = await createLocation(t.owner, { name: 'Queue Jumpers HVAC' });
  const room = await startHttpsReceiver(t.rx.pki, { path: '/services/T1/B1/Y' });
  try {
    await connectIntegration(t.owner, loc.id, 'slack', room.url, '#leads');
    await t.owner.query(`update app.notification_settings set routes = routes || '{"lead.created": ["chat"], "call.emergency": ["chat"]}' where location_id = $1`, [loc.id]);
    await emitMany(t.owner, loc.id, 'lead.created', 40);
    await emergencyCall(t.owner, loc.id);
    // One send at a time, so the order the lane takes jobs in is the order they arrive.
    await t.startWorker({ ...t.cfg, NOTIFY_CONCURRENCY: 1 });
    await waitFor(async () => room.received.length >= 41, 'all 41 Slack posts', 45000);
    const order = room.received.map((r) => (JSON.parse(r.body).text as string).includes('Emergency call'));
    expect(order.indexOf(true)).toBe(0);
    expect(order.filter(Boolean)).toHaveLength(1);
  } finally {
    await room.close();
  }
});
