/**
 * The unfiltered list pages are planned once per connection, not on every request
 * (docs/performance.md "Lists: planned once per connection"). plpgsql keeps a generic plan only
 * when it costs no more than the plans made for the actual values; with a large location in the
 * table and the page size as a plain parameter it never does, and each page paid for planning
 * again. The planner's own statistics (log_planner_stats, reported to this client) count how
 * often it runs; a large location (30,000 calls, 20,000 bookings) beside a small one makes the
 * case where it used to run every time.
 * A deep page starts at its cursor in the index (auto_explain of the plan that runs), and the
 * results stay those of the filtered, per-request-planned path.
 */
import pg from 'pg';
import { hashToken } from '../../src/auth/tokens.js';
import { allCallPages, useTestDatabase } from '../support/db.js';
import { createLocation, mintKey, seedDemo, type TestLocation } from '../support/harness.js';
import { explainAsApi } from '../support/plans.js';

const db = useTestDatabase({ pool: true });
let small: TestLocation;
let smallToken: string;
let big: TestLocation;
let bigToken: string;

beforeAll(async () => {
  big = await createLocation(db.owner);
  small = await createLocation(db.owner);
  ({ token: smallToken } = await mintKey(db.owner, small.id));
  ({ token: bigToken } = await mintKey(db.owner, big.id));
  for (const [loc, calls] of [[big, 30000], [small, 120]] as const) {
    await seedDemo(db.owner, loc.slug, calls, { customers: 50 });
    // Notifications and webhook deliveries: one live lead's event, then many rows pointing at it.
    const c = await db.owner.connect();
    try {
      await c.query('begin');
      await c.query("select set_config('app.location_id', $1, true)", [loc.id]);
      await c.query("insert into app.leads (location_id, name, phone) values ($1, 'Live Lead', '+14155550199')", [loc.id]);
      await c.query(
        `insert into app.notifications (location_id, event_id, event, channel, provider, recipient, status, created_at)
         select $1, e.id, 'lead.created', 'email', 'smtp', 'owner@example.com', 'sent', now() - g * interval '1 minute'
           from (select id from app.events where location_id = $1 limit 1) e, generate_series(1, $2::int) g`,
        [loc.id, calls / 2],
      );
      await c.query(
        `insert into app.webhook_deliveries (location_id, event_id, event, url, status, created_at)
         select $1, e.id, 'lead.created', 'https://hooks.example.com/w', 'delivered', now() - g * interval '1 minute'
           from (select id from app.events where location_id = $1 limit 1) e, generate_series(1, $2::int) g`,
        [loc.id, calls / 2],
      );
      // Bookings: the demo seeder books only some calls; add more, many more for the large location.
      await c.query("select set_config('app.seeding', 'on', true)");
      await c.query(
        `insert into app.bookings (location_id, scheduled_date, created_at)
         select $1, current_date + g % 30, now() - g * interval '1 minute' from generate_series(1, $2::int) g`,
        [loc.id, loc === big ? 20_000 : 60]);
      await c.query('commit');
    } finally {
      c.release();
    }
  }
  await db.owner.query('analyze');
});
/** Runs `sql` `times` times inside one DO block; returns how often the planner ran meanwhile. */
async function plannerRuns(c: pg.Client, sql: string, times: number): Promise<number> {
  let runs = 0;
  const onNotice = (n: { message?: string }) => { if (n.message === 'PLANNER STATISTICS') runs += 1; };
  c.on('notice', onNotice);
  try {
    await c.query(`do $$ begin for i in 1..${times} loop perform ${sql}; end loop; end $$`);
  } finally {
    c.removeListener('notice', onNotice);
  }
  return runs;
}

/** Each list without filters, as SQL for a DO block (token hash, location, page), and the table it reads. */
const lists = [
  ['calls', 'app.calls', (h: string, l: string, p: string) => `api.calls_list('${h}', '${l}', '{}', '${p}')`],
  ['leads', 'app.leads', (h: string, l: string, p: string) => `api.leads_list('${h}', '${l}', null, '${p}')`],
  ['bookings', 'app.bookings', (h: string, l: string, p: string) => `api.bookings_list('${h}', '${l}', null, '${p}')`],
  ['notifications', 'app.notifications', (h: string, l: string, p: string) => `api.notifications_list('${h}', '${l}', '${p}', false)`],
  ['webhook deliveries', 'app.webhook_deliveries', (h: string, l: string, p: string) => `api.webhook_deliveries_list('${h}', '${l}', '{}', '${p}')`],
] as const;

test.each(lists)('GET %s without filters is planned once per connection', async (_name, _table, sql) => {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    // log_planner_stats needs the owner (a superuser here); the calls then run as the API role.
    await c.query('set log_planner_stats = on');
    await c.query('set client_min_messages = log');
    await c.query('set role switchboard_api');
    const call = sql(hashToken(smallToken), small.id, '{}');
    // The first executions are planned for their values (plpgsql's rule: five), then the choice is made.
    expect(await plannerRuns(c, call, 6)).toBeGreaterThan(0);
    // From here on nothing is planned again: the planner runs no more often than for the DO block
    // and its loop around a constant.
    const floor = await plannerRuns(c, '1', 20);
    expect(await plannerRuns(c, call, 20)).toBeLessThanOrEqual(floor);
  } finally {
    await c.end();
  }
});

const deepPages = [
  ...lists,
  // A filtered page, planned for its values (every delivery seeded here is delivered).
  ['webhook deliveries?status=delivered', 'app.webhook_deliveries',
    (h: string, l: string, p: string) => `api.webhook_deliveries_list('${h}', '${l}', '{"status": "delivered"}', '${p}')`],
] as const;

test.each(deepPages)('a deep page of %s starts at its cursor in the index', async (_name, table, sql) => {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const deep = 40;
    const cursor = (await db.owner.query(
      `select app.cursor_encode(created_at, id) as c from ${table} where location_id = $1 order by created_at desc, id desc offset $2 limit 1`,
      [small.id, deep - 1])).rows[0].c;
    const call = sql(hashToken(smallToken), small.id, JSON.stringify({ cursor, limit: 5 }));
    await c.query('set role switchboard_api');
    // Past plpgsql's five tries, so an unfiltered page runs the plan kept for the connection.
    await c.query(`do $$ begin for i in 1..8 loop perform ${call}; end loop; end $$`);
    await c.query('reset role');
    await explainAsApi(c);
    const plans: string[] = [];
    const onNotice = (n: { message?: string }) => { if (n.message?.includes(`from ${table} `)) plans.push(n.message); };
    c.on('notice', onNotice);
    await c.query(`do $$ begin perform ${call}; end $$`);
    c.removeListener('notice', onNotice);
    expect(plans).toHaveLength(1);
    // The keyset bound is an index condition, so the scan reads the page and one row more,
    // instead of filtering its way past the `deep` newer rows. (A filtered deliveries page reads
    // its keys first, 000064: an index-only scan once vacuum has set the visibility map.)
    expect(plans[0]).toMatch(/Index Cond: .*ROW\(created_at, id\) < /);
    expect(plans[0]).not.toMatch(/Rows Removed by Filter/);
    expect(plans[0]).toMatch(/Index (?:Only )?Scan[^\n]*\(actual time=[^)]* rows=6 /);
  } finally {
    await c.end();
  }
});

test('the planned-once pages equal the per-request-planned (filtered) path, cursor by cursor', async () => {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await c.query('set role switchboard_api');
    const h = hashToken(smallToken);
    // Calls: the unfiltered walk equals the union of the per-outcome (filtered) walks, in order.
    const walk = (filters: object) => allCallPages(c, h, small.id, filters, 7);
    const all = await walk({});
    expect(all).toHaveLength(120);
    expect(new Set(all.map((x) => x.id)).size).toBe(all.length);
    const byOutcome: { id: string; created_at: string }[] = [];
    for (const outcome of ['booked', 'transferred', 'lead', 'spam', 'dropped', 'other']) byOutcome.push(...await walk({ outcome }));
    const order = (xs: { id: string; created_at: string }[]) =>
      [...xs].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((x) => x.id);
    expect(byOutcome).toHaveLength(all.length);
    expect(all.map((x) => x.id)).toEqual(order(byOutcome));
    // Leads: the unfiltered first page is the newest 50 of the location, as the filtered path sees them.
    const leads = (await c.query('select * from api.leads_list($1, $2, null, $3)', [h, small.id, { limit: 200 }])).rows[0].data;
    const statuses = [...new Set(leads.map((l: any) => l.status))] as string[];
    const perStatus: any[] = [];
    for (const status of statuses) {
      perStatus.push(...(await c.query('select * from api.leads_list($1, $2, $3, $4)', [h, small.id, status, { limit: 200 }])).rows[0].data);
    }
    expect(leads.length).toBeGreaterThan(0);
    expect(order(perStatus)).toEqual(leads.map((l: any) => l.id));
  } finally {
    await c.end();
  }
});

test('filters that match few of a large location\'s rows read those rows, not the location (an index each)', async () => {
  // A disabled endpoint's attempts, all older than the location's 15,000 others (the planner, taking
  // them for spread out, walked the newest first), and a connection's few failed syncs.
  const c0 = await db.owner.connect();
  let endpoint: string;
  try {
    await c0.query('begin');
    await c0.query("select set_config('app.location_id', $1, true)", [big.id]);
    endpoint = (await c0.query(`insert into app.webhook_endpoints (location_id, url, events, secret, active)
      values ($1, 'https://hooks.example.com/old', '{lead.created}', 'whsec_' || repeat('a', 43), false) returning id`, [big.id])).rows[0].id;
    await c0.query(`insert into app.webhook_deliveries (location_id, endpoint_id, event_id, event, url, status, created_at)
      select $1, $2, e.id, 'lead.created', 'https://hooks.example.com/old', 'failed', now() - interval '300 days' - g * interval '1 minute'
        from (select id from app.events where location_id = $1 limit 1) e, generate_series(1, 3000) g`, [big.id, endpoint]);
    const integration = (await c0.query(`insert into app.integrations (location_id, provider) values ($1, 'jobber') returning id`, [big.id])).rows[0].id;
    await c0.query(`insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action, status, created_at)
      select $1, $2, 'jobber', 'lead', gen_random_uuid(), 'update', case when g <= 3 then 'failed' else 'synced' end, now() - g * interval '1 minute'
        from generate_series(1, 5000) g`, [big.id, integration]);
    await c0.query('commit');
  } finally {
    c0.release();
  }
  await db.owner.query('analyze app.webhook_deliveries, app.integration_syncs, app.bookings');
  const h = hashToken(bigToken);
  const cases: Array<[string, string, number]> = [
    // 20,000 bookings, none cancelled: there was no status index.
    ['app.bookings', `api.bookings_list('${h}', '${big.id}', 'cancelled', '{}')`, 0],
    ['app.webhook_deliveries', `api.webhook_deliveries_list('${h}', '${big.id}', '{"endpoint_id": "${endpoint!}"}', '{}')`, 51],
    ['app.integration_syncs', `api.integration_syncs_list('${h}', '${big.id}', 'jobber', '{"status": "failed"}', '{}')`, 3],
  ];
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await explainAsApi(c);
    for (const [table, call, rows] of cases) {
      const plans: string[] = [];
      const onNotice = (n: { message?: string }) => { if (n.message?.includes(`from ${table} `)) plans.push(n.message); };
      c.on('notice', onNotice);
      // Past plpgsql's five tries, and the one after: whichever plan it keeps.
      for (let i = 0; i < 7; i++) await c.query(`do $$ begin perform ${call}; end $$`);
      c.removeListener('notice', onNotice);
      expect([table, plans.length]).toEqual([table, 7]);
      for (const plan of plans) {
        // The rows it answers, read through an index that holds the filter: not a walk of the location.
        expect([table, plan.match(/Rows Removed by Filter: (\d+)/g)?.map((m) => Number(m.split(': ')[1])).filter((n) => n > 100) ?? []]).toEqual([table, []]);
        expect([table, new RegExp(`actual time=[^)]* rows=${rows} `).test(plan)]).toEqual([table, true]);
      }
    }
  } finally {
    await c.end();
  }
});

test('GET calls?from=&to= reads the smaller of the window and the calls newer than it, and pages as the walk does', async () => {
  // 30,000 calls over 30 days: a day at the far end has about 1,000 calls and 29,000 newer ones,
  // which the page-order walk (created_at) used to read and throw away.
  const { rows: [span] } = await db.owner.query(
    `select min(started_at) as first, max(started_at) as last from app.calls where location_id = $1`, [big.id]);
  const day = 86_400_000;
  const first = new Date(span.first);
  const last = new Date(span.last);
  const h = hashToken(bigToken);
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const oldDay = { from: first.toISOString(), to: new Date(first.getTime() + day).toISOString() };
    await explainAsApi(c);
    const plans: string[] = [];
    // The page's statement (the counts that choose the read are bounded and may scan).
    const onNotice = (n: { message?: string }) => { if (n.message?.includes('app.call_summary_js(c)')) plans.push(n.message); };
    c.on('notice', onNotice);
    const call = `api.calls_list('${h}', '${big.id}', '${JSON.stringify(oldDay)}', '{}')`;
    // Past plpgsql's five tries, and the one after: whichever plans it keeps.
    for (let i = 0; i < 7; i++) await c.query(`do $$ begin perform ${call}; end $$`);
    c.removeListener('notice', onNotice);
    expect(plans).toHaveLength(7);
    for (const plan of plans) {
      expect(plan.match(/Rows Removed by Filter: (\d+)/g)?.map((m) => Number(m.split(': ')[1])).filter((n) => n > 100) ?? []).toEqual([]);
      expect(plan).toMatch(/Scan (using|on) calls_location_started_idx/);
    }
    await c.query('reset role');
    await c.query('set auto_explain.log_min_duration = -1');
    await c.query('set role switchboard_api');

    // Every page of a window, cursor by cursor, is the window in the page order: the window read
    // (far back), the walk (the newest day), both ends open, and with another filter beside.
    const walk = async (filters: object) => (await allCallPages(c, h, big.id, filters, 200)).map((x) => x.id);
    const expected = async (from: Date | null, to: Date | null, outcome: string | null) => (await db.owner.query(
      `select id from app.calls where location_id = $1 and ($2::timestamptz is null or started_at >= $2)
          and ($3::timestamptz is null or started_at < $3) and ($4::text is null or outcome = $4)
        order by created_at desc, id desc`, [big.id, from, to, outcome])).rows.map((r) => r.id);
    const cases: Array<[Date | null, Date | null, string | null]> = [
      [first, new Date(first.getTime() + day), null],
      [first, new Date(first.getTime() + 2 * day), 'booked'],
      [null, new Date(first.getTime() + day), null],
      [new Date(last.getTime() - day), null, null],
      [new Date(last.getTime() - day), new Date(last.getTime() + day), null],
    ];
    for (const [from, to, outcome] of cases) {
      const want = await expected(from, to, outcome);
      expect(want.length).toBeGreaterThan(50);
      const filters = { ...(from ? { from: from.toISOString() } : {}), ...(to ? { to: to.toISOString() } : {}), ...(outcome ? { outcome } : {}) };
      expect([filters, await walk(filters)]).toEqual([filters, want]);
    }
  } finally {
    await c.end();
  }
});

test('GET calls?from=&to= finds a window\'s late-ingested calls at the top of the page order without reading the window', async () => {
  // Calls created now that started a month ago (a late import): the page order has them first, so
  // a bounded walk of it answers; reading and sorting the whole window (000059) cost 40 times more.
  const { rows: [span] } = await db.owner.query(`select min(started_at) as first from app.calls where location_id = $1`, [big.id]);
  const first = new Date(span.first);
  const c0 = await db.owner.connect();
  try {
    await c0.query('begin');
    await c0.query("select set_config('app.location_id', $1, true)", [big.id]);
    await c0.query(`insert into app.calls (location_id, platform_call_id, outcome, started_at, duration_sec)
      select $1, 'late-' || g, 'lead', $2::timestamptz + g * interval '1 minute', 60 from generate_series(1, 100) g`, [big.id, first]);
    await c0.query('commit');
  } finally {
    c0.release();
  }
  const window = { from: first.toISOString(), to: new Date(first.getTime() + 86_400_000).toISOString() };
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await explainAsApi(c);
    const plans: string[] = [];
    const onNotice = (n: { message?: string }) => { if (n.message?.includes('from app.calls ')) plans.push(n.message); };
    c.on('notice', onNotice);
    const pages: any[] = [];
    for (let i = 0; i < 7; i++) {
      pages.push((await c.query('select * from api.calls_list($1, $2, $3, $4)', [hashToken(bigToken), big.id, window, {}])).rows[0]);
    }
    c.removeListener('notice', onNotice);
    expect(plans.length).toBeGreaterThan(0);
    expect(plans.filter((p) => /calls_location_started_idx/.test(p))).toEqual([]);
    const want = (await db.owner.query(
      `select id from app.calls where location_id = $1 and started_at >= $2 and started_at < $3 order by created_at desc, id desc limit 50`,
      [big.id, window.from, window.to])).rows.map((r) => r.id);
    for (const page of pages) expect(page.data.map((x: { id: string }) => x.id)).toEqual(want);
    const late = new Set((await db.owner.query(`select id from app.calls where location_id = $1 and platform_call_id like 'late-%'`, [big.id])).rows.map((r) => r.id));
    expect(want.filter((id: string) => !late.has(id))).toEqual([]);
  } finally {
    await c.end();
  }
});
