/**
 * Redaction of the live-call tools' free-text arguments (docs/privacy.md "Redaction at
 * ingestion"): a caller who reads a card number, its expiry and code, and an SSN into the name,
 * notes or address the agent books with, or into a cancellation's reason, leaves only the
 * replacements in the booking, its customer and the booking events (the webhook body included),
 * and the agent's answer. A location that turned redaction off keeps them as spoken.
 */
import { randomUUID } from 'node:crypto';
import { startTestApi, type TestApi } from '../support/harness.js';
import { instant, localDate, openEveryDay } from '../support/scheduling.js';
import { postTool, VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';

let t: TestApi;
const TZ = 'America/Chicago';
const CALLER = '+15125550143';
const CARD = /4242 4242 4242 4242|\b4242 4242\b|12\/27|\b737\b|078-05-1120/;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
});
afterAll(() => t.close());

const callOf = (loc: VoiceLocation) => ({ call_id: `call_${randomUUID().replaceAll('-', '')}`, from_number: CALLER, to_number: loc.phone });

async function book(loc: VoiceLocation, hhmm: string) {
  await openEveryDay(t.owner, loc.id);
  const ws = await instant(t.owner, TZ, await localDate(t.owner, TZ, 2), hhmm);
  const call = callOf(loc);
  const res = await postTool(t.baseUrl, 'book_appointment', call, {
    window_start: ws, name: 'Hal Card 4242 4242 4242 4242', address: '3 Emu Street, SSN 078-05-1120',
    service_type: 'AC repair', notes: 'Pay with Visa 4242 4242 4242 4242 exp 12/27 cvv 737, SSN 078-05-1120',
  });
  expect([res.status, res.body.ok]).toEqual([200, true]);
  return { call, booking: res.body.booking, answer: JSON.stringify(res.body) };
}

async function stored(locationId: string, bookingId: string): Promise<string> {
  const q = async (sql: string) => (await t.owner.query(sql, [locationId])).rows;
  return JSON.stringify({
    bookings: await q('select notes, address from app.bookings where location_id = $1'),
    customers: await q('select name, address from app.customers where location_id = $1'),
    events: await q(`select data, body from app.events where location_id = $1 and data ->> 'id' = '${bookingId}'`),
  });
}

test('book_appointment and cancel_appointment store card numbers, codes, expiry and SSNs replaced', async () => {
  const loc = await voiceLocation(t.owner, { timezone: TZ });
  const { call, booking, answer } = await book(loc, '10:00');
  const cancel = await postTool(t.baseUrl, 'cancel_appointment', call,
    { booking_id: booking.id, reason: 'card 4242 4242 4242 4242 declined' });
  expect([cancel.status, cancel.body.ok]).toEqual([200, true]);
  const all = await stored(loc.id, booking.id);
  expect(all).toContain('Cancelled by the caller');
  expect(`${all} ${answer} ${JSON.stringify(cancel.body)}`).not.toMatch(CARD);
  const { rows } = await t.owner.query('select b.notes, b.address, c.name from app.bookings b join app.customers c on c.id = b.customer_id where b.id = $1', [booking.id]);
  expect(rows[0]).toEqual({
    name: 'Hal Card [card ending 4242]',
    address: '3 Emu Street, SSN [ssn]',
    notes: 'Pay with Visa [card ending 4242] exp [expiry] cvv [security code], SSN [ssn]\nCancelled by the caller: card [card ending 4242] declined.',
  });
});

test('a location with redaction off keeps the tool arguments as spoken', async () => {
  const loc = await voiceLocation(t.owner, { timezone: TZ });
  await t.owner.query('update app.privacy_settings set redact_sensitive_data = false where location_id = $1', [loc.id]);
  const { booking } = await book(loc, '12:00');
  const { rows } = await t.owner.query('select notes from app.bookings where id = $1', [booking.id]);
  expect(rows[0].notes).toBe('Pay with Visa 4242 4242 4242 4242 exp 12/27 cvv 737, SSN 078-05-1120');
});
