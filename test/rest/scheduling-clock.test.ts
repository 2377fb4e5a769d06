/**
 * Arrival windows at the edges of the clock (docs/scheduling.md "Windows", docs/api-contract.md
 * "Business hours"): the spring-forward day's missing hour, a business open until midnight, and a
 * location that changes its time zone under upcoming bookings.
 */
import { createLocation, request, tenant, useTestApi } from '../support/harness.js';
import { instant, localDate, openEveryDay, setScheduling } from '../support/scheduling.js';

const V = '/api/v1';
const t = useTestApi();

/** The windows of `days` days from `date`, as seen from `at`, with their labels in `tz`. */
async function windows(locId: string, tz: string, date: string, days = 1, at = '2027-03-01T00:00:00Z') {
  const { rows } = await t.owner.query(
    `select app.iso(w.window_start) as s, app.iso(w.window_end) as e, app.scheduling_label(w.window_start, w.window_end, $2) as label
       from app.scheduling_windows($1, $3, $4, $5) w`, [locId, tz, date, days, at]);
  return rows as Array<{ s: string; e: string; label: string }>;
}

describe('the spring-forward day', () => {
  test.each([
    // Chicago, 14 March 2027: 02:00 CST is 03:00 CDT (08:00Z).
    ['America/Chicago', '2027-03-14', 60, [
      ['06:00', '07:00'], ['07:00', '08:00'], ['08:00', '09:00'], ['09:00', '10:00'], ['10:00', '11:00'],
    ]],
    ['America/Chicago', '2027-03-14', 30, [
      ['06:00', '06:30'], ['06:30', '07:00'], ['07:00', '07:30'], ['07:30', '08:00'], ['08:00', '08:30'], ['08:30', '09:00'],
      ['09:00', '09:30'], ['09:30', '10:00'], ['10:00', '10:30'], ['10:30', '11:00'],
    ]],
    // London, 28 March 2027: 01:00 GMT is 02:00 BST (01:00Z).
    ['Europe/London', '2027-03-28', 60, [
      ['00:00', '01:00'], ['01:00', '02:00'], ['02:00', '03:00'], ['03:00', '04:00'], ['04:00', '05:00'],
    ]],
  ] as const)('%s %s, %i-minute windows from 00:00 to 06:00: no empty, reversed or overlapping window', async (tz, date, minutes, expected) => {
    const loc = await createLocation(t.owner, { timezone: tz });
    await openEveryDay(t.owner, loc.id, '00:00', '06:00');
    await setScheduling(t.owner, loc.id, { window_minutes: minutes, horizon_days: 90, lead_time_minutes: 0 });
    const got = await windows(loc.id, tz, date);
    expect(got.map((w) => [w.s.slice(11, 16), w.e.slice(11, 16)])).toEqual(expected);
    expect(got.every((w) => !/between (\S+) and \1 /.test(w.label))).toBe(true);
    // Each window starts after the one before it ends: one window per start (per capacity counter).
    got.forEach((w, i) => expect([w.s, w.s < w.e, i === 0 || got[i - 1].e <= w.s]).toEqual([w.s, true, true]));
  });

  test('the day before keeps every window (nothing is left out off the change)', async () => {
    const loc = await createLocation(t.owner, { timezone: 'America/Chicago' });
    await openEveryDay(t.owner, loc.id, '00:00', '06:00');
    await setScheduling(t.owner, loc.id, { window_minutes: 60, horizon_days: 90, lead_time_minutes: 0 });
    expect(await windows(loc.id, 'America/Chicago', '2027-03-13')).toHaveLength(6);
  });
});

test('a business open until midnight closes at 24:00 and offers its last window; 24:00 opens nothing', async () => {
  const { loc, token } = await tenant(t, undefined, { timezone: 'America/Chicago' });
  const put = (body: unknown) => request(t.baseUrl, 'PUT', `${V}/locations/${loc.id}/business-hours`, { token, body });
  const res = await put([{ day: 2, open: '18:00', close: '24:00' }, { day: 3, open: '00:00', close: '02:00' }]);
  expect(res.status).toBe(200);
  expect(res.body.data).toEqual([{ day: 2, open: '18:00', close: '24:00' }, { day: 3, open: '00:00', close: '02:00' }]);
  // Tuesday 1 December 2026 (day 2), then Wednesday.
  const got = await windows(loc.id, 'America/Chicago', '2026-12-01', 2, '2026-11-20T00:00:00Z');
  expect(got.map((w) => w.label)).toEqual([
    'Tuesday, December 1, between 6 and 8 PM', 'Tuesday, December 1, between 8 and 10 PM',
    'Tuesday, December 1, between 10 PM and 12 AM', 'Wednesday, December 2, between 12 and 2 AM',
  ]);
  for (const bad of [{ day: 2, open: '24:00', close: '24:00' }, { day: 2, open: '18:00', close: '24:01' }, { day: 2, open: '18:00', close: '25:00' }]) {
    const refused = await put([bad]);
    expect([JSON.stringify(bad), refused.status, refused.body.error.code]).toEqual([JSON.stringify(bad), 400, 'validation_error']);
  }
  const { rows } = await t.owner.query('select count(*)::int n from app.business_hours where location_id = $1', [loc.id]);
  expect(rows[0].n).toBe(2);
});

test('a new time zone re-reads upcoming active bookings\' scheduled date and time (booking.updated), and leaves cancelled ones', async () => {
  const tz = 'Europe/London';
  const { loc, token } = await tenant(t, undefined, { timezone: tz });
  await openEveryDay(t.owner, loc.id);
  await setScheduling(t.owner, loc.id, { capacity: 2 });
  const ws = await instant(t.owner, tz, await localDate(t.owner, tz, 2), '08:00');
  const book = async () => (await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/bookings`, {
    token, body: { window_start: ws, name: 'Dana', phone: '+15125550142' } })).body.data;
  const kept = await book();
  const cancelled = await book();
  await request(t.baseUrl, 'PATCH', `${V}/locations/${loc.id}/bookings/${cancelled.id}`, { token, body: { status: 'cancelled' } });
  expect(kept.scheduled_time).toBe('08:00');

  const patched = await request(t.baseUrl, 'PATCH', `${V}/locations/${loc.id}`, { token, body: { timezone: 'America/New_York' } });
  expect(patched.status).toBe(200);
  const { rows } = await t.owner.query(
    `select to_char((window_start at time zone 'America/New_York')::date, 'YYYY-MM-DD') as d, to_char(window_start at time zone 'America/New_York', 'HH24:MI') as t
       from app.bookings where id = $1`, [kept.id]);
  const after = (await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/bookings/${kept.id}`, { token })).body.data;
  expect([after.window_start, after.scheduled_date, after.scheduled_time]).toEqual([ws, rows[0].d, rows[0].t]);
  expect(after.scheduled_time).not.toBe('08:00');
  const other = (await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/bookings/${cancelled.id}`, { token })).body.data;
  expect(other.scheduled_time).toBe('08:00');
  const { rows: ev } = await t.owner.query(
    `select data ->> 'id' as id from app.events where location_id = $1 and type = 'booking.updated' and data ->> 'scheduled_time' = $2`, [loc.id, rows[0].t]);
  expect(ev.map((e) => e.id)).toEqual([kept.id]);
});
