/**
 * An erasure and the other writers of the same caller's data at once (docs/privacy.md, "Erasure"):
 * a booking the agent makes mid-call (app.voice_tool, book_appointment), the overdue finalisation
 * of a call whose call_analyzed never came (app.voice_finalize_overdue, the finalize_call job) and
 * POST bookings (api.booking_create) take the erasure's per-location lock shared, as the post-call
 * does (test/privacy/erasure-ingestion-race.test.ts). Each is driven in both orders:
 * - the writer in flight (its one SQL call in a transaction the test commits) as the erasure
 *   starts: the erasure waits, and then erases what the writer wrote;
 * - the erasure in flight (it has matched, and waits to clear the customer, which a test
 *   transaction holds FOR KEY SHARE) as the writer starts: the writer waits, and then finds the
 *   caller erased. That row lock stops the erasure (it clears the phone, a key) but not the
 *   writers' upserts of the customer (no key changes): without the advisory lock a writer runs
 *   past the waiting erasure, and what it writes escapes the erasure's match.
 * A booking is the caller's data itself (name, phone, address): one made after the erasure is a
 * new record, under a new customer; none of it may land on the erased customer.
 */
import { hashToken } from '../../src/auth/tokens.js';
import { callFn } from '../../src/db/pools.js';
import { postTool, postVoice, schedulingLocation, toolCall, VOICE_SECRET, voiceFixture, type VoiceLocation } from '../platform/support.js';
import { mintKey, request, startTestApi, type Res, type TestApi } from '../support/harness.js';
import { instant, localDate } from '../support/scheduling.js';
import { blocked, bookedCall, callStarted, hits, needlesOf, newCaller, type Caller } from './support.js';

let t: TestApi;
let A: VoiceLocation;
let token: string;
/** POST bookings' own key: a key used by both would make the writer wait for the erasure's update of its last_used_at. */
let writerToken: string;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, RATE_LIMIT_PER_MINUTE: '1000000' });
  A = await schedulingLocation(t.owner);
  token = (await mintKey(t.owner, A.id)).token;
  writerToken = (await mintKey(t.owner, A.id, undefined, 'writer')).token;
}, 60_000);
afterAll(() => t.close());

const erase = (phone: string) => request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone } });

/** A bookable window of its own for each booking (open every day 08:00-18:00, America/Chicago). */
let day = 1;
const nextWindow = async () => instant(t.owner, 'America/Chicago', await localDate(t.owner, 'America/Chicago', ++day), '10:00');

/** A booking's arguments as the agent or an API client gives them. */
const bookingOf = (caller: Caller, windowStart: string) => ({ window_start: windowStart, name: caller.name, phone: caller.phone, address: caller.address });

/** The book_appointment call the tool route makes (app.voice_tool), for the live call `callId`. */
const toolPayload = (caller: Caller, callId: string, windowStart: string) =>
  JSON.stringify({ name: 'book_appointment', call: toolCall(A, callId, caller.phone), args: bookingOf(caller, windowStart) });

/** A call_ended from `caller` that no call_analyzed follows (voicemail: finalising it makes a lead); its row id. */
async function overdueCall(caller: Caller): Promise<string> {
  const body = voiceFixture('analysis-missing-call-ended', A);
  body.call.from_number = caller.phone;
  body.call.disconnection_reason = 'voicemail_reached';
  body.call.transcript = `User: It's ${caller.name}, ${caller.address}. Call me back on ${caller.phone}.`;
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  const { rows } = await t.owner.query('select id from app.calls where location_id = $1 and platform_call_id = $2', [A.id, body.call.call_id]);
  return rows[0].id;
}

const customerOf = async (caller: Caller): Promise<string> =>
  (await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [A.id, caller.phone])).rows[0].id;

/**
 * Order 1: runs the writer's SQL call in a transaction, starts the erasure of `caller` and commits
 * once the erasure waits; the erasure's answer.
 */
async function writerFirst(caller: Caller, sql: string, params: unknown[]): Promise<Res> {
  const p = await t.owner.connect();
  let erasure!: Promise<Res>;
  try {
    await p.query('begin');
    await p.query(sql, params);
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
    await p.query('commit');
  } finally {
    p.release();
  }
  return erasure;
}

/**
 * Order 2: holds `caller`'s customer FOR KEY SHARE, starts the erasure, and once it waits there
 * (matched, the location's lock held) starts `writer`; releases the customer once the writer waits
 * too (`waited`) or has answered without waiting.
 */
async function erasureFirst<T>(caller: Caller, writer: () => Promise<T>, like: string) {
  const customer = await customerOf(caller);
  const holder = await t.owner.connect();
  let erasure!: Promise<Res>;
  let written!: Promise<T>;
  let waited: boolean;
  try {
    await holder.query('begin');
    await holder.query('select 1 from app.customers where id = $1 for key share', [customer]);
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
    written = writer();
    waited = await blocked(t.owner, like, written);
    await holder.query('commit');
  } finally {
    holder.release();
  }
  return { erasure: await erasure, written: await written, waited, customer };
}

/** The customer the erasure cleared stays cleared, and nothing was added under it since. */
async function staysErased(customer: string) {
  const { rows: [c] } = await t.owner.query(
    `select c.phone, c.name, c.address, c.anonymised_at is not null as anonymised,
            (select count(*)::int from app.bookings b where b.customer_id = c.id and b.anonymised_at is null) as live_bookings,
            (select count(*)::int from app.leads l where l.customer_id = c.id and l.anonymised_at is null) as live_leads
       from app.customers c where c.id = $1`, [customer]);
  expect(c).toEqual({ phone: null, name: null, address: null, anonymised: true, live_bookings: 0, live_leads: 0 });
}

/** Where a booking made after the erasure put the caller's data: its own rows only. */
async function newBookingOnly(caller: Caller, bookingId: string, erased: string) {
  const { rows: [b] } = await t.owner.query('select customer_id, address from app.bookings where id = $1', [bookingId]);
  expect(b.address).toBe(caller.address);
  expect(b.customer_id).not.toBe(erased);
  expect(await customerOf(caller)).toBe(b.customer_id);
  // The new customer, the booking, and its booking.created event.
  expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({ 'app.customers': 1, 'app.bookings': 1, 'app.events': 1 });
}

describe('the booking tool during a call', () => {
  test('a booking in flight as the erasure starts is erased with the rest', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const callId = await callStarted(t.baseUrl, A, caller);
    const erasure = await writerFirst(caller, 'select app.voice_tool($1::jsonb)', [toolPayload(caller, callId, await nextWindow())]);
    expect(erasure.status).toBe(202);
    expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
    // Both bookings: the fixture's and the agent's, made meanwhile.
    expect(erasure.body.data.matched).toMatchObject({ customers: 1, calls: 2, bookings: 2 });
  });

  test('a booking during the erasure waits for it, and books under a new customer', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const callId = await callStarted(t.baseUrl, A, caller);
    const ws = await nextWindow();
    const r = await erasureFirst(caller, () => postTool(t.baseUrl, 'book_appointment', toolCall(A, callId, caller.phone), bookingOf(caller, ws)), 'voice_tool');
    expect([r.erasure.status, r.written.status, r.written.body.ok]).toEqual([202, 200, true]);
    expect(r.erasure.body.data.matched).toMatchObject({ customers: 1, calls: 2, bookings: 1 });
    await staysErased(r.customer);
    await newBookingOnly(caller, r.written.body.booking.id, r.customer);
    expect(r.waited).toBe(true);
  });
});

describe('the overdue finalisation (finalize_call)', () => {
  test('a finalisation in flight as the erasure starts: its customer update, lead and events are erased too', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const callRow = await overdueCall(caller);
    const erasure = await writerFirst(caller, 'select app.voice_finalize_overdue($1)', [callRow]);
    expect(erasure.status).toBe(202);
    expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
    expect(erasure.body.data.matched).toMatchObject({ customers: 1, calls: 2, leads: 2 });
  });

  test('a finalisation during the erasure waits for it, finds the call erased and adds nothing', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const callRow = await overdueCall(caller);
    const r = await erasureFirst(caller, () => callFn<any>(t.owner, 'app.voice_finalize_overdue', [callRow]), 'voice_finalize_overdue');
    expect(r.erasure.status).toBe(202);
    expect(r.erasure.body.data.matched).toMatchObject({ customers: 1, calls: 2 });
    expect(r.written).toMatchObject({ finalized: true, outcome: 'lead' });
    expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
    await staysErased(r.customer);
    const { rows: [lead] } = await t.owner.query('select name, phone, customer_id from app.leads where call_id = $1', [callRow]);
    expect(lead).toEqual({ name: null, phone: null, customer_id: null });
    expect(r.waited).toBe(true);
  });
});

describe('POST bookings', () => {
  test('a booking in flight as the erasure starts is erased with the rest', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const body = JSON.stringify(bookingOf(caller, await nextWindow()));
    const erasure = await writerFirst(caller, 'select api.booking_create($1, $2, $3::jsonb)', [hashToken(writerToken), A.id, body]);
    expect(erasure.status).toBe(202);
    expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
    expect(erasure.body.data.matched).toMatchObject({ customers: 1, bookings: 2 });
  });

  test('a booking during the erasure waits for it, and books under a new customer', async () => {
    const caller = newCaller();
    await bookedCall(t.baseUrl, A, caller);
    const ws = await nextWindow();
    const r = await erasureFirst(caller,
      () => request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/bookings`, { token: writerToken, body: bookingOf(caller, ws) }), 'booking_create');
    expect([r.erasure.status, r.written.status]).toEqual([202, 201]);
    expect(r.erasure.body.data.matched).toMatchObject({ customers: 1, bookings: 1 });
    await staysErased(r.customer);
    await newBookingOnly(caller, r.written.body.data.id, r.customer);
    expect(r.waited).toBe(true);
  });
});
