/**
 * The agent's bookings against what happens to them meanwhile (docs/voice-integration.md §6,
 * docs/scheduling.md): a cancelled booking is not answered "Booked" again, a move or cancel sees
 * the contractor's change committed while it waited, a move into a window the same call booked is
 * a move, the lead of a call whose bookings were all cancelled is not "booked", and a contractor
 * who turned booking off is not booked.
 */
import { mintKey, request, startTestApi, waitingOnLock, type TestApi } from '../support/harness.js';
import { instant, localDate, setScheduling } from '../support/scheduling.js';
import {
  newCallId, postTool, postVoice, schedulingLocation as schedulingLocationOf, toolCall, VOICE_SECRET, voiceFixture, type VoiceLocation,
} from './support.js';

let t: TestApi;
const TZ = 'America/Chicago';

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
});
afterAll(() => t.close());

const callOf = (loc: VoiceLocation, callId = newCallId()) => toolCall(loc, callId);
const schedulingLocation = () => schedulingLocationOf(t.owner);
const windowAt = async (days: number, hhmm: string) => instant(t.owner, TZ, await localDate(t.owner, TZ, days), hhmm);
const active = async (locId: string) =>
  (await t.owner.query(`select id, window_start from app.bookings where location_id = $1 and status in ('scheduled', 'confirmed') order by created_at`, [locId])).rows;

test('booking a window again after cancelling it in the same call makes a new booking, not "Booked" for the cancelled one', async () => {
  const loc = await schedulingLocation();
  const call = callOf(loc);
  const ws = await windowAt(2, '08:00');
  const first = await postTool(t.baseUrl, 'book_appointment', call, { window_start: ws, name: 'Dana' });
  expect(first.body.ok).toBe(true);
  expect((await postTool(t.baseUrl, 'cancel_appointment', call, { booking_id: first.body.booking.id })).body.ok).toBe(true);
  const again = await postTool(t.baseUrl, 'book_appointment', call, { window_start: ws, name: 'Dana' });
  expect([again.status, again.body.ok, again.body.booking.status]).toEqual([200, true, 'scheduled']);
  expect(again.body.booking.id).not.toBe(first.body.booking.id);
  expect(await active(loc.id)).toEqual([{ id: again.body.booking.id, window_start: new Date(ws) }]);
  // A retry of that request answers the same (active) booking.
  const retry = await postTool(t.baseUrl, 'book_appointment', call, { window_start: ws, name: 'Dana' });
  expect(retry.body.booking.id).toBe(again.body.booking.id);
  const seats = await t.owner.query('select booked from app.booking_windows where location_id = $1 and window_start = $2', [loc.id, ws]);
  expect(seats.rows[0].booked).toBe(1);
});

test('a cancelled window that filled meanwhile is refused, not answered "Booked"', async () => {
  const loc = await schedulingLocation();
  const call = callOf(loc);
  const ws = await windowAt(2, '10:00');
  const first = await postTool(t.baseUrl, 'book_appointment', call, { window_start: ws, name: 'Dana' });
  await postTool(t.baseUrl, 'cancel_appointment', call, { booking_id: first.body.booking.id });
  const { token } = await mintKey(t.owner, loc.id);
  expect((await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/bookings`, { token, body: { window_start: ws, name: 'Other', phone: '+15125550199' } })).status).toBe(201);
  const again = await postTool(t.baseUrl, 'book_appointment', call, { window_start: ws, name: 'Dana' });
  expect([again.status, again.body.ok, again.body.reason]).toEqual([200, false, 'full']);
});

test('cancel and reschedule see a contractor change committed while they waited for the booking', async () => {
  const loc = await schedulingLocation();
  const { token } = await mintKey(t.owner, loc.id);
  for (const [tool, args, contractor] of [
    ['cancel_appointment', {}, 'completed'],
    ['reschedule_appointment', { window_start: await windowAt(3, '12:00') }, 'cancelled'],
  ] as const) {
    const call = callOf(loc);
    const booked = (await postTool(t.baseUrl, 'book_appointment', call, { window_start: await windowAt(2, tool === 'cancel_appointment' ? '12:00' : '14:00'), name: 'Dana' })).body.booking;
    // The contractor's PATCH holds the booking's row lock while the tool call arrives.
    const holder = await t.owner.connect();
    try {
      await holder.query('begin');
      await holder.query(`update app.bookings set status = $2 where id = $1`, [booked.id, contractor]);
      const answer = postTool(t.baseUrl, tool, call, { booking_id: booked.id, ...args });
      await waitingOnLock(t.owner); // the tool call queued behind the contractor's update
      await holder.query('commit');
      const res = await answer;
      expect([tool, res.status, res.body.ok, res.body.message]).toEqual([tool, 200, false, 'I could not find that appointment for this phone number.']);
    } finally {
      holder.release();
    }
    const { rows } = await t.owner.query('select status, window_start from app.bookings where id = $1', [booked.id]);
    expect([tool, rows[0].status, rows[0].window_start.toISOString()]).toEqual([tool, contractor, booked.window_start]);
  }
  // The token would have let the contractor do the same through the API.
  expect(token).toEqual(expect.any(String));
});

test('moving a booking into a window the same call booked is a move (capacity permitting), through the tool and the API', async () => {
  const loc = await schedulingLocation();
  await setScheduling(t.owner, loc.id, { capacity: 3 });
  const call = callOf(loc);
  const w1 = await windowAt(2, '08:00');
  const w2 = await windowAt(2, '10:00');
  const a = (await postTool(t.baseUrl, 'book_appointment', call, { window_start: w1, name: 'Dana' })).body.booking;
  const b = (await postTool(t.baseUrl, 'book_appointment', call, { window_start: w2, name: 'Dana' })).body.booking;
  const moved = await postTool(t.baseUrl, 'reschedule_appointment', call, { booking_id: a.id, window_start: w2 });
  expect([moved.status, moved.body.ok, moved.body.booking.window_start]).toEqual([200, true, w2]);
  const { token } = await mintKey(t.owner, loc.id);
  const back = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/bookings/${a.id}`, { token, body: { window_start: w1 } });
  expect([back.status, back.body.data?.window_start]).toEqual([200, w1]);
  const forth = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/bookings/${a.id}`, { token, body: { window_start: w2 } });
  expect(forth.status).toBe(200);
  expect((await active(loc.id)).map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
});

test('a call whose tool bookings were all cancelled: its own outcome decides the lead, never "booked", and the analysis books nothing', async () => {
  const loc = await schedulingLocation();
  const cancelledCall = async (outcome: string, days: number) => {
    const callId = newCallId();
    const booked = (await postTool(t.baseUrl, 'book_appointment', callOf(loc, callId), { window_start: await windowAt(days, '16:00'), name: 'Dana' })).body.booking;
    await postTool(t.baseUrl, 'cancel_appointment', callOf(loc, callId), { booking_id: booked.id });
    const body = voiceFixture('booked', loc, { callId });
    body.call.call_analysis.custom_analysis_data.outcome = outcome;
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.status).toBe(200);
    const leads = await t.owner.query('select status from app.leads where call_id = $1', [res.body.data.call_id]);
    const bookings = await t.owner.query('select id, status from app.bookings where call_id = $1', [res.body.data.call_id]);
    expect(bookings.rows).toEqual([{ id: booked.id, status: 'cancelled' }]);
    return leads.rows;
  };
  expect(await cancelledCall('other', 2)).toEqual([]);
  expect(await cancelledCall('booked', 3)).toEqual([{ status: 'new' }]);

  // Still booked when one of the call's tool bookings is active.
  const kept = newCallId();
  await postTool(t.baseUrl, 'book_appointment', callOf(loc, kept), { window_start: await windowAt(4, '16:00'), name: 'Dana' });
  const body = voiceFixture('booked', loc, { callId: kept });
  body.call.call_analysis.custom_analysis_data.outcome = 'other';
  const res = await postVoice(t.baseUrl, 'post-call', body);
  const leads = await t.owner.query('select status from app.leads where call_id = $1', [res.body.data.call_id]);
  expect(leads.rows).toEqual([{ status: 'booked' }]);
});

test('with booking turned off (agent booking_enabled: false) the agent books and moves nothing, and the pre-call says so', async () => {
  const loc = await schedulingLocation();
  const call = callOf(loc);
  const existing = (await postTool(t.baseUrl, 'book_appointment', call, { window_start: await windowAt(2, '08:00'), name: 'Dana' })).body.booking;
  const vars = async () => (await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc))).body.call_inbound.dynamic_variables;
  expect((await vars()).booking_enabled).toBe('true');
  const { token } = await mintKey(t.owner, loc.id);
  expect((await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/agent`, { token, body: { booking_enabled: false } })).status).toBe(200);
  expect((await vars()).booking_enabled).toBe('false');
  const book = await postTool(t.baseUrl, 'book_appointment', call, { window_start: await windowAt(2, '10:00'), name: 'Dana' });
  expect([book.status, book.body.ok, book.body.reason]).toEqual([200, false, 'booking_disabled']);
  const move = await postTool(t.baseUrl, 'reschedule_appointment', call, { booking_id: existing.id, window_start: await windowAt(2, '12:00') });
  expect([move.body.ok, move.body.reason]).toEqual([false, 'booking_disabled']);
  // Finding and cancelling the caller's own appointment still work.
  expect((await postTool(t.baseUrl, 'find_appointments', call, {})).body.appointments).toHaveLength(1);
  expect((await postTool(t.baseUrl, 'cancel_appointment', call, { booking_id: existing.id })).body.ok).toBe(true);
  const { rows } = await t.owner.query('select count(*)::int n from app.bookings where location_id = $1', [loc.id]);
  expect(rows[0].n).toBe(1);
});
