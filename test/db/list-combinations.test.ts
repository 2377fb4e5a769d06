/**
 * Filters in combination (docs/performance.md, "Filters in combination"): a combination that
 * matches few rows, each of whose filters alone matches many, is tested in an index that holds
 * both columns, not by fetching every row one index leads to; and the filtered statement is planned
 * for each request's values, so plpgsql's generic plan (kept after five calls, in which
 * `f is null or column = f` reaches no index) never answers it.
 */
import pg from 'pg';
import { hashToken } from '../../src/auth/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { createLocation, mintKey, seedDemo, type TestLocation } from '../support/harness.js';
import { explainAsApi, planNodes } from '../support/plans.js';

const db = useTestDatabase({ pool: true });
let big: TestLocation;
let token: string;
let emergencyOnly: string;

beforeAll(async () => {
  big = await createLocation(db.owner);
  ({ token } = await mintKey(db.owner, big.id));
  // 30,000 calls: the demo seed makes no spam call an emergency.
  await seedDemo(db.owner, big.slug, 30_000, { customers: 50 });
  const c = await db.owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [big.id]);
    await c.query("insert into app.leads (location_id, name, phone) values ($1, 'Live Lead', '+14155550199')", [big.id]);
    // An endpoint for every event, and one that only gets call.emergency: 3,000 attempts among 20,000.
    const endpoint = async (url: string, events: string[]) => (await c.query(`insert into app.webhook_endpoints (location_id, url, events, secret)
      values ($1, $2, $3, 'whsec_' || repeat('a', 43)) returning id`, [big.id, url, events])).rows[0].id as string;
    const all = await endpoint('https://hooks.example.com/all', ['call.ended', 'lead.created', 'booking.created', 'call.emergency']);
    emergencyOnly = await endpoint('https://hooks.example.com/emergency', ['call.emergency']);
    await c.query(`insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, url, status, created_at)
      select $1, e.id, case when g % 20 = 0 then $3::uuid else $2::uuid end,
             case when g % 20 = 0 or g % 20 = 10 then 'call.emergency' when g % 2 = 0 then 'call.ended' else 'lead.created' end,
             'https://hooks.example.com/w', 'delivered', now() - g * interval '1 minute'
        from (select id from app.events where location_id = $1 limit 1) e, generate_series(1, 60000) g`, [big.id, all, emergencyOnly]);
    await c.query('commit');
  } finally {
    c.release();
  }
  await db.owner.query('vacuum (analyze) app.calls, app.webhook_deliveries');
});

/** Runs `call` seven times (past plpgsql's five tries, and the one after) and returns the plans of the statements reading `table`. */
async function sevenPlans(table: string, call: (c: pg.Client) => Promise<pg.QueryResult>): Promise<{ results: pg.QueryResult[]; plans: string[] }> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    await explainAsApi(c, { buffers: true, json: true });
    const plans: string[] = [];
    const results: pg.QueryResult[] = [];
    c.on('notice', (n: { message?: string }) => { if (n.message?.includes(`from ${table} `)) plans.push(n.message); });
    for (let i = 0; i < 7; i++) results.push(await call(c));
    return { results, plans };
  } finally {
    await c.end();
  }
}

/** Rows fetched from the table only to be thrown away: a filter's removals in any scan but an index-only one without heap fetches. */
function rowsFetchedAndDropped(plan: string): number {
  return planNodes(plan).filter((n) => !(n['Node Type'] === 'Index Only Scan' && n['Heap Fetches'] === 0))
    .reduce((sum, n) => sum + (n['Rows Removed by Filter'] ?? 0), 0);
}

test('GET calls with outcome and is_emergency together reads the indexes, not each call of the outcome', async () => {
  const { rows: [n] } = await db.owner.query(`select count(*) filter (where outcome = 'spam')::int as spam,
      count(*) filter (where is_emergency)::int as emergencies, count(*) filter (where outcome = 'spam' and is_emergency)::int as both
    from app.calls where location_id = $1`, [big.id]);
  expect([n.spam > 1000, n.emergencies > 300, n.both]).toEqual([true, true, 0]);
  for (const filters of [{ outcome: 'spam', is_emergency: true }, { is_emergency: true }, { outcome: 'booked', is_emergency: true }, { outcome: 'spam', is_emergency: false }]) {
    const { results, plans } = await sevenPlans('app.calls', (c) => c.query('select * from api.calls_list($1, $2, $3, $4)', [hashToken(token), big.id, filters, {}]));
    expect([filters, plans.length, plans.map(rowsFetchedAndDropped).filter((x) => x > 100)]).toEqual([filters, 7, []]);
    // The statement's buffers: a page's calls and the index pages that lead to them (1,434 on the
    // outcome index alone; 2,419 on the generic plan).
    expect([filters, plans.map((p) => planNodes(p)[0]['Shared Hit Blocks'] + planNodes(p)[0]['Shared Read Blocks']).filter((b) => b > 300)]).toEqual([filters, []]);
    const want = (await db.owner.query(`select id from app.calls where location_id = $1 and ($2::text is null or outcome = $2)
        and is_emergency = $3 order by created_at desc, id desc limit 50`, [big.id, filters.outcome ?? null, filters.is_emergency])).rows.map((r) => r.id);
    for (const page of results) expect([filters, page.rows[0].data.map((x: { id: string }) => x.id)]).toEqual([filters, want]);
  }
});

test('GET webhook-deliveries with endpoint_id and event together tests the event in the endpoint\'s index', async () => {
  // The emergency-only endpoint has 3,000 attempts and none of lead.created, of which the location has 27,000.
  for (const [filters, rows] of [[{ endpoint_id: emergencyOnly, event: 'lead.created' }, 0], [{ endpoint_id: emergencyOnly, event: 'call.emergency', status: 'delivered' }, 50]] as const) {
    const { results, plans } = await sevenPlans('app.webhook_deliveries', (c) =>
      c.query('select api.webhook_deliveries_list($1, $2, $3, $4) as r', [hashToken(token), big.id, filters, {}]));
    expect([filters, plans.length, plans.map(rowsFetchedAndDropped).filter((x) => x > 100)]).toEqual([filters, 7, []]);
    const want = (await db.owner.query(`select id from app.webhook_deliveries where location_id = $1 and endpoint_id = $2 and event = $3
        and ($4::text is null or status = $4) order by created_at desc, id desc limit 50`,
      [big.id, filters.endpoint_id, filters.event, 'status' in filters ? filters.status : null])).rows.map((r) => r.id);
    expect(want).toHaveLength(rows);
    for (const page of results) expect([filters, page.rows[0].r.data.map((x: { id: string }) => x.id)]).toEqual([filters, want]);
  }
});
