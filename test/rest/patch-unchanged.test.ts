/**
 * A PATCH that repeats the stored values changes nothing (docs/rest-api.md, "A PATCH that changes
 * nothing"): the record answered is the record stored, `updated_at` included, and no event or
 * webhook attempt is written. A PATCH that changes a value moves `updated_at` as before.
 */
import { createLocation, mintKey, request, useTenant, useTestApi } from '../support/harness.js';
import { insertBooking } from './fixtures.js';

const t = useTestApi();
const A = useTenant(t, { name: 'Acme Heating', owner_cell: '+15125550190', service_phone: '+15125550100' });
const V = '/api/v1';
const L = () => `${V}/locations/${A.id}`;

const req = (method: string, path: string, body?: unknown) => request(t.baseUrl, method, path, { token: A.token, body });
const pick = (record: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.map((k) => [k, record[k]]));
/** A clock tick between two writes, so a moved updated_at differs at millisecond precision. */
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));
const written = async () => (await t.owner.query(
  `select (select count(*)::int from app.events where location_id = $1) as events,
          (select count(*)::int from app.webhook_deliveries where location_id = $1) as attempts`, [A.id])).rows[0];

interface Case { what: string; path: () => string; fields: string[]; change: Record<string, unknown>; same?: (body: Record<string, unknown>) => Record<string, unknown> }

const ids: Record<string, string> = {};
beforeAll(async () => {
  // A subscriber to every *.updated type: a PATCH that fired one would also write an attempt.
  const ep = await req('POST', `${L()}/webhook-endpoints`, { url: 'https://127.0.0.1:9/hook', events: ['lead.updated', 'booking.updated', 'lead.created'], label: 'CRM' });
  expect(ep.status).toBe(201);
  ids.endpoint = ep.body.data.id;
  const lead = await req('POST', `${L()}/leads`, { name: 'Dana Roe', phone: '+15125550143', notes: 'gate code 12', urgency_level: 2, estimated_value: 150.5 });
  ids.lead = lead.body.data.id;
  ids.booking = await insertBooking(t.owner, A.id, { status: 'confirmed' });
  ids.faq = (await req('POST', `${L()}/faqs`, { question: 'Weekends?', answer: 'Yes', position: 2 })).body.data.id;
  ids.item = (await req('POST', `${L()}/pricebook`, { service_name: 'Tune-up', price: '$89', note: 'per unit', position: 1 })).body.data.id;
  expect(await req('PATCH', `${L()}/agent`, { greeting: 'Hi', emergency_keywords: ['gas', 'smoke'], blocked_numbers: ['+15125550111'] })).toMatchObject({ status: 200 });
  expect(await req('PATCH', `${L()}/scheduling`, { capacity: 2, closed_dates: ['2026-12-25', '2026-12-24'] })).toMatchObject({ status: 200 });
  expect(await req('PATCH', `${L()}/data-retention`, { content_retention_days: 90 })).toMatchObject({ status: 200 });
});

const cases: Case[] = [
  { what: 'location', path: L, fields: ['name', 'slug', 'legal_name', 'license_number', 'industry', 'website_url', 'timezone', 'owner_cell', 'service_areas', 'zip_codes', 'travel_radius_miles'], change: { legal_name: 'Acme Heating LLC' } },
  { what: 'lead', path: () => `${L()}/leads/${ids.lead}`, fields: ['name', 'phone', 'email', 'address', 'service_type', 'urgency_level', 'estimated_value', 'status', 'assigned_to', 'notes'], change: { notes: 'gate code 34' } },
  { what: 'booking', path: () => `${L()}/bookings/${ids.booking}`, fields: ['status', 'scheduled_date', 'scheduled_time', 'service_type', 'address', 'notes'], change: { notes: 'back door' } },
  { what: 'FAQ', path: () => `${L()}/faqs/${ids.faq}`, fields: ['question', 'answer', 'position'], change: { position: 3 } },
  { what: 'pricebook item', path: () => `${L()}/pricebook/${ids.item}`, fields: ['service_name', 'price', 'note', 'position'], change: { price: '$99' } },
  { what: 'call forwarding', path: () => `${L()}/call-forwarding`, fields: ['mode', 'existing_business_line'], change: { existing_business_line: '+15125550122' } },
  { what: 'agent', path: () => `${L()}/agent`, fields: ['greeting', 'transfer_number', 'emergency_keywords', 'booking_enabled', 'blocked_numbers'], change: { greeting: 'Hello' } },
  { what: 'notification settings', path: () => `${L()}/notification-settings`, fields: ['routes', 'sms_recipients', 'email_recipients'], change: { sms_recipients: ['+15125550133'] } },
  { what: 'scheduling', path: () => `${L()}/scheduling`, fields: ['window_minutes', 'capacity', 'lead_time_minutes', 'horizon_days', 'closed_dates'], change: { capacity: 3 } },
  { what: 'data retention', path: () => `${L()}/data-retention`, fields: ['redact_sensitive_data', 'content_retention_days', 'personal_data_retention_days'], change: { content_retention_days: 60 } },
  // Subscriptions are a set: the same event types in another order are the same subscription.
  { what: 'webhook endpoint', path: () => `${V}/webhook-endpoints/${ids.endpoint}`, fields: ['label', 'url', 'events', 'active'], change: { label: 'CRM 2' },
    same: (b) => ({ ...b, events: [...(b.events as string[])].reverse() }) },
];

describe.each(cases.map((c) => [c.what, c] as const))('PATCH %s', (_what, c) => {
  test('with the stored values: the record as it was, updated_at included, and no event or attempt', async () => {
    const before = await req('GET', c.path());
    expect(before.status).toBe(200);
    const n = await written();
    await tick();
    const body = pick(before.body.data, c.fields);
    const again = await req('PATCH', c.path(), c.same ? c.same(body) : body);
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(before.body.data);
    expect((await req('GET', c.path())).body.data).toEqual(before.body.data);
    expect(await written()).toEqual(n);
  });

  test('with a value changed: updated_at moves', async () => {
    const before = await req('GET', c.path());
    await tick();
    const changed = await req('PATCH', c.path(), c.change);
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject(c.change);
    expect(Date.parse(changed.body.data.updated_at)).toBeGreaterThan(Date.parse(before.body.data.updated_at));
  });
});

test('the scheduling defaults repeated on a location that never changed them: updated_at stays null', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const path = `${V}/locations/${loc.id}/scheduling`;
  const before = await request(t.baseUrl, 'GET', path, { token });
  expect(before.body.data.updated_at).toBeNull();
  const again = await request(t.baseUrl, 'PATCH', path, { token, body: pick(before.body.data, ['window_minutes', 'capacity', 'lead_time_minutes', 'horizon_days', 'closed_dates']) });
  expect([again.status, again.body.data]).toEqual([200, before.body.data]);
});

test('a lead status or booking status PATCHed to the one it has fires nothing (status_changed_at stays)', async () => {
  const lead = await req('GET', `${L()}/leads/${ids.lead}`);
  const booking = await req('GET', `${L()}/bookings/${ids.booking}`);
  const n = await written();
  await tick();
  expect((await req('PATCH', `${L()}/leads/${ids.lead}`, { status: lead.body.data.status })).body.data).toEqual(lead.body.data);
  expect((await req('PATCH', `${L()}/bookings/${ids.booking}`, { status: booking.body.data.status })).body.data).toEqual(booking.body.data);
  expect(await written()).toEqual(n);
});

