/**
 * app.iso, the API's timestamp text (docs/api-contract.md: ISO 8601 UTC with milliseconds), is
 * built from a timestamp's JSON form for years 1 to 9999, which costs less than to_char
 * (migration 000065, docs/performance.md "The twenty-third round"): its text must be to_char's for
 * every timestamp, whatever the session's DateStyle and time zone, inside those years, at their
 * edges and outside them; and the lists' statements must still inline it.
 */
import { useTestDatabase } from '../support/db.js';

const db = useTestDatabase({ client: true });
const TO_CHAR = `to_char(x at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

test.each([
  ['ISO, MDY', 'UTC'], ['SQL, DMY', 'America/New_York'], ['German', 'Asia/Kathmandu'], ['Postgres, YMD', 'Pacific/Chatham'],
])('to_char\'s text for every timestamp (DateStyle %s, time zone %s)', async (style, zone) => {
  await db.client.query(`set datestyle = '${style}'; set timezone = '${zone}'`);
  const { rows } = await db.client.query(`
    with x(x) as (
      select unnest(array['infinity', '-infinity', '0001-01-01 00:00:00+00', '0001-01-01 00:00:00.999999+00',
        '0044-03-15 12:00:00+00 BC', '1969-12-31 23:59:59.9995+00', '1999-12-31 23:59:59.999999+00', '2000-01-01 00:00:00+00',
        '2026-03-08 07:00:00.1+00', '2026-11-01 05:59:59.12+00', '2026-12-31 23:59:59.0009+00',
        '9999-12-31 23:59:59.999999+00', '10000-01-01 00:00:00+00', '294276-12-31 23:59:59.999999+00']::timestamptz[])
      union all select null
      union all select timestamptz '1900-01-01 00:00:00+00' + random() * interval '200 years' from generate_series(1, 20000)
      union all select timestamptz '2026-01-01 00:00:00+00' + (n * 37) * interval '1 microsecond' from generate_series(0, 5000) n)
    select count(*) as n, count(*) filter (where app.iso(x) is distinct from ${TO_CHAR}) as differ,
           (array_agg(x::text || ' → ' || coalesce(app.iso(x), 'null') || ' / ' || coalesce(${TO_CHAR}, 'null'))
              filter (where app.iso(x) is distinct from ${TO_CHAR}))[1:5] as first
      from x`);
  expect(rows[0]).toEqual({ n: '25016', differ: '0', first: null });
  const text = (await db.client.query(`select app.iso('2026-11-29 03:04:05.0067+00') as t`)).rows[0].t;
  expect(text).toBe('2026-11-29T03:04:05.006Z');
  await db.client.query('reset datestyle; reset timezone');
});

test('a list\'s statement inlines it: no call of app.iso at run time', async () => {
  const { rows } = await db.client.query(`explain (verbose, costs off) select app.iso(c.created_at) from app.calls c`);
  const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
  expect(plan).not.toMatch(/app\.iso/);
  expect(plan).toMatch(/to_json/);
});
