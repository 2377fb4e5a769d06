/** Insights (docs/api-contract.md §10) against a hand-computed fixture in America/Chicago. */
import { ALL_SCOPES, createLocation, mintKey, request, startTestApi, type TestApi, type TestLocation } from '../support/harness.js';

let t: TestApi;
let A: TestLocation;
let B: TestLocation;
let tok: string;
const TZ = 'America/Chicago';

/** Inserts a call at local day offset (0 = today) and local time, computed by Postgres in the location zone. */
async function call(dayOffset: number, time: string, attrs: { outcome: string; value?: number; service?: string | null; emergency?: boolean; loc?: string }) {
  const { rows } = await t.owner.query(
    `insert into app.calls (location_id, platform_call_id, outcome, estimated_value, service_type, is_emergency, started_at)
     values ($1, gen_random_uuid()::text, $2, $3, $4, $5,
             (((now() at time zone $6)::date + $7::int) + $8::time) at time zone $6)
     returning id`,
    [attrs.loc ?? A.id, attrs.outcome, attrs.value ?? null, attrs.service ?? null, attrs.emergency ?? false, TZ, dayOffset, time],
  );
  return rows[0].id as string;
}
const lead = (loc: string, callId: string) =>
  t.owner.query("insert into app.leads (location_id, call_id, name, phone) values ($1, $2, 'X', '+15125550100')", [loc, callId]);

const localDay = async (offset: number) =>
  (await t.owner.query("select to_char((now() at time zone $1)::date + $2::int, 'YYYY-MM-DD') d", [TZ, offset])).rows[0].d as string;

beforeAll(async () => {
  t = await startTestApi();
  A = await createLocation(t.owner, { timezone: TZ });
  B = await createLocation(t.owner, { timezone: TZ });
  ({ token: tok } = await mintKey(t.owner, A.id));
  await t.owner.query(
    `insert into app.business_hours (location_id, day, open, close) select $1, d, '08:00', '18:00' from generate_series(0, 6) d`, [A.id]);

  // Window with days=3: today-2 … today (local).
  const c1 = await call(-2, '23:30', { outcome: 'booked', value: 200, service: 'AC repair' }); // first day, late: after hours
  const c0 = await call(-3, '23:30', { outcome: 'booked', value: 999, service: 'AC repair' }); // the day before: outside (UTC says first day)
  const c3 = await call(0, '10:00', { outcome: 'lead', service: 'AC repair' });
  await call(0, '22:00', { outcome: 'spam', service: 'Scam', emergency: true }); // spam: excluded from rates, shares, services; after hours counts it
  await call(-1, '20:00', { outcome: 'dropped', service: 'Furnace', emergency: true }); // after hours, not answered
  await call(-1, '09:00', { outcome: 'transferred', value: 500, emergency: true }); // not booked: no revenue; no service
  await call(0, '10:00', { outcome: 'booked', value: 10000, loc: B.id }); // another location
  await lead(A.id, c1);
  await lead(A.id, c3);
  await lead(A.id, c0);
});
afterAll(() => t.close());

const get = (q: string, token = tok, loc = A.id) => request(t.baseUrl, 'GET', `/api/v1/locations/${loc}/insights${q}`, { token });

test('hand-computed 3-day window', async () => {
  const res = await get('?days=3');
  expect(res.status).toBe(200);
  const d = res.body.data;
  const [d0, d1, d2] = [await localDay(-2), await localDay(-1), await localDay(0)];
  expect(d).toMatchObject({
    calls_answered: 3, // booked, lead, transferred
    leads_captured: 2,
    revenue_recovered: 200,
    spam_blocked: 1,
    emergencies: 3, // counts every inbound call flagged, spam included
    answer_rate_pct: 75, // 3 of 4 non-spam
    after_hours_calls: 3, // 23:30, 20:00 and the 22:00 spam call (every inbound call, spam included)
    from: d0,
    to: d2,
    timezone: TZ,
  });
  expect(d.per_day).toEqual([
    { date: d0, calls: 1, revenue: 200 },
    { date: d1, calls: 2, revenue: 0 },
    { date: d2, calls: 1, revenue: 0 },
  ]);
  expect(d.per_hour).toHaveLength(24);
  expect(d.per_hour.map((h: any) => h.hour)).toEqual([...Array(24).keys()]);
  const share = Object.fromEntries(d.per_hour.map((h: any) => [h.hour, h.share]));
  expect([share[9], share[10], share[20], share[23], share[22]]).toEqual([0.25, 0.25, 0.25, 0.25, 0]);
  expect(d.per_hour.reduce((s: number, h: any) => s + h.share, 0)).toBeCloseTo(1, 10);
  expect(d.services).toEqual([{ service: 'AC repair', pct: 66.7 }, { service: 'Furnace', pct: 33.3 }]);
});

test('days=4 takes in the previous day; range is an alias; default is 30', async () => {
  const four = (await get('?days=4')).body.data;
  expect(four.revenue_recovered).toBe(1199);
  expect(four.leads_captured).toBe(3);
  expect(four.per_day).toHaveLength(4);
  expect((await get('?range=3')).body.data).toEqual((await get('?days=3')).body.data);
  const def = (await get('')).body.data;
  expect(def.days).toBe(30);
  expect(def.per_day).toHaveLength(30);
});

test('shares sum to exactly 1 with thirds; all zero when there are no calls', async () => {
  const loc = await createLocation(t.owner, { timezone: 'Asia/Tokyo' });
  const { token } = await mintKey(t.owner, loc.id, ['insights:read']);
  const empty = (await get('?days=1', token, loc.id)).body.data;
  expect(empty).toMatchObject({ calls_answered: 0, answer_rate_pct: 0, services: [], revenue_recovered: 0, after_hours_calls: 0 });
  expect(empty.per_hour.every((h: any) => h.share === 0)).toBe(true);
  expect(empty.per_day).toHaveLength(1);
  for (const time of ['01:00', '02:00', '03:00']) {
    await t.owner.query(
      `insert into app.calls (location_id, platform_call_id, outcome, started_at)
       values ($1, gen_random_uuid()::text, 'other', ((now() at time zone 'Asia/Tokyo')::date + $2::time) at time zone 'Asia/Tokyo')`,
      [loc.id, time]);
  }
  const d = (await get('?days=1', token, loc.id)).body.data;
  const total = d.per_hour.reduce((s: number, h: any) => s + Math.round(h.share * 10000), 0);
  expect(total).toBe(10000);
  expect(d.after_hours_calls).toBe(3); // no business hours: every day is closed
});

test('validation, scope, other location', async () => {
  for (const q of ['?days=0', '?days=91', '?days=abc', '?days=1.5', '?range=100']) {
    const res = await get(q);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
  }
  const { token } = await mintKey(t.owner, A.id, ALL_SCOPES.filter((s) => s !== 'insights:read'));
  const res = await get('?days=3', token);
  expect(res.status).toBe(403);
  expect(res.body.error.details.required_scope).toBe('insights:read');
  expect((await get('?days=3', tok, B.id)).status).toBe(404);
});
