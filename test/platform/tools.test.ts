/**
 * The agent's tools during a call (POST /api/voice/tools/{name}, docs/voice-integration.md):
 * signatures, routing by the dialled number, each tool's answers in the location's time zone,
 * argument errors the agent can say, retries that book once, 50 callers racing for one window,
 * one booking per appointment once the post-call arrives, erasure, transfers and pre-call variables.
 */
import { randomUUID } from 'node:crypto';
import { callFn } from '../../src/db/pools.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { instant, localDate, openEveryDay, setScheduling, spokenDay } from '../support/scheduling.js';
import {
  events, newCallId as newCallIdOf, postTool, postVoice, schedulingLocation as schedulingLocationOf, staleVoiceSignature, TOOL_CALLER as CALLER,
  toolCall, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation,
} from './support.js';

let t: TestApi;
const TZ = 'America/Chicago';

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
});
afterAll(() => t.close());

const newCallId = newCallIdOf;
const callOf = toolCall;
const typesOf = async (loc: VoiceLocation) => (await events(t.owner, loc.id)).map((e) => e.type);
const schedulingLocation = (attrs: Record<string, unknown> = {}) => schedulingLocationOf(t.owner, attrs);

describe('the route', () => {
  test('bad signature → 401, unknown tool → 404 not_found, unknown number → 404, malformed envelope → 400', async () => {
    const loc = await schedulingLocation();
    const raw = JSON.stringify({ name: 'check_availability', call: callOf(loc), args: {} });
    for (const signature of [null, 'garbage', await staleVoiceSignature(raw, 6 * 60_000)]) {
      const res = await postTool(t.baseUrl, 'check_availability', callOf(loc), {}, { raw, signature });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('invalid_signature');
    }
    const unknown = await postTool(t.baseUrl, 'book_cal', callOf(loc), {});
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    expect((await postTool(t.baseUrl, 'check_availability', { ...callOf(loc), to_number: '+15125550000' }, {})).status).toBe(404);
    expect((await postTool(t.baseUrl, 'check_availability', callOf(loc), {}, { raw: '{"args":{}}' })).status).toBe(400);
    expect((await request(t.baseUrl, 'GET', '/api/voice/tools/check_availability')).status).toBe(405);
  });

  test('invalid arguments → 200 { ok: false, message } naming the field; nothing booked', async () => {
    const loc = await schedulingLocation();
    const days = await postTool(t.baseUrl, 'check_availability', callOf(loc), { days: 30 });
    expect(days.status).toBe(200);
    expect(days.body).toMatchObject({ ok: false, field: 'days', message: expect.stringContaining('days') });
    const book = await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: 'tomorrow at 10', name: 'Dana' });
    expect(book.body).toMatchObject({ ok: false, field: 'window_start', message: expect.stringContaining('window_start') });
    // Year 0000 is valid ISO 8601 but no date PostgreSQL (or anyone) has: the agent hears why.
    const yearZero = await postTool(t.baseUrl, 'check_availability', callOf(loc), { date: '0000-01-01' });
    expect([yearZero.status, yearZero.body]).toEqual([200, expect.objectContaining({ ok: false, field: 'date' })]);
    const bookZero = await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: '0000-01-01T14:00:00Z', name: 'Dana' });
    expect([bookZero.status, bookZero.body]).toEqual([200, expect.objectContaining({ ok: false, field: 'window_start' })]);
    // So is an offset past ±15:59 (ISO 8601 allows ±23:59, PostgreSQL does not).
    const farOffset = await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: '2026-11-30T06:00:00+23:00', name: 'Dana' });
    expect([farOffset.status, farOffset.body]).toEqual([200, expect.objectContaining({ ok: false, field: 'window_start' })]);
    const noName = await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: new Date().toISOString() });
    expect(noName.body).toMatchObject({ ok: false, field: 'name' });
    const withheld = await postTool(t.baseUrl, 'book_appointment', callOf(loc, newCallId(), null),
      { window_start: await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), '08:00'), name: 'Dana' });
    expect(withheld.body).toMatchObject({ ok: false, field: 'phone' });
    const { rows } = await t.owner.query('select count(*)::int as n from app.bookings where location_id = $1', [loc.id]);
    expect(rows[0].n).toBe(0);
  });

  test('GET /api/voice/tools: the six definitions with JSON-schema parameters from the handlers\' schemas', async () => {
    const res = await request(t.baseUrl, 'GET', '/api/voice/tools');
    expect(res.status).toBe(200);
    const defs = res.body.data;
    expect(defs.map((d: { name: string }) => d.name)).toEqual([
      'check_availability', 'book_appointment', 'find_appointments', 'reschedule_appointment', 'cancel_appointment', 'transfer_target',
    ]);
    const book = defs.find((d: { name: string }) => d.name === 'book_appointment');
    expect(book).toMatchObject({ type: 'custom', method: 'POST', url: `${t.baseUrl}/api/voice/tools/book_appointment` });
    expect(book.parameters).toMatchObject({ type: 'object', required: ['window_start', 'name'] });
    expect(Object.keys(book.parameters.properties)).toEqual(['window_start', 'name', 'address', 'service_type', 'notes', 'phone']);
    const check = defs.find((d: { name: string }) => d.name === 'check_availability');
    expect(check.parameters.properties.days).toMatchObject({ type: 'integer', minimum: 1, maximum: 14 });
    expect(defs.find((d: { name: string }) => d.name === 'transfer_target').parameters.properties.reason.enum).toEqual(['emergency', 'other']);
  });
});

describe('scheduling tools', () => {
  test('check_availability: up to 6 open windows with spoken labels in the location time zone', async () => {
    const loc = await schedulingLocation();
    const day = await localDate(t.owner, TZ, 2);
    const res = await postTool(t.baseUrl, 'check_availability', callOf(loc), { date: day, days: 2 });
    expect(res.status).toBe(200);
    expect(res.body.ok).toBe(true);
    expect(res.body.windows).toHaveLength(6);
    expect(res.body.windows[0]).toEqual({
      start: await instant(t.owner, TZ, day, '08:00'), end: await instant(t.owner, TZ, day, '10:00'),
      label: `${spokenDay(day)}, between 8 and 10 AM`,
    });
    expect(res.body.windows[2].label).toBe(`${spokenDay(day)}, between 12 and 2 PM`);
    expect(res.body.windows[1].label).toBe(`${spokenDay(day)}, between 10 AM and 12 PM`);
    expect(res.body.message).toContain(`${spokenDay(day)}, between 8 and 10 AM`);
    await t.owner.query('delete from app.business_hours where location_id = $1', [loc.id]);
    const none = await postTool(t.baseUrl, 'check_availability', callOf(loc), {});
    expect(none.body).toEqual({ ok: true, windows: [], message: expect.any(String) });
  });

  test('book_appointment: books with source agent_tool, booking.created at once; a retry of the same call and window books once', async () => {
    const loc = await schedulingLocation();
    const day = await localDate(t.owner, TZ, 2);
    const ws = await instant(t.owner, TZ, day, '10:00');
    const call = callOf(loc);
    const args = { window_start: ws, name: 'Dana Whitfield', address: '418 Maple Ridge Drive', service_type: 'AC repair' };
    const [a, b, c] = await Promise.all([0, 1, 2].map(() => postTool(t.baseUrl, 'book_appointment', call, args)));
    for (const r of [a, b, c]) {
      expect(r.status).toBe(200);
      expect(r.body.ok).toBe(true);
      expect(r.body.booking.id).toBe(a.body.booking.id);
    }
    expect(a.body.booking).toMatchObject({
      source: 'agent_tool', status: 'scheduled', window_start: ws, scheduled_date: day, scheduled_time: '10:00',
      address: '418 Maple Ridge Drive', label: `${spokenDay(day)}, between 10 AM and 12 PM`,
    });
    expect(a.body.message).toBe(`Booked for ${spokenDay(day)}, between 10 AM and 12 PM.`);
    const created = (await events(t.owner, loc.id)).filter((e) => e.type === 'booking.created');
    expect(created).toHaveLength(1);
    const { label: _l, ...apiShape } = a.body.booking;
    expect(created[0].data).toEqual(apiShape);
    // The caller is now a customer of the location, with the name given.
    const { rows } = await t.owner.query('select name, phone, call_count from app.customers where id = $1', [a.body.booking.customer_id]);
    expect(rows[0]).toEqual({ name: 'Dana Whitfield', phone: CALLER, call_count: 0 });
  });

  test('50 concurrent calls on one window of capacity 2: exactly 2 bookings, 48 answers with alternatives', async () => {
    const loc = await schedulingLocation();
    await setScheduling(t.owner, loc.id, { capacity: 2 });
    const day = await localDate(t.owner, TZ, 2);
    const ws = await instant(t.owner, TZ, day, '14:00');
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) =>
      postTool(t.baseUrl, 'book_appointment', callOf(loc, newCallId(), `+1512555${String(200 + i).padStart(4, '0')}`), { window_start: ws, name: `Caller ${i}` })));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    const booked = answers.filter((r) => r.body.ok === true);
    const refused = answers.filter((r) => r.body.ok === false);
    expect(booked).toHaveLength(2);
    expect(refused).toHaveLength(48);
    for (const r of refused) {
      expect(r.body.reason).toBe('full');
      expect(r.body.alternatives.map((w: { label: string }) => w.label)).toEqual([
        `${spokenDay(day)}, between 4 and 6 PM`, expect.stringContaining('between 8 and 10 AM'), expect.stringContaining('between 10 AM and 12 PM'),
      ]);
      expect(r.body.message).toMatch(/^That window has just been taken\. The next open windows are /);
    }
    const { rows } = await t.owner.query(`select count(*)::int as n from app.bookings where location_id = $1 and window_start = $2`, [loc.id, ws]);
    expect(rows[0].n).toBe(2);
  });

  test('find, reschedule and cancel only the caller\'s own bookings; both fire booking.updated', async () => {
    const loc = await schedulingLocation();
    const day = await localDate(t.owner, TZ, 3);
    const [w8, w12, w16] = await Promise.all(['08:00', '12:00', '16:00'].map((h) => instant(t.owner, TZ, day, h)));
    const mine = (await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: w8, name: 'Dana' })).body.booking;
    const other = (await postTool(t.baseUrl, 'book_appointment', callOf(loc, newCallId(), '+15125550188'), { window_start: w16, name: 'Sam' })).body.booking;

    const found = await postTool(t.baseUrl, 'find_appointments', callOf(loc), {});
    expect(found.body.ok).toBe(true);
    expect(found.body.appointments.map((b: { id: string }) => b.id)).toEqual([mine.id]);
    expect(found.body.message).toBe(`Upcoming: ${spokenDay(day)}, between 8 and 10 AM.`);
    for (const from of [null, '+15125550999']) {
      const res = await postTool(t.baseUrl, 'find_appointments', callOf(loc, newCallId(), from), {});
      expect(res.body).toEqual({ ok: true, appointments: [], message: expect.any(String) });
    }

    // Another caller's booking, an unknown id: ok false, nothing said about it, nothing changed.
    for (const id of [other.id, randomUUID()]) {
      for (const [tool, args] of [['reschedule_appointment', { booking_id: id, window_start: w12 }], ['cancel_appointment', { booking_id: id }]] as const) {
        const res = await postTool(t.baseUrl, tool, callOf(loc), args);
        expect(res.body).toEqual({ ok: false, message: 'I could not find that appointment for this phone number.' });
      }
    }
    const fullMove = await postTool(t.baseUrl, 'reschedule_appointment', callOf(loc), { booking_id: mine.id, window_start: w16 });
    expect(fullMove.body).toMatchObject({ ok: false, reason: 'full' });
    const moved = await postTool(t.baseUrl, 'reschedule_appointment', callOf(loc), { booking_id: mine.id, window_start: w12 });
    expect(moved.body).toMatchObject({ ok: true, booking: { id: mine.id, window_start: w12 }, message: `Moved to ${spokenDay(day)}, between 12 and 2 PM.` });
    const cancelled = await postTool(t.baseUrl, 'cancel_appointment', callOf(loc), { booking_id: mine.id, reason: 'fixed it myself' });
    expect(cancelled.body).toMatchObject({ ok: true, booking: { id: mine.id, status: 'cancelled' } });
    expect(cancelled.body.booking.notes).toContain('fixed it myself');
    const updated = (await events(t.owner, loc.id)).filter((e) => e.type === 'booking.updated');
    expect(updated.map((e) => [e.data.id, e.data.status, e.data.previous.window_start])).toEqual([
      [mine.id, 'scheduled', w8], [mine.id, 'cancelled', w12],
    ]);
    expect((await postTool(t.baseUrl, 'find_appointments', callOf(loc), {})).body.appointments).toEqual([]);
    const { rows } = await t.owner.query('select status, window_start from app.bookings where id = $1', [other.id]);
    expect(rows[0].status).toBe('scheduled');
  });

  test('answers stay under the platform\'s 15,000 characters: five bookings with 10,000-character notes', async () => {
    const loc = await schedulingLocation();
    const day = await localDate(t.owner, TZ, 2);
    const { token } = await mintKey(t.owner, loc.id);
    for (const h of ['08:00', '10:00', '12:00', '14:00', '16:00']) {
      const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/bookings`, { token,
        body: { window_start: await instant(t.owner, TZ, day, h), name: 'Dana', phone: CALLER, address: 'a'.repeat(500), notes: 'n'.repeat(10_000) } });
      expect(res.status).toBe(201);
    }
    const found = await postTool(t.baseUrl, 'find_appointments', callOf(loc), {});
    expect(found.body.appointments).toHaveLength(5);
    expect(JSON.stringify(found.body).length).toBeLessThan(15_000);
  });

  test('transfer_target: owner cell in an emergency or after hours, the business line in hours', async () => {
    const loc = await schedulingLocation({ owner_cell: '+15125550177' });
    await openEveryDay(t.owner, loc.id, '00:00', '23:59');
    await t.owner.query(`update app.call_forwarding set existing_business_line = '+15125550166' where location_id = $1`, [loc.id]);
    expect((await postTool(t.baseUrl, 'transfer_target', callOf(loc), { reason: 'emergency' })).body).toMatchObject({ ok: true, number: '+15125550177' });
    const { rows } = await t.owner.query(`select to_char(now() at time zone $1, 'HH24:MI') = '23:59' as edge`, [TZ]);
    if (!rows[0].edge) expect((await postTool(t.baseUrl, 'transfer_target', callOf(loc), {})).body).toMatchObject({ ok: true, number: '+15125550166' });
    await t.owner.query('delete from app.business_hours where location_id = $1', [loc.id]);
    expect((await postTool(t.baseUrl, 'transfer_target', callOf(loc), { reason: 'other' })).body).toMatchObject({ ok: true, number: '+15125550177' });
    const bare = await schedulingLocation();
    expect((await postTool(t.baseUrl, 'transfer_target', callOf(bare), {})).body).toMatchObject({ ok: false, number: null });
  });
});

describe('after the call', () => {
  test('the post-call of a call that booked through the tool links that booking: one booking, booking.created once', async () => {
    const loc = await schedulingLocation();
    const callId = newCallId();
    const ws = await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), '08:00');
    const booking = (await postTool(t.baseUrl, 'book_appointment', callOf(loc, callId), { window_start: ws, name: 'Dana Whitfield' })).body.booking;
    expect(booking.call_id).toBeNull();
    const res = await postVoice(t.baseUrl, 'post-call', voiceFixture('booked', loc, { callId }));
    expect(res.status).toBe(200);
    const { rows } = await t.owner.query(
      'select b.id, b.call_id, b.lead_id, c.platform_call_id, l.status as lead_status from app.bookings b join app.calls c on c.id = b.call_id join app.leads l on l.id = b.lead_id where b.location_id = $1', [loc.id]);
    expect(rows).toEqual([{ id: booking.id, call_id: res.body.data.call_id, lead_id: expect.any(String), platform_call_id: callId, lead_status: 'booked' }]);
    expect((await typesOf(loc)).filter((x) => x === 'booking.created')).toHaveLength(1);
    const { rows: cust } = await t.owner.query('select call_count from app.customers where id = $1', [booking.customer_id]);
    expect(cust[0].call_count).toBe(1);
    const { rows: calls } = await t.owner.query('select is_returning_customer from app.calls where id = $1', [res.body.data.call_id]);
    expect(calls[0].is_returning_customer).toBe(false);
    // Without a tool booking the analysis still creates its booking (source call).
    const plain = await postVoice(t.baseUrl, 'post-call', voiceFixture('booked', loc));
    const { rows: b2 } = await t.owner.query('select source from app.bookings where call_id = $1', [plain.body.data.call_id]);
    expect(b2).toEqual([{ source: 'call' }]);
  });

  test('erasure of the caller clears the tool\'s booking too', async () => {
    const loc = await schedulingLocation();
    const ws = await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), '08:00');
    const booking = (await postTool(t.baseUrl, 'book_appointment', callOf(loc), { window_start: ws, name: 'Dana', address: '418 Maple Ridge Drive', notes: 'Dog in yard' })).body.booking;
    const { token } = await mintKey(t.owner, loc.id);
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/erasures`, { token, body: { phone: CALLER } });
    expect(res.status).toBe(202);
    const { rows } = await t.owner.query('select address, notes, anonymised_at is not null as erased from app.bookings where id = $1', [booking.id]);
    expect(rows[0]).toEqual({ address: null, notes: null, erased: true });
  });

  test('transfer events are recorded once each on the call detail; call.emergency fires once', async () => {
    const loc = await schedulingLocation();
    const callId = newCallId();
    const base = voiceFixture('emergency-transfer-started', loc, { callId });
    const ev = (event: string, timestamp: number, extra: Record<string, unknown> = {}) => ({ ...base, event, timestamp, ...extra });
    const dest = { transfer_destination: { type: 'predefined', number: '+15125550177' }, transfer_option: { type: 'warm_transfer' } };
    for (const body of [
      ev('transfer_started', 1795280410000, dest), ev('transfer_started', 1795280410000, dest), // a redelivery
      ev('transfer_cancelled', 1795280420000, dest),
      ev('transfer_started', 1795280430000, { ...dest, transfer_destination: '+15125550166' }),
      ev('transfer_bridged', 1795280440000, { ...dest, transfer_destination: '+15125550166' }),
      ev('transfer_ended', 1795280500000),
    ]) {
      const res = await postVoice(t.baseUrl, 'post-call', body);
      expect(res.status).toBe(200);
    }
    const { token } = await mintKey(t.owner, loc.id);
    const { rows } = await t.owner.query('select id from app.calls where platform_call_id = $1', [callId]);
    const detail = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls/${rows[0].id}`, { token });
    expect(detail.status).toBe(200);
    expect(detail.body.data.transfers).toEqual([
      { destination: '+15125550177', status: 'started', at: '2026-11-21T17:00:10.000Z' },
      { destination: '+15125550177', status: 'cancelled', at: '2026-11-21T17:00:20.000Z' },
      { destination: '+15125550166', status: 'started', at: '2026-11-21T17:00:30.000Z' },
      { destination: '+15125550166', status: 'bridged', at: '2026-11-21T17:00:40.000Z' },
      { destination: null, status: 'ended', at: '2026-11-21T17:01:40.000Z' },
    ]);
    expect((await typesOf(loc)).filter((x) => x === 'call.emergency')).toHaveLength(1);
  });

  test('pre-call variables: next open window, the caller\'s upcoming appointment, whom to transfer to', async () => {
    const loc = await schedulingLocation({ owner_cell: '+15125550177' });
    const day = await localDate(t.owner, TZ, 2);
    await setScheduling(t.owner, loc.id, { lead_time_minutes: 0, horizon_days: 1 });
    const before = (await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc))).body.call_inbound.dynamic_variables;
    expect(before.caller_upcoming_appointment).toBe('');
    await setScheduling(t.owner, loc.id, { lead_time_minutes: 60, horizon_days: 14 });
    const ws = await instant(t.owner, TZ, day, '16:00');
    const inbound = voiceFixture('inbound', loc);
    await postTool(t.baseUrl, 'book_appointment', callOf(loc, newCallId(), inbound.call_inbound.from_number), { window_start: ws, name: 'Dana' });
    const vars = (await postVoice(t.baseUrl, 'inbound', inbound)).body.call_inbound.dynamic_variables;
    expect(vars.caller_upcoming_appointment).toBe(`${spokenDay(day)}, between 4 and 6 PM`);
    expect(vars.next_open_window).toMatch(/^[A-Z][a-z]+day, [A-Z][a-z]+ \d{1,2}, between \d{1,2}( AM| PM)? and \d{1,2} (AM|PM)$/);
    expect(vars.transfer_number).toMatch(/^\+1512555/);
    const closed = await voiceLocation(t.owner, { timezone: TZ, owner_cell: '+15125550177' });
    const none = (await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', closed))).body.call_inbound.dynamic_variables;
    expect(none).toMatchObject({ next_open_window: '', caller_upcoming_appointment: '', transfer_number: '+15125550177' });
  });
});

test('tool bookings stay in their location: another location\'s booking id is not the caller\'s', async () => {
  const a = await schedulingLocation();
  const b = await schedulingLocation();
  const ws = await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), '08:00');
  const inA = (await postTool(t.baseUrl, 'book_appointment', callOf(a), { window_start: ws, name: 'Dana' })).body.booking;
  expect((await postTool(t.baseUrl, 'find_appointments', callOf(b), {})).body.appointments).toEqual([]);
  expect((await postTool(t.baseUrl, 'cancel_appointment', callOf(b), { booking_id: inA.id })).body.ok).toBe(false);
  // Same window in B is its own: capacity is per location.
  expect((await postTool(t.baseUrl, 'book_appointment', callOf(b), { window_start: ws, name: 'Dana' })).body.ok).toBe(true);
  expect(await callFn(t.owner, 'app.scheduling_json', [b.id])).toMatchObject({ capacity: 1 });
});
