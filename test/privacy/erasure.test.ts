/**
 * Erasure (docs/privacy.md "Erasure"): POST erasures clears one caller's personal data everywhere
 * in the location (customers, calls, leads, bookings, event data and bodies, webhook attempt and
 * notification log echoes), keeps every row so counts and insights are identical, records the
 * erasure without the identifier, emits customer.erased with ids only, is idempotent, and reaches
 * only the token's location. Calls come through the real voice route.
 */
import { createHash } from 'node:crypto';
import { eventCatalog } from '../../src/webhooks/events.js';
import { VOICE_SECRET, voiceLocation } from '../platform/support.js';
import { mintKey, request, useTenant, useTestApi } from '../support/harness.js';
import { bookedCall, countsOf, hits, needlesOf, type Caller } from './support.js';

const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
const A = useTenant(t, {}, voiceLocation);
const B = useTenant(t, {}, voiceLocation);

const dana: Caller = { phone: '+15125550143', name: 'Dana Whitfield', address: '418 Maple Ridge Drive, Austin, TX 78745', email: 'dana.whitfield@example.com' };
const omar: Caller = { phone: '+15125550187', name: 'Omar Haddad', address: '77 Cedar Loop, Austin, TX 78704', email: 'omar.h@example.com' };
const danaCalls: string[] = [];

beforeAll(async () => {
  // A webhook endpoint for every event type, so events get delivery attempts (no worker runs: they stay pending).
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/webhook-endpoints`, {
    token: A.token, body: { url: 'https://127.0.0.1:9/hook', events: eventCatalog.map((e) => e.type) },
  });
  expect(ep.status).toBe(201);
  danaCalls.push(await bookedCall(t.baseUrl, A, dana), await bookedCall(t.baseUrl, A, dana));
  await bookedCall(t.baseUrl, A, omar);
  await bookedCall(t.baseUrl, B, dana);
  // A lead entered through the API for Dana's e-mail only (no call, no customer).
  expect((await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/leads`, {
    token: A.token, body: { name: 'D. Whitfield', phone: '+15125550999', email: 'Dana.Whitfield@example.com', notes: 'Asked for a quote' },
  })).status).toBe(201);
  // Receivers and providers echo what they were sent: a webhook answer and an SMS API reply quoting the caller.
  for (const c of [dana, omar]) {
    await t.owner.query(
      `update app.webhook_deliveries d set response_body = $3 from app.events e
        where d.location_id = $1 and e.location_id = $1 and e.id = d.event_id and strpos(e.body, $2) > 0`,
      [A.id, c.phone, `{"received":"${c.name}"}`]);
    await t.owner.query(
      `insert into app.notification_log (location_id, notification_id, status, detail)
       select n.location_id, n.id, 'sent', $3 from app.notifications n join app.events e on e.location_id = n.location_id and e.id = n.event_id
        where n.location_id = $1 and strpos(e.body, $2) > 0`,
      [A.id, c.phone, `twilio: HTTP 201 {"body":"New lead: ${c.name}"}`]);
  }
}, 60_000);

const erase = (loc: string, token: string, body: unknown) => request(t.baseUrl, 'POST', `/api/v1/locations/${loc}/erasures`, { token, body });

test('erases one caller everywhere in the location; counts and insights are identical; the rest stays', async () => {
  expect(Object.keys(await hits(t.owner, A.id, needlesOf(dana))).sort()).toEqual(
    ['app.bookings', 'app.calls', 'app.customers', 'app.events', 'app.leads', 'app.notification_log', 'app.webhook_deliveries']);
  const before = await countsOf(t.baseUrl, A.id, A.token);
  expect(before).toMatchObject({ calls: 3, leads: 4, bookings: 3, insights: { calls_answered: 3, leads_captured: 3, revenue_recovered: 567 } });
  const omarBefore = await hits(t.owner, A.id, needlesOf(omar));

  // A national format and an e-mail in another case: both normalised.
  const res = await erase(A.id, A.token, { phone: '(512) 555-0143', email: 'DANA.WHITFIELD@example.com' });
  expect(res.status).toBe(202);
  const e = res.body.data;
  expect(e).toMatchObject({
    location_id: A.id, status: 'completed', identifier_kinds: ['phone', 'email'], source: 'api',
    // 2 calls, their 2 leads + the API lead, 2 bookings; events: 2 × (call.ended, lead.created, booking.created) + the API lead's.
    matched: { customers: 1, calls: 2, leads: 3, bookings: 2, events: 7 },
    platform_deletions: { pending: 0, deleted: 0, failed: 0 }, platform_calls: [],
  });
  expect(e.matched.webhook_attempts).toBe(7);
  expect(e.matched.notifications).toBeGreaterThan(0);
  expect(e.completed_at).not.toBeNull();

  // Nothing of Dana is left in A, anywhere; Omar and Dana-in-B are untouched.
  expect(await hits(t.owner, A.id, needlesOf(dana))).toEqual({});
  expect(await hits(t.owner, A.id, needlesOf(omar))).toEqual(omarBefore);
  expect(Object.keys(await hits(t.owner, B.id, needlesOf(dana))).length).toBeGreaterThan(0);
  expect(await countsOf(t.baseUrl, A.id, A.token)).toEqual(before);

  // The calls say so; the event bodies a retry would send are the cleared ones and still valid.
  for (const callId of danaCalls) {
    const { rows: [c] } = await t.owner.query('select id from app.calls where location_id = $1 and platform_call_id = $2', [A.id, callId]);
    const detail = (await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/calls/${c.id}`, { token: A.token })).body.data;
    expect(detail).toMatchObject({ caller_phone: null, caller_name: null, caller_address: null, transcript: null, transcript_turns: null, recording_url: null, outcome: 'booked', estimated_value: 189 });
    expect(detail.content_purged_at).toMatch(/Z$/);
    expect(detail.anonymised_at).toMatch(/Z$/);
  }
  const { rows: bodies } = await t.owner.query(`select type, body::jsonb as b, data, redacted_at from app.events where location_id = $1 and redacted_at is not null`, [A.id]);
  expect(bodies).toHaveLength(7);
  for (const r of bodies) expect(r.b.data).toEqual(r.data);

  // customer.erased: ids only, validated by the catalog, queued for the endpoint.
  const { rows: [ev] } = await t.owner.query(`select id, type, body, data from app.events where id = $1`, [e.event_id]);
  expect(ev.type).toBe('customer.erased');
  expect(Object.keys(ev.data).sort()).toEqual(['booking_ids', 'call_ids', 'customer_ids', 'erasure_id', 'lead_ids']);
  expect(ev.data.erasure_id).toBe(e.id);
  expect(ev.data.call_ids).toHaveLength(2);
  expect(ev.data.lead_ids).toHaveLength(3);
  const schema = eventCatalog.find((c) => c.type === 'customer.erased')!.schema;
  expect(schema.safeParse(JSON.parse(ev.body)).success).toBe(true);
  expect(needlesOf(dana).some((s) => ev.body.includes(s))).toBe(false);
  const { rows: attempts } = await t.owner.query(`select status from app.webhook_deliveries where event_id = $1`, [e.event_id]);
  expect(attempts).toEqual([{ status: 'pending' }]);

  // The record holds hashes, never the identifiers.
  const { rows: [stored] } = await t.owner.query(`select to_jsonb(x) as j, identifier_hashes from app.erasures x where id = $1`, [e.id]);
  expect(stored.identifier_hashes).toEqual({
    phone: createHash('sha256').update(`${A.id}:phone:${dana.phone}`).digest('hex'),
    email: createHash('sha256').update(`${A.id}:email:${dana.email}`).digest('hex'),
  });

  // GET one and the list show it.
  const got = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures/${e.id}`, { token: A.token });
  expect(got.status).toBe(200);
  expect(got.body.data).toEqual(e);
  const list = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.slug}/erasures`, { token: A.token });
  expect(list.body.data[0]).toEqual((({ platform_calls: _p, ...rest }) => rest)(e));
});

test('idempotent: the same identifier again is a new record that matches nothing and emits nothing', async () => {
  const events = async () => (await t.owner.query('select count(*)::int as n from app.events where location_id = $1', [A.id])).rows[0].n;
  const n = await events();
  const again = await erase(A.id, A.token, { phone: dana.phone });
  expect(again.status).toBe(202);
  expect(again.body.data).toMatchObject({
    status: 'completed', event_id: null,
    matched: { customers: 0, calls: 0, leads: 0, bookings: 0, notifications: 0, webhook_attempts: 0, events: 0 },
  });
  expect(await events()).toBe(n);
});

test('by customer id: erases that customer and what points at it', async () => {
  const { rows: [c] } = await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [A.id, omar.phone]);
  const res = await erase(A.slug, A.token, { customer_id: c.id });
  expect(res.status).toBe(202);
  expect(res.body.data.matched).toMatchObject({ customers: 1, calls: 1, leads: 1, bookings: 1 });
  expect(await hits(t.owner, A.id, needlesOf(omar))).toEqual({});
  // Erased once, its id matches nothing any more (202, zero counts), rather than 404.
  const again = await erase(A.slug, A.token, { customer_id: c.id });
  expect(again.status).toBe(202);
  expect(again.body.data.matched.customers).toBe(0);
});

test('the list pages like every list: newest first, limit and a Link to the next page', async () => {
  const all = (await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures?limit=200`, { token: A.token })).body.data;
  expect(all.length).toBeGreaterThanOrEqual(3);
  const first = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures?limit=2`, { token: A.token });
  expect(first.body.data.map((e: { id: string }) => e.id)).toEqual(all.slice(0, 2).map((e: { id: string }) => e.id));
  const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')![1];
  const second = await request(t.baseUrl, 'GET', next, { token: A.token });
  expect(second.body.data[0].id).toBe(all[2].id);
});

describe('tenancy: only the token’s own location', () => {
  test('B’s token cannot read, list or create erasures in A; A’s erasure left B alone', async () => {
    const { rows: [mine] } = await t.owner.query('select id from app.erasures where location_id = $1 limit 1', [A.id]);
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures/${mine.id}`, { token: B.token })).status).toBe(404);
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${B.id}/erasures/${mine.id}`, { token: B.token })).status).toBe(404);
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures`, { token: B.token })).status).toBe(404);
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${B.id}/erasures`, { token: B.token })).body.data).toEqual([]);
    const cross = await erase(A.id, B.token, { phone: dana.phone });
    expect(cross.status).toBe(404);
    // B's Dana is still whole, and B's own erasure finds her there.
    const hitsB = await hits(t.owner, B.id, needlesOf(dana));
    expect(hitsB['app.calls']).toBe(1);
    const own = await erase(B.id, B.token, { phone: dana.phone });
    expect(own.status).toBe(202);
    expect(own.body.data.matched).toMatchObject({ customers: 1, calls: 1, leads: 1, bookings: 1 });
    expect(await hits(t.owner, B.id, needlesOf(dana))).toEqual({});
  });

  test('a customer id of another location is not found (404), and nothing changes', async () => {
    const carol: Caller = { phone: '+15125550122', name: 'Carol Byrne', address: '9 Elm Ct', email: 'carol@example.com' };
    await bookedCall(t.baseUrl, B, carol);
    const { rows: [c] } = await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [B.id, carol.phone]);
    const res = await erase(A.id, A.token, { customer_id: c.id });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    expect(Object.keys(await hits(t.owner, B.id, needlesOf(carol))).length).toBeGreaterThan(0);
  });
});

describe('scopes', () => {
  test('privacy:write creates, privacy:read reads; neither grants the other', async () => {
    const reader = (await mintKey(t.owner, A.id, ['privacy:read'])).token;
    const writer = (await mintKey(t.owner, A.id, ['privacy:write'])).token;
    const denied = await erase(A.id, reader, { phone: '+15125550100' });
    expect(denied.status).toBe(403);
    expect(denied.body.error.details).toEqual({ required_scope: 'privacy:write' });
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures`, { token: reader })).status).toBe(200);
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures`, { token: writer })).status).toBe(403);
    expect((await erase(A.id, writer, { phone: '+15125550100' })).status).toBe(202);
  });
});

describe('late webhooks', () => {
  test('a replayed or late post-call delivery for an erased call brings none of its data back', async () => {
    const late: Caller = { phone: '+15125550121', name: 'Lena Ortiz', address: '9 Quarry Bend, Austin, TX 78745', email: 'lena.o@example.com' };
    const callId = await bookedCall(t.baseUrl, A, late);
    const before = await countsOf(t.baseUrl, A.id, A.token);
    expect((await erase(A.id, A.token, { phone: late.phone })).status).toBe(202);
    expect(await hits(t.owner, A.id, needlesOf(late))).toEqual({});
    // The platform retries the same call's webhook (same call_id, the full analysis again).
    await bookedCall(t.baseUrl, A, late, { callId });
    expect(await hits(t.owner, A.id, needlesOf(late))).toEqual({});
    expect(await countsOf(t.baseUrl, A.id, A.token)).toEqual(before);
  });
});
