/**
 * Retention (docs/privacy.md "Retention"): GET/PATCH data-retention, and the hourly prune
 * (prune_deliveries → app.retention_prune → app.privacy_prune) clearing call content and
 * anonymising personal data past each location's windows, in bounded batches, without changing
 * counts or insights, and only in the locations that set a window.
 */
import { prunePrivacy } from '../../src/privacy/retention.js';
import { makePruneTask } from '../../src/webhooks/retention.js';
import { VOICE_SECRET, voiceLocation } from '../platform/support.js';
import { mintKey, request, testLog, useTenant, useTestApi } from '../support/harness.js';
import { bookedCall, countsOf, hits, needlesOf, type Caller } from './support.js';

const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
const A = useTenant(t, {}, voiceLocation);
const B = useTenant(t, {}, voiceLocation);

const callers: Caller[] = Array.from({ length: 5 }, (_, i) => ({
  phone: `+1512555013${i}`, name: `Caller Number${i}`, address: `${100 + i} Retention Way, Austin, TX`, email: `caller${i}@example.com`,
}));
const fresh: Caller = { phone: '+15125550149', name: 'Fresh Caller', address: '1 New Rd, Austin, TX', email: 'fresh@example.com' };

/** Moves a location's rows (and everything hanging off them) `days` into the past. */
async function age(loc: string, days: number, phones: string[]): Promise<void> {
  const back = `interval '${days} days'`;
  await t.owner.query(`update app.calls set created_at = created_at - ${back}, started_at = started_at - ${back} where location_id = $1 and caller_phone = any ($2)`, [loc, phones]);
  await t.owner.query(`update app.customers set created_at = created_at - ${back}, last_call_at = last_call_at - ${back} where location_id = $1 and phone = any ($2)`, [loc, phones]);
  await t.owner.query(`update app.leads set created_at = created_at - ${back} where location_id = $1 and phone = any ($2)`, [loc, phones]);
  await t.owner.query(`update app.bookings b set created_at = b.created_at - ${back} from app.leads l where b.location_id = $1 and l.location_id = $1 and l.id = b.lead_id and l.phone = any ($2)`, [loc, phones]);
  await t.owner.query(
    `update app.events set created_at = created_at - ${back} where location_id = $1 and (data ->> 'id') in (
       select id::text from app.calls where location_id = $1 and caller_phone = any ($2)
       union all select id::text from app.leads where location_id = $1 and phone = any ($2)
       union all select b.id::text from app.bookings b join app.leads l on l.location_id = b.location_id and l.id = b.lead_id
                  where b.location_id = $1 and l.phone = any ($2))`, [loc, phones]);
}

beforeAll(async () => {
  for (const loc of [A, B]) {
    for (const c of callers) await bookedCall(t.baseUrl, loc, c);
    await bookedCall(t.baseUrl, loc, fresh);
    await age(loc.id, 40, callers.map((c) => c.phone));
  }
}, 90_000);

const base = (loc: string) => `/api/v1/locations/${loc}/data-retention`;

test('GET shows the defaults; PATCH sets and clears windows (settings scopes)', async () => {
  const got = await request(t.baseUrl, 'GET', base(A.id), { token: A.token });
  expect(got.status).toBe(200);
  expect(got.body.data).toMatchObject({ location_id: A.id, redact_sensitive_data: true, content_retention_days: null, personal_data_retention_days: null });
  const set = await request(t.baseUrl, 'PATCH', base(A.slug), { token: A.token, body: { content_retention_days: 30, personal_data_retention_days: 365 } });
  expect(set.status).toBe(200);
  expect(set.body.data).toMatchObject({ redact_sensitive_data: true, content_retention_days: 30, personal_data_retention_days: 365 });
  const cleared = await request(t.baseUrl, 'PATCH', base(A.id), { token: A.token, body: { personal_data_retention_days: null } });
  expect(cleared.body.data).toMatchObject({ content_retention_days: 30, personal_data_retention_days: null });
  expect(Date.parse(cleared.body.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(got.body.data.updated_at));
  // B is untouched; scopes and tenancy.
  expect((await request(t.baseUrl, 'GET', base(B.id), { token: B.token })).body.data.content_retention_days).toBeNull();
  expect((await request(t.baseUrl, 'PATCH', base(A.id), { token: B.token, body: { content_retention_days: 1 } })).status).toBe(404);
  const reader = (await mintKey(t.owner, A.id, ['settings:read'])).token;
  expect((await request(t.baseUrl, 'GET', base(A.id), { token: reader })).status).toBe(200);
  const denied = await request(t.baseUrl, 'PATCH', base(A.id), { token: reader, body: { content_retention_days: 1 } });
  expect(denied.status).toBe(403);
  expect(denied.body.error.details).toEqual({ required_scope: 'settings:write' });
  expect((await request(t.baseUrl, 'GET', base(A.id), { token: (await mintKey(t.owner, A.id, ['calls:read'])).token })).status).toBe(403);
});

test('content retention: old transcripts go in batches, the call says so, counts and insights stay', async () => {
  await request(t.baseUrl, 'PATCH', base(A.id), { token: A.token, body: { content_retention_days: 30, personal_data_retention_days: null } });
  const before = await countsOf(t.baseUrl, A.id, A.token);
  const beforeB = await countsOf(t.baseUrl, B.id, B.token);
  // Batches of 2: the 5 old calls take 3 statements (2, 2, 1).
  const r = await prunePrivacy({ pool: t.owner }, { batch: 2, kinds: ['content'] });
  expect(r).toMatchObject({ content: 5, batches: 3 });
  const { rows } = await t.owner.query(
    `select caller_phone, transcript is null as gone, recording_url is null as rec_gone, content_purged_at is not null as marked, caller_name
       from app.calls where location_id = $1 order by caller_phone`, [A.id]);
  expect(rows.filter((c) => c.caller_phone !== fresh.phone).every((c) => c.gone && c.rec_gone && c.marked && c.caller_name)).toBe(true);
  expect(rows.find((c) => c.caller_phone === fresh.phone)).toMatchObject({ gone: false, rec_gone: false, marked: false });
  const { rows: [old] } = await t.owner.query('select id from app.calls where location_id = $1 and caller_phone = $2', [A.id, callers[0].phone]);
  const detail = (await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/calls/${old.id}`, { token: A.token })).body.data;
  expect(detail).toMatchObject({ transcript: null, transcript_turns: null, recording_url: null, public_log_url: null, caller_name: callers[0].name, anonymised_at: null });
  expect(detail.content_purged_at).toMatch(/Z$/);
  expect(await countsOf(t.baseUrl, A.id, A.token)).toEqual(before);
  // B set no window: nothing of it changed.
  expect(await countsOf(t.baseUrl, B.id, B.token)).toEqual(beforeB);
  expect((await t.owner.query('select count(*)::int as n from app.calls where location_id = $1 and (transcript is null or content_purged_at is not null)', [B.id])).rows[0].n).toBe(0);
  // Nothing left to do: the next run clears nothing.
  expect((await prunePrivacy({ pool: t.owner }, { kinds: ['content'] })).content).toBe(0);
});

test('personal-data retention through the hourly task: anonymised everywhere, counts and insights identical', async () => {
  await request(t.baseUrl, 'PATCH', base(A.id), { token: A.token, body: { personal_data_retention_days: 30 } });
  const before = await countsOf(t.baseUrl, A.id, A.token);
  expect(before).toMatchObject({ calls: 6, leads: 6, bookings: 6 });
  expect(before.insights).toMatchObject({ calls_answered: 6, leads_captured: 6, revenue_recovered: 1134 });
  await makePruneTask({ cfg: t.cfg, log: testLog, pool: t.owner })({}, {} as never);
  for (const c of callers) expect({ c: c.name, hits: await hits(t.owner, A.id, needlesOf(c)) }).toEqual({ c: c.name, hits: {} });
  expect(Object.keys(await hits(t.owner, A.id, needlesOf(fresh))).length).toBeGreaterThan(3);
  for (const c of callers) expect(Object.keys(await hits(t.owner, B.id, needlesOf(c))).length).toBeGreaterThan(3);
  expect(await countsOf(t.baseUrl, A.id, A.token)).toEqual(before);
  const { rows: [m] } = await t.owner.query(
    `select (select count(*) from app.calls where location_id = $1 and anonymised_at is not null)::int as calls,
            (select count(*) from app.customers where location_id = $1 and anonymised_at is not null)::int as customers,
            (select count(*) from app.leads where location_id = $1 and anonymised_at is not null)::int as leads,
            (select count(*) from app.bookings where location_id = $1 and anonymised_at is not null)::int as bookings,
            (select count(*) from app.events where location_id = $1 and redacted_at is not null)::int as events`, [A.id]);
  // The old call.ended events had no notification or attempt: the same task's delivery-history prune
  // (DELIVERY_RETENTION_DAYS = 30) deleted them; lead.created and booking.created stay, cleared.
  expect(m).toEqual({ calls: 5, customers: 5, leads: 5, bookings: 5, events: 10 });
});

test('the prune never waits on a row ingestion holds: a locked call is skipped and cleared next time', async () => {
  await request(t.baseUrl, 'PATCH', base(B.id), { token: B.token, body: { content_retention_days: 30 } });
  const { rows: [held] } = await t.owner.query('select id from app.calls where location_id = $1 and caller_phone = $2', [B.id, callers[0].phone]);
  const c = await t.owner.connect();
  try {
    // Another transaction (ingestion, say) holds one of the old calls.
    await c.query('begin');
    await c.query('select 1 from app.calls where id = $1 for update', [held.id]);
    const first = await prunePrivacy({ pool: t.owner }, { kinds: ['content'] });
    expect(first.content).toBe(4);
    const { rows: [still] } = await t.owner.query('select transcript is not null as kept, content_purged_at from app.calls where id = $1', [held.id]);
    expect(still).toEqual({ kept: true, content_purged_at: null });
    await c.query('commit');
  } finally {
    c.release();
  }
  expect((await prunePrivacy({ pool: t.owner }, { kinds: ['content'] })).content).toBe(1);
  expect((await t.owner.query('select content_purged_at from app.calls where id = $1', [held.id])).rows[0].content_purged_at).not.toBeNull();
});
