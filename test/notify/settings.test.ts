import { notificationTypes } from '../../src/webhooks/events.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let loc: { id: string; slug: string };
let token: string;
const url = () => `/api/v1/locations/${loc.id}/notification-settings`;

beforeAll(async () => {
  t = await startTestApi();
  loc = await createLocation(t.owner, { name: 'Settings Sparks Electric' });
  ({ token } = await mintKey(t.owner, loc.id, ['settings:read', 'settings:write']));
});
afterAll(() => t.close());

test('a new location starts with the defaults (endpoint health: e-mail and chat)', async () => {
  const res = await request(t.baseUrl, 'GET', url(), { token });
  expect(res.status).toBe(200);
  // A type added after these (a resource's own event) notifies nobody until its migration says so.
  const later = Object.fromEntries(notificationTypes.map((type) => [type, []]));
  expect(res.body.data).toEqual({
    location_id: loc.id,
    routes: {
      ...later,
      'call.ended': [],
      'call.emergency': ['sms', 'email', 'chat'],
      'lead.created': ['email', 'chat'],
      'lead.updated': [],
      'booking.created': ['email', 'chat'],
      'booking.updated': ['email', 'chat'],
      'spam.blocked': [],
      'customer.erased': [],
      'webhook_endpoint.failing': ['email', 'chat'],
      'webhook_endpoint.disabled': ['email', 'chat'],
      'integration.expired': ['email', 'chat'],
    },
    sms_recipients: [],
    email_recipients: [],
    updated_at: expect.stringMatching(/Z$/),
  });
});

test('PATCH merges routes per event type and replaces recipient lists, normalising phones to E.164', async () => {
  const res = await request(t.baseUrl, 'PATCH', url(), {
    token,
    body: {
      routes: { 'spam.blocked': ['chat'], 'lead.created': ['email', 'automation'], 'webhook_endpoint.failing': ['sms'] },
      sms_recipients: ['(212) 555-0199', '+442071838750'],
      email_recipients: ['dispatch@sparks.test'],
    },
  });
  expect(res.status).toBe(200);
  expect(res.body.data.routes).toMatchObject({
    'spam.blocked': ['chat'], 'lead.created': ['email', 'automation'], 'call.emergency': ['sms', 'email', 'chat'],
    'webhook_endpoint.failing': ['sms'], 'webhook_endpoint.disabled': ['email', 'chat'],
  });
  expect(res.body.data.sms_recipients).toEqual(['+12125550199', '+442071838750']);
  expect(res.body.data.email_recipients).toEqual(['dispatch@sparks.test']);
  const again = await request(t.baseUrl, 'GET', url(), { token });
  expect(again.body.data).toEqual(res.body.data);
});

test('extra recipients receive routed notifications beside the defaults', async () => {
  const { rows } = await t.owner.query(`select app.emit($1, 'spam.blocked', '{"caller_phone":"***-***-0000","reason":"blocklist"}') as id`, [loc.id]);
  const { rows: ns } = await t.owner.query(`select channel, status from app.notifications where event_id = $1`, [rows[0].id]);
  expect(ns).toEqual([{ channel: 'chat', status: 'skipped' }]);
  await t.owner.query(`update app.locations set owner_cell = '+12125550100' where id = $1`, [loc.id]);
  await t.owner.query(`insert into app.members (location_id, email, role) values ($1, 'Dispatch@Sparks.test', 'admin')`, [loc.id]);
  const { rows: ev } = await t.owner.query(`select app.emit($1, 'call.emergency', '{"caller_name":"X"}') as id`, [loc.id]);
  const { rows: sent } = await t.owner.query(
    `select channel, recipient from app.notifications where event_id = $1 and channel in ('sms', 'email') order by channel, recipient`, [ev[0].id]);
  expect(sent).toEqual([
    { channel: 'email', recipient: 'Dispatch@Sparks.test' }, // member and extra address are one person: one e-mail
    { channel: 'sms', recipient: '+12125550100' },
    { channel: 'sms', recipient: '+12125550199' },
    { channel: 'sms', recipient: '+442071838750' },
  ]);
});

test.each<[unknown, string]>([
  [{}, 'empty body'],
  [{ routes: { 'call.emergency': ['pager'] } }, 'unknown channel'],
  [{ routes: { 'call.exploded': ['sms'] } }, 'unknown event type'],
  [{ routes: { 'webhook_endpoint.exploded': ['sms'] } }, 'unknown operational type'],
  [{ routes: { 'call.emergency': ['sms', 'sms'] } }, 'repeated channel'],
  [{ routes: { 'call.emergency': 'sms' } }, 'channels not a list'],
  [{ sms_recipients: ['not a phone'] }, 'bad phone'],
  [{ sms_recipients: ['+12125550199', '(212) 555-0199'] }, 'repeated phone'],
  [{ email_recipients: ['nobody'] }, 'bad e-mail'],
  [{ email_recipients: Array.from({ length: 21 }, (_, i) => `p${i}@x.test`) }, 'too many'],
  [{ sms_recipients: [], extra: true }, 'unknown field'],
])('PATCH %j → 400 validation_error (%s), nothing changed', async (body, _why) => {
  const before = await request(t.baseUrl, 'GET', url(), { token });
  const res = await request(t.baseUrl, 'PATCH', url(), { token, body });
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
  expect(res.body.error.details.issues.length).toBeGreaterThan(0);
  const after = await request(t.baseUrl, 'GET', url(), { token });
  expect(after.body.data).toEqual(before.body.data);
});

test('scopes: settings:read cannot PATCH, and notifications:read is needed for the log', async () => {
  const { token: readOnly } = await mintKey(t.owner, loc.id, ['settings:read']);
  const patch = await request(t.baseUrl, 'PATCH', url(), { token: readOnly, body: { sms_recipients: [] } });
  expect(patch.status).toBe(403);
  expect(patch.body.error.details).toEqual({ required_scope: 'settings:write' });
  const list = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/notifications`, { token: readOnly });
  expect(list.status).toBe(403);
  expect(list.body.error.details).toEqual({ required_scope: 'notifications:read' });
  const put = await request(t.baseUrl, 'PUT', url(), { token, body: {} });
  expect(put.status).toBe(405);
});

test('the database refuses invalid routes even from SQL writers', async () => {
  await expect(t.owner.query(`update app.notification_settings set routes = '{"call.emergency": ["fax"]}' where location_id = $1`, [loc.id]))
    .rejects.toThrow(/notification_settings_routes_valid/);
  await expect(t.owner.query(`update app.notification_settings set sms_recipients = '{5550100}' where location_id = $1`, [loc.id]))
    .rejects.toThrow(/sms_recipients_valid/);
});

test('events written by an API-role transaction (under RLS) still fan out and enqueue', async () => {
  const c = await t.apiPool.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [loc.id]);
    await c.query(`insert into app.leads (location_id, name, phone, service_type) values ($1, 'Rae', '+13125550101', 'panel upgrade')`, [loc.id]);
    await c.query('commit');
  } finally {
    c.release();
  }
  const { rows } = await t.owner.query(
    `select n.channel, n.status, n.next_attempt_at <= now() as due
       from app.notifications n where n.location_id = $1 and n.event = 'lead.created' order by n.channel, n.recipient`, [loc.id]);
  expect(rows).toEqual([
    { channel: 'automation', status: 'skipped', due: null },
    { channel: 'email', status: 'pending', due: true },
  ]);
});
