/**
 * An erasure and an ingestion of the same caller at once (docs/privacy.md, "Erasure"): the writers
 * of caller data take the erasure's per-location lock shared, so an erasure waits for a post-call
 * in flight and then matches what it wrote, and a post-call that comes during an erasure waits for
 * it and finds the call erased. Before, the erasure matched in one snapshot and updated only those
 * ids: a returning caller's new call, or a first-time caller's customer, lead and booking, kept
 * the data; and the two locked call and customer in opposite orders (a deadlock, 503).
 * The interleavings are made deterministic: the ingestion is app.voice_post_call, the one SQL call
 * the post-call route makes, in a transaction the test commits; the erasure is the real POST.
 */
import { hashToken } from '../../src/auth/tokens.js';
import { postVoice, VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { blocked, bookedBody, bookedCall, callStarted, hits, needlesOf, newCaller } from './support.js';

let t: TestApi;
let A: VoiceLocation;
let token: string;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, RATE_LIMIT_PER_MINUTE: '1000000' });
  A = await voiceLocation(t.owner);
  token = (await mintKey(t.owner, A.id)).token;
}, 60_000);
afterAll(() => t.close());

const erase = (phone: string) => request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone } });

/** Runs app.voice_post_call for `body` in a transaction; `during` runs before the commit. */
async function ingestAround(body: unknown, during: () => Promise<void>): Promise<void> {
  const p = await t.owner.connect();
  try {
    await p.query('begin');
    await p.query('select app.voice_post_call($1::jsonb, true, null)', [JSON.stringify(body)]);
    await during();
    await p.query('commit');
  } finally {
    p.release();
  }
}

test("a returning caller's new call ingested as the erasure starts is erased with the rest", async () => {
  const caller = newCaller();
  await bookedCall(t.baseUrl, A, caller);
  let erasure!: ReturnType<typeof erase>;
  await ingestAround(bookedBody(A, caller), async () => {
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
  });
  expect((await erasure).status).toBe(202);
  // Both calls, leads and bookings: the one ingested meanwhile too.
  expect((await erasure).body.data.matched).toMatchObject({ calls: 2, leads: 2, bookings: 2, customers: 1 });
  expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
});

test("a first-time caller's call_analyzed ingested as the erasure starts: its new customer, lead and booking are erased too", async () => {
  const caller = newCaller();
  const callId = await callStarted(t.baseUrl, A, caller);
  let erasure!: ReturnType<typeof erase>;
  await ingestAround(bookedBody(A, caller, { callId }), async () => {
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
  });
  expect((await erasure).status).toBe(202);
  expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
});

test('a call_analyzed that comes while the erasure waits for a row waits for the erasure, adds nothing, and neither deadlocks', async () => {
  const caller = newCaller();
  await bookedCall(t.baseUrl, A, caller);
  const callId = await callStarted(t.baseUrl, A, caller);
  const { rows: [customer] } = await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [A.id, caller.phone]);
  // A third transaction holds the customer a moment (as any writer of it might), so both queue.
  const holder = await t.owner.connect();
  let erasure!: ReturnType<typeof erase>;
  let ingestion!: ReturnType<typeof postVoice>;
  try {
    await holder.query('begin');
    await holder.query('select 1 from app.customers where id = $1 for update', [customer.id]);
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
    ingestion = postVoice(t.baseUrl, 'post-call', bookedBody(A, caller, { callId }));
    await blocked(t.owner, 'voice_post_call');
    await holder.query('commit');
  } finally {
    holder.release();
  }
  const [e, p] = await Promise.all([erasure, ingestion]);
  expect([e.status, p.status]).toEqual([202, 200]);
  expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
});

test('a lead POSTed through the API as the erasure starts is erased with the rest', async () => {
  const caller = newCaller();
  await bookedCall(t.baseUrl, A, caller);
  // The one SQL call POST leads makes, in a transaction the test commits.
  const p = await t.owner.connect();
  let erasure!: ReturnType<typeof erase>;
  try {
    await p.query('begin');
    await p.query('select api.lead_create($1, $2, $3::jsonb)', [hashToken(token), A.id, JSON.stringify({ name: caller.name, phone: caller.phone, address: caller.address })]);
    erasure = erase(caller.phone);
    await blocked(t.owner, 'erasure_create');
    await p.query('commit');
  } finally {
    p.release();
  }
  expect((await erasure).status).toBe(202);
  expect((await erasure).body.data.matched).toMatchObject({ leads: 2 });
  expect(await hits(t.owner, A.id, needlesOf(caller))).toEqual({});
});
