/**
 * Scheduling over REST (docs/scheduling.md): the settings, open windows cut from business hours in
 * the location's zone (DST included), booking a window with capacity enforced by PostgreSQL under
 * concurrency, 409 slot_unavailable with alternatives, moving a booking's window.
 */
import { ALL_SCOPES, createLocation, mintKey, request, tenant, useTenant, useTestApi } from '../support/harness.js';
import { instant, localDate, openEveryDay, setScheduling } from '../support/scheduling.js';

const V = '/api/v1';
const TZ = 'America/Chicago';
const t = useTestApi();
const A = useTenant(t, { name: 'Acme Heating', timezone: TZ });
const B = useTenant(t, { name: 'Beta Plumbing', timezone: TZ });
beforeAll(() => openEveryDay(t.owner, A.id));

const req = (method: string, path: string, body?: unknown, token = A.token, headers?: Record<string, string>) =>
  request(t.baseUrl, method, path, { token, body, headers });
const events = async (loc: string, type: string) =>
  (await t.owner.query('select data from app.events where location_id = $1 and type = $2 order by created_at, id', [loc, type])).rows.map((r) => r.data);
/** A location in TZ open every day, and a key on it. */
async function openLocation() {
  const { loc, token } = await tenant(t, undefined, { timezone: TZ });
  await openEveryDay(t.owner, loc.id);
  return { loc, token };
}
const person = { name: 'Dana Whitfield', phone: '+15125550142', address: '1842 Oak Ridge Dr' };

describe('GET/PATCH scheduling', () => {
  test('defaults, then a change; bad values are 400 and change nothing; scopes and tenancy', async () => {
    const loc = await createLocation(t.owner);
    const { token } = await mintKey(t.owner, loc.id);
    const got = await req('GET', `${V}/locations/${loc.id}/scheduling`, undefined, token);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual({
      location_id: loc.id, window_minutes: 120, capacity: 1, lead_time_minutes: 60, horizon_days: 14, closed_dates: [], updated_at: null,
    });
    const patched = await req('PATCH', `${V}/locations/${loc.id}/scheduling`,
      { capacity: 3, window_minutes: 90, closed_dates: ['2026-12-25', '2026-12-24', '2026-12-25'] }, token);
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({ capacity: 3, window_minutes: 90, lead_time_minutes: 60, closed_dates: ['2026-12-24', '2026-12-25'] });
    for (const bad of [{ capacity: 0 }, { window_minutes: 5 }, { closed_dates: ['2026-02-30'] }, { horizon_days: 91 }, {}, { nope: 1 }]) {
      const res = await req('PATCH', `${V}/locations/${loc.id}/scheduling`, bad, token);
      expect({ bad, status: res.status, code: res.body.error.code }).toEqual({ bad, status: 400, code: 'validation_error' });
    }
    expect((await req('GET', `${V}/locations/${loc.id}/scheduling`, undefined, token)).body.data).toMatchObject({ capacity: 3, window_minutes: 90 });
    const readOnly = (await mintKey(t.owner, loc.id, ALL_SCOPES.filter((s) => s !== 'settings:write'))).token;
    const denied = await req('PATCH', `${V}/locations/${loc.id}/scheduling`, { capacity: 2 }, readOnly);
    expect(denied.status).toBe(403);
    expect(denied.body.error.details).toEqual({ required_scope: 'settings:write' });
    expect((await req('GET', `${V}/locations/${loc.id}/scheduling`, undefined, B.token)).status).toBe(404);
    expect((await req('PATCH', `${V}/locations/${loc.id}/scheduling`, { capacity: 9 }, B.token)).status).toBe(404);
  });
});

describe('GET availability', () => {
  test('windows cut from business hours in the location zone, open ones only, oldest first', async () => {
    const day = await localDate(t.owner, TZ, 2);
    const res = await req('GET', `${V}/locations/${A.id}/availability?from=${day}&days=1`);
    expect(res.status).toBe(200);
    const starts = await Promise.all(['08:00', '10:00', '12:00', '14:00', '16:00'].map((h) => instant(t.owner, TZ, day, h)));
    const ends = await Promise.all(['10:00', '12:00', '14:00', '16:00', '18:00'].map((h) => instant(t.owner, TZ, day, h)));
    expect(res.body.data).toEqual(starts.map((start, i) => ({ start, end: ends[i], remaining: 1 })));
    // Another location's token sees nothing of A; a bad query is 400.
    expect((await req('GET', `${V}/locations/${A.id}/availability`, undefined, B.token)).status).toBe(404);
    expect((await req('GET', `${V}/locations/${A.id}/availability?days=0`)).status).toBe(400);
    expect((await req('GET', `${V}/locations/${A.id}/availability?from=tomorrow`)).status).toBe(400);
  });

  test('closed dates, lead time and horizon remove windows', async () => {
    const loc = await createLocation(t.owner, { timezone: TZ });
    const { token } = await mintKey(t.owner, loc.id);
    await openEveryDay(t.owner, loc.id, '00:00', '23:59');
    const closed = await localDate(t.owner, TZ, 3);
    await setScheduling(t.owner, loc.id, { closed_dates: [closed], lead_time_minutes: 24 * 60, horizon_days: 5 });
    const res = await req('GET', `${V}/locations/${loc.id}/availability?days=10`, undefined, token);
    const now = Date.now();
    const starts = res.body.data.map((w: { start: string }) => Date.parse(w.start));
    expect(starts.length).toBeGreaterThan(0);
    for (const s of starts) {
      expect(s).toBeGreaterThanOrEqual(now + 24 * 3600_000 - 60_000);
      expect(s).toBeLessThanOrEqual(now + 5 * 24 * 3600_000 + 60_000);
    }
    const closedStart = Date.parse(await instant(t.owner, TZ, closed, '00:00'));
    const closedEnd = Date.parse(await instant(t.owner, TZ, await localDate(t.owner, TZ, 4), '00:00'));
    expect(starts.filter((s: number) => s >= closedStart && s < closedEnd)).toEqual([]);
  });

  test('across a DST change windows keep their wall-clock times (America/New_York, March 2027)', async () => {
    const loc = await createLocation(t.owner, { timezone: 'America/New_York' });
    await openEveryDay(t.owner, loc.id);
    await setScheduling(t.owner, loc.id, { horizon_days: 90 });
    const { rows } = await t.owner.query(
      `select app.iso(w.window_start) as s, app.iso(w.window_end) as e, app.scheduling_label(w.window_start, w.window_end, 'America/New_York') as label
         from app.scheduling_windows($1, '2027-03-13', 2, '2027-03-01T00:00:00Z') w`, [loc.id]);
    const first = (d: string) => rows.filter((r) => r.s.startsWith(d))[0];
    // Saturday before the change: EST (UTC-5); Sunday after: EDT (UTC-4).
    expect(first('2027-03-13')).toEqual({ s: '2027-03-13T13:00:00.000Z', e: '2027-03-13T15:00:00.000Z', label: 'Saturday, March 13, between 8 and 10 AM' });
    expect(first('2027-03-14')).toEqual({ s: '2027-03-14T12:00:00.000Z', e: '2027-03-14T14:00:00.000Z', label: 'Sunday, March 14, between 8 and 10 AM' });
    expect(rows).toHaveLength(10);
  });
});

describe('POST bookings', () => {
  test('books a window: 201 Booking with its window, source api, scheduled_date/time in location time, booking.created once; Idempotency-Key replays', async () => {
    const { loc, token } = await openLocation();
    const day = await localDate(t.owner, TZ, 2);
    const start = await instant(t.owner, TZ, day, '10:00');
    const body = { window_start: start, ...person, service_type: 'AC repair', notes: 'Gate code 4411' };
    const res = await req('POST', `${V}/locations/${loc.id}/bookings`, body, token, { 'idempotency-key': 'book-1' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      status: 'scheduled', source: 'api', window_start: start, window_end: await instant(t.owner, TZ, day, '12:00'),
      scheduled_date: day, scheduled_time: '10:00', address: person.address, service_type: 'AC repair', call_id: null,
    });
    expect(res.body.data.customer_id).toEqual(expect.any(String));
    const again = await req('POST', `${V}/locations/${loc.id}/bookings`, body, token, { 'idempotency-key': 'book-1' });
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(res.body.data.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const created = await events(loc.id, 'booking.created');
    expect(created).toEqual([res.body.data]);
    // The window (capacity 1) is now full: no longer listed.
    const open = await req('GET', `${V}/locations/${loc.id}/availability?from=${day}&days=1`, undefined, token);
    expect(open.body.data.map((w: { start: string }) => w.start)).not.toContain(start);
  });

  test('full, out-of-hours, closed and past windows → 409 slot_unavailable with the next three open windows; nothing stored', async () => {
    const { loc, token } = await openLocation();
    const day = await localDate(t.owner, TZ, 2);
    const start = await instant(t.owner, TZ, day, '08:00');
    expect((await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: start, ...person }, token)).status).toBe(201);
    const full = await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: start, ...person, phone: '+15125550143' }, token);
    expect(full.status).toBe(409);
    expect(full.body.error).toMatchObject({ code: 'slot_unavailable', details: { reason: 'full', window_start: start } });
    expect(full.body.error.details.alternatives).toEqual([
      { start: await instant(t.owner, TZ, day, '10:00'), end: await instant(t.owner, TZ, day, '12:00') },
      { start: await instant(t.owner, TZ, day, '12:00'), end: await instant(t.owner, TZ, day, '14:00') },
      { start: await instant(t.owner, TZ, day, '14:00'), end: await instant(t.owner, TZ, day, '16:00') },
    ]);
    await setScheduling(t.owner, loc.id, { closed_dates: [await localDate(t.owner, TZ, 3)] });
    const refused = [
      await instant(t.owner, TZ, day, '07:00'), // before opening
      await instant(t.owner, TZ, day, '09:00'), // inside hours but not a window start
      await instant(t.owner, TZ, await localDate(t.owner, TZ, 3), '10:00'), // closed date
      await instant(t.owner, TZ, await localDate(t.owner, TZ, -1), '10:00'), // past
      await instant(t.owner, TZ, await localDate(t.owner, TZ, 30), '10:00'), // past the horizon
    ];
    for (const ws of refused) {
      const res = await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: ws, ...person }, token);
      expect({ ws, status: res.status, code: res.body.error.code, reason: res.body.error.details.reason }).toEqual({ ws, status: 409, code: 'slot_unavailable', reason: 'unavailable' });
      expect(res.body.error.details.alternatives).toHaveLength(3);
    }
    const { rows } = await t.owner.query('select count(*)::int as n from app.bookings where location_id = $1', [loc.id]);
    expect(rows[0].n).toBe(1);
    expect((await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: start, name: 'X' }, token)).status).toBe(400);
    expect((await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: 'tomorrow', ...person }, token)).status).toBe(400);
    expect((await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: start, ...person }, B.token)).status).toBe(404);
  });

  test('50 concurrent bookings at a window of capacity 2: exactly 2 succeed, 48 get 409 slot_unavailable', async () => {
    const { loc, token } = await openLocation();
    await setScheduling(t.owner, loc.id, { capacity: 2 });
    const start = await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), '12:00');
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) =>
      req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: start, name: `Caller ${i}`, phone: `+1512555${String(100 + i).padStart(4, '0')}` }, token)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(2);
    expect(statuses.filter((s) => s === 409)).toHaveLength(48);
    for (const r of results.filter((x) => x.status === 409)) expect(r.body.error.code).toBe('slot_unavailable');
    const { rows } = await t.owner.query(
      `select (select count(*)::int from app.bookings where location_id = $1 and window_start = $2 and status in ('scheduled', 'confirmed')) as active,
              (select booked from app.booking_windows where location_id = $1 and window_start = $2) as counter`, [loc.id, start]);
    expect(rows[0]).toEqual({ active: 2, counter: 2 });
  });
});

describe('PATCH a booking window', () => {
  test('moves to an open window (booking.updated with the previous window), refuses a full one, frees seats on cancel', async () => {
    const { loc, token } = await openLocation();
    const day = await localDate(t.owner, TZ, 2);
    const [w8, w10, w12] = await Promise.all(['08:00', '10:00', '12:00'].map((h) => instant(t.owner, TZ, day, h)));
    const one = (await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: w8, ...person }, token)).body.data;
    const two = (await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: w10, ...person }, token)).body.data;

    const moved = await req('PATCH', `${V}/locations/${loc.id}/bookings/${one.id}`, { window_start: w12 }, token);
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ window_start: w12, scheduled_time: '12:00' });
    const updated = await events(loc.id, 'booking.updated');
    expect(updated).toHaveLength(1);
    expect(updated[0].previous).toMatchObject({ window_start: w8, scheduled_time: '08:00' });

    const refused = await req('PATCH', `${V}/locations/${loc.id}/bookings/${one.id}`, { window_start: w10 }, token);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('slot_unavailable');
    expect((await req('GET', `${V}/locations/${loc.id}/bookings/${one.id}`, undefined, token)).body.data.window_start).toBe(w12);
    // A windowed booking moves by window, not by date or time.
    const byTime = await req('PATCH', `${V}/locations/${loc.id}/bookings/${one.id}`, { scheduled_time: '15:00' }, token);
    expect(byTime.status).toBe(400);
    expect(byTime.body.error.details.issues[0].path).toBe('scheduled_date');

    // Cancelling frees the seat; taking the cancelled one back while the window is full is refused.
    expect((await req('PATCH', `${V}/locations/${loc.id}/bookings/${two.id}`, { status: 'cancelled' }, token)).status).toBe(200);
    const third = await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: w10, ...person }, token);
    expect(third.status).toBe(201);
    const back = await req('PATCH', `${V}/locations/${loc.id}/bookings/${two.id}`, { status: 'scheduled' }, token);
    expect(back.status).toBe(409);
    expect(back.body.error.code).toBe('slot_unavailable');
    const { rows } = await t.owner.query('select booked from app.booking_windows where location_id = $1 order by window_start', [loc.id]);
    expect(rows.map((r) => r.booked)).toEqual([0, 1, 1]);
  });

  test('a completed booking is final: its window cannot move (409 invalid_transition), even to an open one; its notes still change', async () => {
    const { loc, token } = await openLocation();
    const day = await localDate(t.owner, TZ, 3);
    const [w8, w10] = await Promise.all(['08:00', '10:00'].map((h) => instant(t.owner, TZ, day, h)));
    const done = (await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: w8, ...person }, token)).body.data;
    expect((await req('PATCH', `${V}/locations/${loc.id}/bookings/${done.id}`, { status: 'completed' }, token)).status).toBe(200);
    // w10 holds one other booking: full (capacity 1), as w8 is open now that the completed one holds no seat.
    expect((await req('POST', `${V}/locations/${loc.id}/bookings`, { window_start: w10, ...person }, token)).status).toBe(201);
    for (const to of [w10, await instant(t.owner, TZ, day, '12:00')]) {
      const res = await req('PATCH', `${V}/locations/${loc.id}/bookings/${done.id}`, { window_start: to }, token);
      expect([to, res.status, res.body.error.code, res.body.error.details]).toEqual([to, 409, 'invalid_transition', { from: 'completed', to: 'completed', allowed: [] }]);
    }
    const after = (await req('GET', `${V}/locations/${loc.id}/bookings/${done.id}`, undefined, token)).body.data;
    expect([after.window_start, after.scheduled_time, after.status]).toEqual([w8, '08:00', 'completed']);
    expect(await events(loc.id, 'booking.updated')).toHaveLength(1); // the completion only
    const noted = await req('PATCH', `${V}/locations/${loc.id}/bookings/${done.id}`, { notes: 'Paid on site.', window_start: w8 }, token);
    expect([noted.status, noted.body.data.notes]).toEqual([200, 'Paid on site.']);
  });
});
