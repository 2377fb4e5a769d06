/**
 * GET calls by date, a window too large to read whole and far back (docs/performance.md, "Calls by
 * date: a window far back"): its page is read from the page order near the window, six hours each
 * side, plus the calls whose record was made more than six hours from their start (late imports,
 * recovery, a platform clock ahead), from their own index. Before, the page order was walked from
 * the newest call, reading every newer call (a month 60 to 30 days back in 1 M calls: 286 ms).
 */
import pg from 'pg';
import { hashToken } from '../../src/auth/tokens.js';
import { allCallPages, useTestDatabase } from '../support/db.js';
import { createLocation, mintKey, seedDemo, type TestLocation } from '../support/harness.js';
import { explainAsApi } from '../support/plans.js';

const db = useTestDatabase({ pool: true });
const DAY = 86_400_000;
let loc: TestLocation;
let token: string;
let first: Date;

beforeAll(async () => {
  loc = await createLocation(db.owner);
  ({ token } = await mintKey(db.owner, loc.id));
  // 12,000 calls over 30 days: about 400 a day.
  await seedDemo(db.owner, loc.slug, 12_000, { customers: 50 });
  first = new Date((await db.owner.query('select min(started_at) as t from app.calls where location_id = $1', [loc.id])).rows[0].t);
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc.id]);
    // In the window (days 2 to 12): 40 calls imported today; 40 whose record is two days older
    // than their start; 40 made five hours after their start, inside the margin.
    await c.query(`insert into app.calls (location_id, platform_call_id, outcome, is_emergency, started_at, duration_sec, created_at)
      select $1, 'off-' || g, (array['lead', 'booked'])[1 + g % 2], g % 3 = 0, $2::timestamptz + g * interval '6 hours',
             60, case g % 3 when 0 then now() when 1 then $2::timestamptz + g * interval '6 hours' - interval '2 days'
                                else $2::timestamptz + g * interval '6 hours' + interval '5 hours' end
        from generate_series(1, 120) g`, [loc.id, new Date(first.getTime() + 2 * DAY)]);
    // At the window's two ends, made exactly six hours from their start (read from the page order
    // near the window) and a millisecond more (read from the small index).
    await c.query(`insert into app.calls (location_id, platform_call_id, outcome, started_at, duration_sec, created_at)
      select $1, 'edge-' || e.n, 'lead', e.started, 60, e.started + e.lag
        from (values (1, $2::timestamptz, interval '-6 hours'), (2, $2::timestamptz, interval '-06:00:00.001'),
                     (3, $3::timestamptz - interval '1 millisecond', interval '6 hours'),
                     (4, $3::timestamptz - interval '1 millisecond', interval '06:00:00.001')) e(n, started, lag)`,
    [loc.id, new Date(first.getTime() + 2 * DAY), new Date(first.getTime() + 12 * DAY)]);
    await c.query('commit');
  } finally {
    c.release();
  }
  await db.owner.query('analyze app.calls');
});

const iso = (d: Date | null) => d?.toISOString();

const pages = async (c: pg.Client, filters: object) => (await allCallPages(c, hashToken(token), loc.id, filters, 200)).map((x) => x.id);

const reference = async (f: { from?: string; to?: string; outcome?: string; is_emergency?: boolean }) => (await db.owner.query(
  `select id from app.calls where location_id = $1 and ($2::timestamptz is null or started_at >= $2)
      and ($3::timestamptz is null or started_at < $3) and ($4::text is null or outcome = $4)
      and ($5::boolean is null or is_emergency = $5)
    order by created_at desc, id desc`, [loc.id, f.from ?? null, f.to ?? null, f.outcome ?? null, f.is_emergency ?? null])).rows.map((r) => r.id);

test('a large window far back is read near its place in the page order, not behind every newer call', async () => {
  const window = { from: iso(new Date(first.getTime() + 2 * DAY)), to: iso(new Date(first.getTime() + 12 * DAY)) };
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await explainAsApi(c);
    const plans: string[] = [];
    c.on('notice', (n: { message?: string }) => { if (n.message?.includes('app.call_summary_js(c)')) plans.push(n.message); });
    const got: any[] = [];
    // Past plpgsql's five tries, and the one after.
    for (let i = 0; i < 7; i++) got.push((await c.query('select * from api.calls_list($1, $2, $3, $4)', [hashToken(token), loc.id, window, {}])).rows[0]);
    expect(plans).toHaveLength(7);
    for (const plan of plans) {
      // About 20 days of newer calls (8,000) were read and thrown away; now the six hours after
      // the window (about 100) at most.
      expect(plan.match(/Rows Removed by Filter: (\d+)/g)?.map((m) => Number(m.split(': ')[1])).filter((n) => n > 400) ?? []).toEqual([]);
      expect(plan).toMatch(/calls_location_off_time_idx/);
    }
    const want = (await reference(window)).slice(0, 50);
    for (const page of got) expect(page.data.map((x: { id: string }) => x.id)).toEqual(want);
  } finally {
    await c.end();
  }
});

test('every page of a window, cursor by cursor, is the window in the page order: calls made far from their start included', async () => {
  const at = (days: number) => iso(new Date(first.getTime() + days * DAY));
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const cases = [
      { from: at(2), to: at(12) },
      { from: at(2), to: at(12), outcome: 'booked' },
      { from: at(2), to: at(12), is_emergency: true },
      { to: at(12) },
      { from: at(2) },
      { from: at(5), to: at(25) },
    ];
    const edges = new Set((await db.owner.query(`select id from app.calls where location_id = $1 and platform_call_id like 'edge-%'`, [loc.id])).rows.map((r) => r.id));
    // Two of the four edges are in the small index, two are not.
    const indexed = (await db.owner.query(`select platform_call_id from app.calls where location_id = $1 and platform_call_id like 'edge-%'
      and started_at is not null and (created_at - started_at > interval '6 hours' or started_at - created_at > interval '6 hours') order by 1`, [loc.id])).rows;
    expect(indexed.map((r) => r.platform_call_id)).toEqual(['edge-2', 'edge-4']);
    const off = new Set((await db.owner.query(`select id from app.calls where location_id = $1 and platform_call_id like 'off-%'`, [loc.id])).rows.map((r) => r.id));
    for (const filters of cases) {
      const want = await reference(filters);
      expect(want.length).toBeGreaterThan(2000 * (filters.outcome || filters.is_emergency ? 0 : 1));
      const got = await pages(c, filters);
      expect([filters, got.length, got]).toEqual([filters, want.length, want]);
      if (filters.from === at(2)) expect(got.filter((id) => off.has(id)).length).toBeGreaterThan(10);
      if (filters.from === at(2) && filters.to === at(12) && !filters.outcome && !filters.is_emergency) {
        expect(got.filter((id) => edges.has(id))).toHaveLength(4);
      }
    }
  } finally {
    await c.end();
  }
});
