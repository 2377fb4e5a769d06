import { callFn } from '../../src/db/pools.js';
import { createLocation, mintKey, request, startTestApi, testConfig, type TestApi } from '../support/harness.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { startSmtp, type SmtpReceiver } from '../support/smtp.js';
import { NOTIFY_MAX_ATTEMPTS } from '../../src/notify/engine.js';
import { connectIntegration, emergencyCall, notificationsOf, sendDue, tryNow } from './support.js';

let t: TestApi;
let pki: TestPki;
let slack: HttpsReceiver;
let sms: HttpsReceiver;
let smtp: SmtpReceiver;

beforeAll(async () => {
  pki = makePki();
  [slack, sms, smtp] = await Promise.all([startHttpsReceiver(pki, { path: '/services/T1/B1/Y' }), startHttpsReceiver(pki, { path: '/sms' }), startSmtp()]);
  t = await startTestApi({
    SMTP_URL: smtp.url, MAIL_FROM: 'alerts@switchboard.test',
    SMS_API_URL: sms.url, SMS_ACCOUNT_SID: 'AC_x', SMS_AUTH_TOKEN: 'tok', SMS_FROM: '+15005550006',
  });
});
afterAll(async () => {
  await t.close();
  await Promise.all([slack.close(), sms.close(), smtp.close()]);
});

test('a routed channel with nobody to reach is recorded skipped with the reason, and nothing is sent', async () => {
  const loc = await createLocation(t.owner, { name: 'Lonely Plumbing' }); // no owner_cell, members or integrations
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const ns = await notificationsOf(t.owner, eventId);
  expect(ns.map((n) => [n.channel, n.status, n.recipient, n.log.map((g) => g.status)])).toEqual([
    ['chat', 'skipped', null, ['skipped']],
    ['email', 'skipped', null, ['skipped']],
    ['sms', 'skipped', null, ['skipped']],
  ]);
  expect(ns[0].log[0].detail).toBe('no slack integration connected');
  expect(ns[1].log[0].detail).toMatch(/no e-mail recipient/);
  expect(ns[2].log[0].detail).toMatch(/owner_cell is unset/);
  await sendDue(t.owner, t.cfg, pki.caPem);
  expect(slack.received).toHaveLength(0);
  expect(sms.received).toHaveLength(0);
  expect(smtp.messages).toHaveLength(0);
});

test('an unconfigured channel (no SMTP_URL, no SMS settings) is logged skipped with the reason', async () => {
  const loc = await createLocation(t.owner, { name: 'Bare Config HVAC', owner_cell: '+12125550111' });
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'boss@bare.test', 'owner', null]);
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const bare = testConfig({ DATABASE_URL: t.db.url });
  await sendDue(t.owner, bare, pki.caPem);
  const ns = await notificationsOf(t.owner, eventId);
  const email = ns.find((n) => n.channel === 'email')!;
  const text = ns.find((n) => n.channel === 'sms')!;
  expect(email.status).toBe('skipped');
  expect(email.log).toEqual([expect.objectContaining({ status: 'skipped', detail: 'e-mail not configured: SMTP_URL, MAIL_FROM unset' })]);
  expect(text.status).toBe('skipped');
  expect(text.log[0].detail).toMatch(/^SMS not configured: .*SMS_ACCOUNT_SID/);
  expect(smtp.messages).toHaveLength(0);
  expect(sms.received).toHaveLength(0);
});

test('Slack answering 500: each try is logged failed, retried until the last attempt, then the notification is failed', async () => {
  const loc = await createLocation(t.owner, { name: 'Retry Roofing' });
  await connectIntegration(t.owner, loc.id, 'slack', slack.url);
  await t.owner.query(`update app.notification_settings set routes = routes || '{"call.emergency": ["chat"]}' where location_id = $1`, [loc.id]);
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const [n] = await notificationsOf(t.owner, eventId);
  slack.respond(reply(500, 'internal_error'));
  const before = slack.received.length;

  await tryNow(t.owner, t.cfg, pki.caPem, n.id);
  let [row] = await notificationsOf(t.owner, eventId);
  expect(row.status).toBe('pending');
  expect(row.log.map((g) => [g.status, g.response_status])).toEqual([['failed', 500]]);

  for (let i = 2; i <= NOTIFY_MAX_ATTEMPTS; i++) await tryNow(t.owner, t.cfg, pki.caPem, n.id);
  [row] = await notificationsOf(t.owner, eventId);
  expect(row.status).toBe('failed');
  expect(row.attempts).toBe(NOTIFY_MAX_ATTEMPTS);
  expect(row.log.map((g) => g.status)).toEqual(Array(NOTIFY_MAX_ATTEMPTS).fill('failed'));
  expect(slack.received.length - before).toBe(NOTIFY_MAX_ATTEMPTS);

  // Settled: nothing sends it again.
  await tryNow(t.owner, t.cfg, pki.caPem, n.id);
  expect(slack.received.length - before).toBe(NOTIFY_MAX_ATTEMPTS);
  slack.respond(reply(200, 'ok'));
});

test('a failed try leaves the notification pending, its next try due after the backoff (e^attempts seconds)', async () => {
  const loc = await createLocation(t.owner, { name: 'Worker Retry Co', owner_cell: '+12125550122' });
  await t.owner.query(`update app.notification_settings set routes = routes || '{"call.emergency": ["sms"]}' where location_id = $1`, [loc.id]);
  sms.respond(reply(503, '{"code":20429,"message":"Too Many Requests"}'));
  const { eventId } = await emergencyCall(t.owner, loc.id);
  await sendDue(t.owner, t.cfg, pki.caPem);
  const [n] = await notificationsOf(t.owner, eventId);
  expect(n.status).toBe('pending');
  expect(n.attempts).toBe(1);
  expect(n.log).toEqual([expect.objectContaining({ status: 'failed', response_status: 503, detail: expect.stringContaining('Too Many Requests') })]);
  const { rows } = await t.owner.query(
    `select lease_owner, round(extract(epoch from n.next_attempt_at - g.at)::numeric, 1)::float8 as backoff
       from app.notifications n join app.notification_log g on g.notification_id = n.id where n.id = $1`, [n.id]);
  // e^1 = 2.72 s after the try was recorded (both stamped in the record transaction).
  expect(rows).toEqual([{ lease_owner: null, backoff: 2.7 }]);
  sms.respond(reply(201, '{"sid":"SM2"}'));
});

test('connection refused and SMTP rejection are failed tries with the error', async () => {
  const loc = await createLocation(t.owner, { name: 'Broken Links LLC' });
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'owner@broken.test', 'owner', null]);
  await connectIntegration(t.owner, loc.id, 'slack', 'https://127.0.0.1:1/services/none');
  smtp.refuse(550);
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const ns = await notificationsOf(t.owner, eventId);
  const email = ns.find((n) => n.channel === 'email')!;
  // Three e-mail tries used up already: this is its last.
  await t.owner.query(`update app.notifications set attempts = $2 where id = $1`, [email.id, NOTIFY_MAX_ATTEMPTS - 1]);
  await sendDue(t.owner, t.cfg, pki.caPem);
  smtp.refuse(null);
  const after = await notificationsOf(t.owner, eventId);
  const chatAfter = after.find((n) => n.channel === 'chat')!;
  expect(chatAfter.status).toBe('pending');
  expect(chatAfter.log).toEqual([expect.objectContaining({ status: 'failed', detail: expect.stringContaining('ECONNREFUSED') })]);
  const mail = after.find((n) => n.channel === 'email')!;
  expect(mail.status).toBe('failed');
  expect(mail.log).toEqual([expect.objectContaining({ status: 'failed', response_status: 550 })]);
});

test('with private targets disallowed, a loopback Slack URL is refused once and not retried', async () => {
  const loc = await createLocation(t.owner, { name: 'Guarded Garage Doors' });
  await connectIntegration(t.owner, loc.id, 'slack', slack.url);
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const strict = testConfig({ DATABASE_URL: t.db.url, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  const before = slack.received.length;
  await sendDue(t.owner, strict, pki.caPem);
  const [row] = (await notificationsOf(t.owner, eventId)).filter((n) => n.channel === 'chat');
  expect(row.status).toBe('failed');
  expect(row.log).toEqual([expect.objectContaining({ status: 'failed', detail: expect.stringMatching(/refused target .*127\.0\.0\.1 is not public/) })]);
  expect(slack.received.length).toBe(before);
});

test('a disconnected integration is skipped at send time', async () => {
  const loc = await createLocation(t.owner, { name: 'Gone Slack Co' });
  await connectIntegration(t.owner, loc.id, 'slack', slack.url);
  const { eventId } = await emergencyCall(t.owner, loc.id);
  await t.owner.query(`update app.integrations set status = 'disconnected' where location_id = $1`, [loc.id]);
  await sendDue(t.owner, t.cfg, pki.caPem);
  const chat = (await notificationsOf(t.owner, eventId)).find((n) => n.channel === 'chat')!;
  expect(chat.status).toBe('skipped');
  expect(chat.log[0].detail).toBe('slack integration is no longer connected');
});

test('another location never sees the notifications or their log', async () => {
  const a = await createLocation(t.owner, { name: 'Tenant A', owner_cell: '+12125550133' });
  const b = await createLocation(t.owner, { name: 'Tenant B' });
  await emergencyCall(t.owner, a.id);
  const { token: tokenA } = await mintKey(t.owner, a.id, ['notifications:read']);
  const { token: tokenB } = await mintKey(t.owner, b.id, ['notifications:read', 'settings:read', 'settings:write']);
  const own = await request(t.baseUrl, 'GET', `/api/v1/locations/${a.id}/notifications?include=log`, { token: tokenA });
  expect(own.status).toBe(200);
  expect(own.body.data.length).toBeGreaterThan(0);
  for (const path of [`/api/v1/locations/${a.id}/notifications?include=log`, `/locations/${a.slug}/notifications`,
                      `/api/v1/locations/${a.id}/notification-settings`]) {
    const res = await request(t.baseUrl, 'GET', path, { token: tokenB });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  }
  const patch = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${a.id}/notification-settings`, { token: tokenB, body: { sms_recipients: [] } });
  expect(patch.status).toBe(404);
  const theirs = await request(t.baseUrl, 'GET', `/api/v1/locations/${b.id}/notifications?include=log`, { token: tokenB });
  expect(theirs.status).toBe(200);
  expect(theirs.body.data).toEqual([]);
  // Even a B-tenant transaction reading the tables directly sees nothing of A (RLS is the wall).
  const c = await t.apiPool.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [b.id]);
    const { rows } = await c.query(`select (select count(*) from app.notifications) as n, (select count(*) from app.notification_log) as g`);
    expect(rows[0]).toEqual({ n: 0, g: 0 });
    await c.query('rollback');
  } finally {
    c.release();
  }
});
