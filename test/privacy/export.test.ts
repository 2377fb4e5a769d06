/**
 * Export, the right to know (docs/privacy.md "Export"): GET caller-data answers one JSON document
 * with everything held about the caller in the token's location; transcripts only with
 * transcripts:read and recording URLs only with recordings:read, as in call detail.
 */
import { VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { xactReads } from '../support/db.js';
import { hashToken } from '../../src/auth/tokens.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { bookedCall, type Caller } from './support.js';

let t: TestApi;
let A: VoiceLocation;
let B: VoiceLocation;
const gail: Caller = { phone: '+15125550174', name: 'Gail Ortiz', address: '3 Willow Bend, Austin, TX 78748', email: 'gail.ortiz@example.com' };
const hank: Caller = { phone: '+15125550175', name: 'Hank Moss', address: '8 Pine St, Austin, TX 78701', email: 'hank@example.com' };

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  A = await voiceLocation(t.owner);
  B = await voiceLocation(t.owner);
  await bookedCall(t.baseUrl, A, gail);
  await bookedCall(t.baseUrl, A, gail);
  await bookedCall(t.baseUrl, A, hank);
  await bookedCall(t.baseUrl, B, gail);
}, 60_000);
afterAll(() => t.close());

const exportOf = (loc: string, token: string, qs: string) => request(t.baseUrl, 'GET', `/api/v1/locations/${loc}/caller-data${qs}`, { token });

test('everything about the caller in this location, nothing about anyone else', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read', 'transcripts:read', 'recordings:read']);
  const res = await exportOf(A.id, token, `?phone=${encodeURIComponent('(512) 555-0174')}`);
  expect(res.status).toBe(200);
  const d = res.body.data;
  expect(d.location_id).toBe(A.id);
  expect(d.customers).toHaveLength(1);
  expect(d.customers[0]).toMatchObject({ phone: gail.phone, name: gail.name, email: gail.email, address: gail.address, call_count: 2 });
  expect(d.calls).toHaveLength(2);
  for (const c of d.calls) {
    expect(c).toMatchObject({ location_id: A.id, customer_id: d.customers[0].id, caller_name: gail.name, caller_address: gail.address });
    expect(c.transcript).toContain(gail.name);
    expect(c.recording_url).toMatch(/^https:/);
  }
  expect(d.leads.map((l: { phone: string }) => l.phone)).toEqual([gail.phone, gail.phone]);
  expect(d.bookings).toHaveLength(2);
  // call.ended, lead.created and booking.created for each call.
  expect(d.events.map((e: { type: string }) => e.type).sort()).toEqual(
    ['booking.created', 'booking.created', 'call.ended', 'call.ended', 'lead.created', 'lead.created']);
  expect(d.notifications.length).toBeGreaterThan(0);
  for (const n of d.notifications) expect(d.events.map((e: { id: string }) => e.id)).toContain(n.event_id);
  const text = JSON.stringify(d);
  expect(text).not.toContain(hank.name);
  expect(text).not.toContain(B.id);
});

test('by e-mail, case-insensitively, finds the same caller', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read']);
  const res = await exportOf(A.slug, token, `?email=${encodeURIComponent('GAIL.Ortiz@example.com')}`);
  expect(res.status).toBe(200);
  expect(res.body.data.customers).toHaveLength(1);
  expect(res.body.data.calls).toHaveLength(2);
});

test('transcripts need transcripts:read, recordings recordings:read', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read']);
  const res = await exportOf(A.id, token, `?phone=${encodeURIComponent(gail.phone)}`);
  expect(res.status).toBe(200);
  for (const c of res.body.data.calls) {
    expect(c.transcript).toBeNull();
    expect(c.transcript_turns).toBeNull();
    expect(c.recording_url).toBeNull();
    expect(c.caller_name).toBe(gail.name);
  }
  const transcripts = (await mintKey(t.owner, A.id, ['privacy:read', 'transcripts:read'])).token;
  const withT = (await exportOf(A.id, transcripts, `?phone=${encodeURIComponent(gail.phone)}`)).body.data.calls[0];
  expect(withT.transcript).toContain(gail.name);
  expect(withT.recording_url).toBeNull();
});

test('scope and tenancy: privacy:read needed; another location’s token sees only its own', async () => {
  const calls = (await mintKey(t.owner, A.id, ['calls:read', 'transcripts:read'])).token;
  const denied = await exportOf(A.id, calls, `?phone=${encodeURIComponent(gail.phone)}`);
  expect(denied.status).toBe(403);
  expect(denied.body.error.details).toEqual({ required_scope: 'privacy:read' });
  const tokenB = (await mintKey(t.owner, B.id)).token;
  expect((await exportOf(A.id, tokenB, `?phone=${encodeURIComponent(gail.phone)}`)).status).toBe(404);
  const own = (await exportOf(B.id, tokenB, `?phone=${encodeURIComponent(gail.phone)}`)).body.data;
  expect(own.calls).toHaveLength(1);
  expect(own.calls[0].location_id).toBe(B.id);
});

test('an unknown caller: an empty document, not an error', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read']);
  const res = await exportOf(A.id, token, '?phone=%2B15125550100');
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ customers: [], calls: [], leads: [], bookings: [], events: [], notifications: [] });
});

test('after an erasure the export holds no personal data', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read', 'privacy:write', 'transcripts:read']);
  const { rows: [c] } = await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [A.id, gail.phone]);
  expect((await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone: gail.phone } })).status).toBe(202);
  // By phone she is gone; by her customer id the anonymised rows remain, without anything that names her.
  expect((await exportOf(A.id, token, `?phone=${encodeURIComponent(gail.phone)}`)).body.data.customers).toEqual([]);
  const d = (await exportOf(A.id, token, `?customer_id=${c.id}`)).body.data;
  expect(d.calls).toHaveLength(2);
  const text = JSON.stringify(d);
  for (const s of [gail.name, gail.address, gail.email, gail.phone]) expect(text).not.toContain(s);
  expect(d.customers[0].anonymised_at).toMatch(/Z$/);
});

test('the match reads through indexes, not the location\'s tables, and runs only for the pinned location', async () => {
  const { token } = await mintKey(t.owner, A.id, ['privacy:read']);
  const c = await t.owner.connect();
  try {
    await c.query('begin');
    // As the API role, with sequential scans priced out: what the tables' size makes the planner
    // choose at 1 M calls (docs/performance.md, "Index audit at 1 M calls"). Beneath the RLS
    // policies lower(email) and data ->> 'id' could not use their indexes, so the customers,
    // leads and events were scanned whatever their size.
    await c.query(`insert into app.customers (location_id, phone, name, email)
                   select $1, '+1512555' || g, 'Filler Caller', 'filler' || g || '@example.com' from generate_series(1000, 1299) g`, [A.id]);
    await c.query(`set local role switchboard_api; set local enable_seqscan = off`);
    const tables = ['app.customers', 'app.calls', 'app.leads', 'app.bookings', 'app.events'];
    const before = await xactReads(c, tables);
    for (const [phone, email] of [[hank.phone, null], [null, 'HANK@example.com']]) {
      const { rows: [r] } = await c.query(`select api.caller_data_get($1, $2, $3, $4, null) as d`, [hashToken(token), A.id, phone, email]);
      expect(r.d.calls).toHaveLength(1);
    }
    const after = await xactReads(c, tables);
    // Hank's rows, not the location's 300 other customers (each look-up was a walk of them all).
    expect([after.seq - before.seq, after.rows - before.rows < 100]).toEqual([0, true]);
    // A location other than the pinned one is refused, whoever calls it.
    await c.query('savepoint other');
    await expect(c.query(`select app.privacy_match_ids($1, $2, null, null, false)`, [B.id, hank.phone])).rejects.toThrow(/pinned location only/);
    await c.query('rollback to savepoint other');
  } finally {
    await c.query('rollback');
    c.release();
  }
});
