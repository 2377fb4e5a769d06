import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { callFn } from '../../src/db/pools.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { decodeQuotedPrintable, mailSubject, startSmtp, type SmtpReceiver } from '../support/smtp.js';
import { connectIntegration, emergencyCall, notificationsOf, sendDue } from './support.js';

let t: TestApi;
let pki: TestPki;
let slack: HttpsReceiver;
let sms: HttpsReceiver;
let zap: HttpsReceiver;
let smtp: SmtpReceiver;
let loc: { id: string; slug: string };
let token: string;

beforeAll(async () => {
  pki = makePki();
  [slack, sms, zap, smtp] = await Promise.all([
    startHttpsReceiver(pki, { path: '/services/T000/B000/XXXX' }),
    startHttpsReceiver(pki, { path: '/2010-04-01/Accounts/AC_test/Messages.json' }),
    startHttpsReceiver(pki, { path: '/hooks/catch/123/abc' }),
    startSmtp(),
  ]);
  sms.respond(reply(201, '{"sid":"SM0001","status":"queued"}'));
  t = await startTestApi({
    SMTP_URL: smtp.url, MAIL_FROM: 'Switchboard <alerts@switchboard.test>',
    SMS_API_URL: sms.url, SMS_ACCOUNT_SID: 'AC_test', SMS_AUTH_TOKEN: 'tok_secret', SMS_FROM: '+15005550006',
  });
  loc = await createLocation(t.owner, { name: 'Acme Heating & Air', owner_cell: '+12125550100' });
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'owner@acme.test', 'owner', 'Olive Owner']);
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'admin@acme.test', 'admin', 'Adam Admin']);
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'tech@acme.test', 'member', 'Tess Tech']);
  await connectIntegration(t.owner, loc.id, 'slack', slack.url, '#dispatch');
  await connectIntegration(t.owner, loc.id, 'zapier', zap.url);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(async () => {
  await t.close();
  await Promise.all([slack.close(), sms.close(), zap.close(), smtp.close()]);
});

test('an emergency call fans out to SMS, e-mail and Slack, each received and logged as sent', async () => {
  const { eventId } = await emergencyCall(t.owner, loc.id);
  const queued = await notificationsOf(t.owner, eventId);
  expect(queued.map((n) => [n.channel, n.provider, n.recipient, n.status])).toEqual([
    ['chat', 'slack', '#dispatch', 'pending'],
    ['email', 'smtp', 'admin@acme.test', 'pending'],
    ['email', 'smtp', 'owner@acme.test', 'pending'],
    ['sms', 'twilio', '+12125550100', 'pending'],
  ]);

  await sendDue(t.owner, t.cfg, pki.caPem);

  // SMS API: Twilio form fields, basic auth, concise body with the real callback number.
  expect(sms.received).toHaveLength(1);
  const s = sms.received[0];
  expect(s.method).toBe('POST');
  expect(s.headers['content-type']).toBe('application/x-www-form-urlencoded');
  expect(s.headers.authorization).toBe(`Basic ${Buffer.from('AC_test:tok_secret').toString('base64')}`);
  const form = new URLSearchParams(s.body);
  expect(form.get('To')).toBe('+12125550100');
  expect(form.get('From')).toBe('+15005550006');
  const body = form.get('Body')!;
  expect(body.length).toBeLessThan(320);
  expect(body).toMatch(/EMERGENCY/);
  expect(body).toContain('Dana Whitfield');
  expect(body).toContain('+12125550142');

  // Slack: { text, blocks }, readable and link-free.
  expect(slack.received).toHaveLength(1);
  const msg = JSON.parse(slack.received[0].body);
  expect(Object.keys(msg).sort()).toEqual(['blocks', 'text']);
  expect(msg.text).toContain('Emergency call');
  expect(msg.text).toContain('Dana Whitfield');
  expect(msg.text).toContain('No heat, furnace smells of gas');
  expect(msg.text).toContain('5/5');
  expect(msg.text).toContain('+12125550142');
  expect(msg.text).toContain('Acme Heating &amp; Air');
  expect(JSON.stringify(msg)).not.toMatch(/https?:\/\//);
  expect(msg.blocks[0]).toEqual({ type: 'header', text: expect.objectContaining({ type: 'plain_text', text: expect.stringContaining('Emergency call') }) });
  expect(msg.blocks[1].type).toBe('section');
  expect(msg.blocks[1].fields.map((f: { text: string }) => f.text)).toEqual(
    expect.arrayContaining(['*Caller*\nDana Whitfield', '*Call back*\n+12125550142']),
  );

  // E-mail: to owner and admin (not the plain member), from MAIL_FROM, text + HTML.
  expect(smtp.messages.map((m) => m.to[0]).sort()).toEqual(['admin@acme.test', 'owner@acme.test']);
  const mail = smtp.messages[0];
  expect(mail.from).toBe('alerts@switchboard.test');
  const raw = decodeQuotedPrintable(mail.raw);
  expect(mailSubject(mail.raw)).toBe('Emergency call — Acme Heating & Air');
  expect(raw).toContain('multipart/alternative');
  expect(raw).toContain('text/plain');
  expect(raw).toContain('text/html');
  expect(raw).toContain('Dana Whitfield');
  expect(raw).toContain('<h2>Emergency call');
  expect(raw).toContain('Acme Heating &amp; Air');

  // Automation is not routed for emergencies by default.
  expect(zap.received).toHaveLength(0);

  const after = await notificationsOf(t.owner, eventId);
  for (const n of after) {
    expect(n.status).toBe('sent');
    expect(n.attempts).toBe(1);
    expect(n.log).toHaveLength(1);
    expect(n.log[0].status).toBe('sent');
  }
  expect(after.find((n) => n.channel === 'sms')!.log[0].response_status).toBe(201);
  expect(after.find((n) => n.channel === 'email')!.log[0].response_status).toBe(250);

  // The API shows them, newest first, with the log on request.
  const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.slug}/notifications?include=log`, { token });
  expect(res.status).toBe(200);
  const mine = res.body.data.filter((n: { event_id: string }) => n.event_id === eventId);
  expect(mine).toHaveLength(4);
  expect(mine[0]).toEqual({
    id: expect.any(String), location_id: loc.id, event_id: eventId, event: 'call.emergency',
    channel: expect.any(String), provider: expect.any(String), recipient: expect.any(String), status: 'sent', attempts: 1,
    created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), updated_at: expect.any(String),
    log: [{ at: expect.any(String), status: 'sent', detail: expect.any(String), response_status: expect.any(Number) }],
  });
  const plain = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.slug}/notifications`, { token });
  expect(plain.body.data[0]).not.toHaveProperty('log');

  // A replayed job finds the notification settled and sends nothing more.
  await sendDue(t.owner, t.cfg, pki.caPem);
  expect(slack.received).toHaveLength(1);
});

test('a lead routed to automation posts the event body as flat JSON to the connected hook', async () => {
  const patch = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/notification-settings`, {
    token, body: { routes: { 'lead.created': ['automation'] } },
  });
  expect(patch.status).toBe(200);
  const { rows } = await t.owner.query(
    `insert into app.leads (location_id, name, phone, service_type, urgency_level, estimated_value)
     values ($1, 'Priya Nair', '+13125550177', 'AC tune-up', 2, 189) returning id`, [loc.id]);
  const leadId = rows[0].id;
  await sendDue(t.owner, t.cfg, pki.caPem);
  expect(zap.received).toHaveLength(1);
  const body = JSON.parse(zap.received[0].body);
  expect(Object.keys(body).sort()).toEqual(['created_at', 'data', 'event', 'location_id']);
  expect(body.event).toBe('lead.created');
  expect(body.location_id).toBe(loc.id);
  expect(body.data).toMatchObject({ id: leadId, name: 'Priya Nair', phone: '+13125550177', service_type: 'AC tune-up', status: 'new' });
  expect(zap.received[0].headers['content-type']).toBe('application/json');
});

test('webhook.test events never notify', async () => {
  const { rows } = await t.owner.query(`select app.emit($1, 'webhook.test', '{}') as id`, [loc.id]);
  expect(await notificationsOf(t.owner, rows[0].id)).toEqual([]);
});

test('notifications list pages newest first with a Link header', async () => {
  const first = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/notifications?limit=2`, { token });
  expect(first.status).toBe(200);
  expect(first.body.data).toHaveLength(2);
  const link = first.headers.get('link')!;
  expect(link).toMatch(/rel="next"/);
  const next = await request(t.baseUrl, 'GET', /<([^>]+)>/.exec(link)![1], { token });
  expect(next.body).toEqual({ data: expect.any(Array) });
  const all = [...first.body.data, ...next.body.data];
  expect(new Set(all.map((n: { id: string }) => n.id)).size).toBe(all.length);
  const times = all.map((n: { created_at: string }) => n.created_at);
  expect([...times].sort().reverse()).toEqual(times);
  const bad = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/notifications?include=everything`, { token });
  expect(bad.status).toBe(400);
  expect(bad.body.error.code).toBe('validation_error');
});
