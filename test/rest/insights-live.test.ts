/**
 * Insights from the rollup, continued from insights-rollup.test.ts: the after-hours rule, the
 * timezone rebuild and the no-waiting property of the live path.
 */
import { callFn } from '../../src/db/pools.js';
import { hashToken } from '../../src/auth/tokens.js';
import { createLocation, mintKey, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
beforeAll(async () => {
  t = await startTestApi();
});
afterAll(() => t.close());

/** Epoch ms of a local wall-clock time `dayOffset` days from today in zone tz (Postgres decides). */
async function localMs(tz: string, dayOffset: number, time: string): Promise<number> {
  const { rows } = await t.owner.query(
    `select (extract(epoch from ((((now() at time zone $1)::date + $2::int) + $3::time) at time zone $1)) * 1000)::bigint as ms`,
    [tz, dayOffset, time]);
  return Number(rows[0].ms);
}

async function voiceLocation(tz: string, n: number) {
  const phone = `+1415${String(6_000_000 + n).padStart(7, '0')}`;
  const loc = await createLocation(t.owner, { timezone: tz, service_phone: phone });
  const { token } = await mintKey(t.owner, loc.id, ['settings:write', 'locations:write', 'insights:read']);
  return { loc, phone, token };
}

let caller = 0;
const postCall = (phone: string, callId: string, event: string, startMs: number, outcome?: string) =>
  JSON.stringify({
    event,
    call: {
      // A caller of its own each time: concurrent calls of one caller rightly wait on its customer row.
      call_id: callId, direction: 'inbound', from_number: `+1312555${String(1000 + (caller++ % 9000)).padStart(4, '0')}`, to_number: phone,
      start_timestamp: startMs, end_timestamp: startMs + 60_000, disconnection_reason: 'agent_hangup',
      ...(event === 'call_started' ? {} : { call_analysis: { custom_analysis_data: { outcome: outcome ?? 'lead', service_type: 'AC repair' } } }),
    },
  });

test('after hours: judged by the hours in force when the call was finalised, not by today\'s', async () => {
  const tz = 'America/Chicago';
  const { loc, phone, token } = await voiceLocation(tz, 1);
  const all = (open: string, close: string) => JSON.stringify([0, 1, 2, 3, 4, 5, 6].map((day) => ({ day, open, close })));
  await callFn(t.owner, 'api.business_hours_put', [hashToken(token), loc.id, all('08:00', '18:00')]);
  const eight = await localMs(tz, -1, '20:00'); // yesterday 20:00: closed under 08:00-18:00
  // Settled at once, under 08:00-18:00: after hours for good.
  await t.owner.query('select app.voice_post_call($1)', [postCall(phone, 'settled', 'call_analyzed', eight)]);
  // Started under 08:00-18:00, settled after the hours became 00:00-23:59: not after hours.
  await t.owner.query('select app.voice_post_call($1)', [postCall(phone, 'later', 'call_started', eight)]);
  const flags = async () => (await t.owner.query(
    'select platform_call_id, after_hours from app.calls where location_id = $1 order by platform_call_id', [loc.id])).rows;
  expect(await flags()).toEqual([{ platform_call_id: 'later', after_hours: true }, { platform_call_id: 'settled', after_hours: true }]);
  await callFn(t.owner, 'api.business_hours_put', [hashToken(token), loc.id, all('00:00', '23:59')]);
  await t.owner.query('select app.voice_post_call($1)', [postCall(phone, 'later', 'call_analyzed', eight)]);
  expect(await flags()).toEqual([{ platform_call_id: 'later', after_hours: false }, { platform_call_id: 'settled', after_hours: true }]);

  const out = await callFn<any>(t.owner, 'api.insights', [hashToken(token), loc.id, 7]);
  expect(out.after_hours_calls).toBe(1);
  expect(out).toEqual(await callFn(t.owner, 'app.insights_direct', [loc.id, 7, new Date()]));
});

test('a new timezone re-buckets the location\'s calls in the same transaction', async () => {
  const { loc, phone, token } = await voiceLocation('UTC', 2);
  const start = await localMs('UTC', -2, '23:40'); // UTC 23:40: the next day 05:10 in Kolkata
  await t.owner.query('select app.voice_post_call($1)', [postCall(phone, 'tz1', 'call_analyzed', start)]);
  const before = await callFn<any>(t.owner, 'app.insights_json', [loc.id, 7, new Date()]);
  expect(before.per_hour[23].share).toBe(1);
  await callFn(t.owner, 'api.location_patch', [hashToken(token), loc.id, { timezone: 'Asia/Kolkata' }]);
  const after = await callFn<any>(t.owner, 'app.insights_json', [loc.id, 7, new Date()]);
  expect(after.timezone).toBe('Asia/Kolkata');
  expect(after.per_hour[5].share).toBe(1);
  expect(after.per_day.find((d: any) => d.calls === 1).date).not.toBe(before.per_day.find((d: any) => d.calls === 1).date);
  expect(after).toEqual(await callFn(t.owner, 'app.insights_direct', [loc.id, 7, new Date()]));
});

test('concurrent calls of one location never wait on each other for the rollup; the journal stays short', async () => {
  const { loc, phone } = await voiceLocation('America/New_York', 3);
  const start = Date.now() - 120_000;
  const a = await t.owner.connect();
  const b = await t.owner.connect();
  try {
    // A settles a call (same location, same hour as B's) and holds its transaction open.
    await a.query('begin');
    await a.query('select app.voice_post_call($1)', [postCall(phone, 'held', 'call_analyzed', start, 'booked')]);
    // B does the same and must get through without waiting for A.
    await b.query("set lock_timeout = '3s'");
    for (let i = 0; i < 40; i++) await b.query('select app.voice_post_call($1)', [postCall(phone, `b${i}`, 'call_analyzed', start)]);
    await a.query('commit');
  } finally {
    await b.query('reset lock_timeout');
    a.release();
    b.release();
  }
  // Two local days: the calls began two minutes ago, which is yesterday in New York in the first
  // two minutes after its midnight.
  const out = await callFn<any>(t.owner, 'app.insights_json', [loc.id, 2, new Date()]);
  expect(out.calls_answered).toBe(41);
  expect(out.leads_captured).toBe(41);
  expect(out).toEqual(await callFn(t.owner, 'app.insights_direct', [loc.id, 2, new Date()]));
  const { rows } = await t.owner.query('select count(*)::int n from app.insights_journal where location_id = $1', [loc.id]);
  expect(rows[0].n).toBeLessThan(64); // folded into the hourly rows every 32 journal rows
});
