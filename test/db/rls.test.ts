/**
 * Tenancy wall, proven from the catalog: every table that carries location_id (plus
 * app.locations itself) must have RLS enabled and forced, and with location A set the API role
 * can read A's rows but can neither read nor change B's. A new tenant table without a policy, or
 * without seed rows here, fails this file.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { callFn, createOwnerPool } from '../../src/db/pools.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { createLocation, mintKey, seedDemo } from '../support/harness.js';

let db: TestDatabase;
let owner: pg.Pool;
let A: string;
let B: string;
let tables: string[];

/** Gives a location one row in every tenant table, through the same functions the app uses. */
async function populate(loc: string, slug: string): Promise<void> {
  await mintKey(owner, loc, ['calls:read']);
  await callFn(owner, 'admin.member_invite', [slug, `owner-${slug}@example.com`, 'owner', 'Owner']);
  await seedDemo(owner, slug, 40, { customers: 20 });
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc]);
    // A live lead fires lead.created into the outbox (events).
    await c.query("insert into app.leads (location_id, name, phone) values ($1, 'Live Lead', '+14155550199')", [loc]);
    // A live call leaves its insights change in the journal (unless its row is the 32nd that
    // folds the journal into the rollup; then the next one stays).
    do {
      await c.query("insert into app.calls (location_id, platform_call_id, started_at) values ($1, 'live-' || gen_random_uuid(), now())", [loc]);
    } while ((await c.query('select 1 from app.insights_journal where location_id = $1', [loc])).rowCount === 0);
    await c.query(
      "insert into app.integrations (location_id, provider, webhook_url, connected_at) values ($1, 'zapier', 'https://hooks.example.com/z', now())",
      [loc],
    );
    // A field-service connection, a pending OAuth state and a sync of the live lead (docs/integrations.md).
    const fs = await c.query(
      "insert into app.integrations (location_id, provider, external_id, connected_at) values ($1, 'jobber', 'acct-1', now()) returning id",
      [loc],
    );
    await c.query(
      "insert into app.integration_oauth_states (location_id, provider, state_sha256, code_verifier_ciphertext) values ($1, 'housecall_pro', encode(sha256(gen_random_uuid()::text::bytea), 'hex'), '\\x00')",
      [loc],
    );
    await c.query(
      `insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action)
       select $1, $2, 'jobber', 'lead', l.id, 'create' from app.leads l where l.location_id = $1 limit 1`,
      [loc, fs.rows[0].id],
    );
    const ep = await c.query(
      `insert into app.webhook_endpoints (location_id, url, events, secret)
       values ($1, 'https://hooks.example.com/w', '{lead.created}', 'whsec_' || rpad('a', 43, 'b')) returning id`,
      [loc],
    );
    const ev = await c.query('select id from app.events where location_id = $1 limit 1', [loc]);
    await c.query(
      `insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, url, status)
       values ($1, $2, $3, 'lead.created', 'https://hooks.example.com/w', 'delivered')`,
      [loc, ev.rows[0].id, ep.rows[0].id],
    );
    const n = await c.query(
      `insert into app.notifications (location_id, event_id, event, channel, provider, recipient, status)
       values ($1, $2, 'lead.created', 'email', 'smtp', 'owner@example.com', 'sent') returning id`,
      [loc, ev.rows[0].id],
    );
    await c.query(
      "insert into app.notification_log (location_id, notification_id, status, detail) values ($1, $2, 'sent', '250 OK')",
      [loc, n.rows[0].id],
    );
    await c.query(
      `insert into app_private.idempotency_keys (location_id, idempotency_key, fingerprint, response_status, response_body)
       values ($1, 'retry-1', repeat('0', 64), 201, '{}')`,
      [loc],
    );
    // Scheduling: settings, a booking holding a window (its counter row), a transfer of a call.
    await c.query('insert into app.scheduling_settings (location_id, capacity) values ($1, 2)', [loc]);
    await c.query(
      `insert into app.bookings (location_id, status, scheduled_date, window_start, window_end, source)
       values ($1, 'scheduled', current_date, date_trunc('hour', now()) + interval '1 day', date_trunc('hour', now()) + interval '1 day 2 hours', 'api')`,
      [loc],
    );
    await c.query(
      `insert into app.call_transfers (location_id, call_id, status, destination, at, dedupe_key)
       select $1, id, 'started', '+15125550177', now(), 'transfer_started' from app.calls where location_id = $1 limit 1`,
      [loc],
    );
    // A call from the live lead's number, then that caller's erasure with platform deletions:
    // rows in app.erasures and app.erasure_platform_calls.
    await c.query("insert into app.calls (location_id, platform_call_id, caller_phone, started_at) values ($1, 'erased-' || gen_random_uuid(), '+14155550199', now())", [loc]);
    await c.query('commit');
  } finally {
    c.release();
  }
  await callFn(owner, 'admin.erasure_create', [slug, '+14155550199', null, null, true]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  owner = createOwnerPool(db.url, 3);
  const a = await createLocation(owner, { slug: 'loc-a' });
  const b = await createLocation(owner, { slug: 'loc-b' });
  A = a.id;
  B = b.id;
  await populate(A, 'loc-a');
  await populate(B, 'loc-b');
  const { rows } = await owner.query(`
    select c.oid::regclass::text as name
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relkind in ('r', 'p')
       and n.nspname not in ('pg_catalog', 'information_schema', 'graphile_worker', 'graphile_migrate', 'billing')
       and (c.oid = 'app.locations'::regclass
            or exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'location_id' and not a.attisdropped))
     order by 1`);
  tables = rows.map((r) => r.name);
}, 120_000);

afterAll(async () => {
  await owner.end();
  await db.drop();
});

const keyCol = (t: string) => (t === 'app.locations' ? 'id' : 'location_id');

/** Runs fn as the API role with app.location_id = loc, inside a transaction that is rolled back. */
async function asApi<T>(loc: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query('set local role switchboard_api');
    await c.query("select set_config('app.location_id', $1, true)", [loc]);
    return await fn(c);
  } finally {
    await c.query('rollback');
    c.release();
  }
}

/** Runs one statement in a savepoint; returns its row count or the SQLSTATE it failed with. */
async function attempt(c: pg.PoolClient, sql: string, params: unknown[] = []): Promise<number | string> {
  await c.query('savepoint s');
  try {
    const r = await c.query(sql, params);
    await c.query('release savepoint s');
    return r.rowCount ?? 0;
  } catch (e) {
    await c.query('rollback to savepoint s');
    return (e as { code: string }).code;
  }
}

test('the sweep finds the tenant tables', () => {
  for (const t of ['app.locations', 'app.calls', 'app.leads', 'app.api_keys', 'app.events', 'app.notification_log']) {
    expect(tables).toContain(t);
  }
});

test('every table in schema app is a tenant table (keyed by location)', async () => {
  const { rows } = await owner.query(
    "select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'app' and c.relkind in ('r','p')",
  );
  expect(rows.map((r) => r.name).sort()).toEqual([...tables].filter((t) => t.startsWith('app.')).sort());
});

test('RLS is enabled and forced on every tenant table, with a tenant policy', async () => {
  const { rows } = await owner.query(
    `select c.oid::regclass::text as name, c.relrowsecurity, c.relforcerowsecurity,
            exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'tenant_isolation') as has_policy
       from pg_class c where c.oid::regclass::text = any ($1)`,
    [tables],
  );
  expect(rows).toHaveLength(tables.length);
  for (const r of rows) expect({ table: r.name, enabled: r.relrowsecurity, forced: r.relforcerowsecurity, policy: r.has_policy })
    .toEqual({ table: r.name, enabled: true, forced: true, policy: true });
});

test('both locations have rows in every tenant table (so the checks below are meaningful)', async () => {
  for (const t of tables) {
    const { rows } = await owner.query(`select count(*) filter (where ${keyCol(t)} = $1)::int as a, count(*) filter (where ${keyCol(t)} = $2)::int as b from ${t}`, [A, B]);
    expect({ t, a: rows[0].a > 0, b: rows[0].b > 0 }).toEqual({ t, a: true, b: true });
  }
});

test('allowed side: with A set, the API role reads exactly A’s rows', async () => {
  for (const t of tables) {
    const expected = (await owner.query(`select count(*)::int as n from ${t} where ${keyCol(t)} = $1`, [A])).rows[0].n;
    const seen = await asApi(A, async (c) => (await c.query(`select count(*)::int as n, count(*) filter (where ${keyCol(t)} <> $1)::int as foreign from ${t}`, [A])).rows[0]);
    expect({ t, ...seen }).toEqual({ t, n: expected, foreign: 0 });
  }
});

test('denied side: with A set, the API role cannot read, update, delete, insert into or move rows to B', async () => {
  for (const t of tables) {
    const col = keyCol(t);
    const sample = (await owner.query(`select to_jsonb(x) as j from ${t} x where ${col} = $1 limit 1`, [B])).rows[0].j;
    const mine = (await owner.query(`select to_jsonb(x) as j from ${t} x where ${col} = $1 limit 1`, [A])).rows[0].j;
    await asApi(A, async (c) => {
      const read = await c.query(`select count(*)::int as n from ${t} where ${col} = $1`, [B]);
      expect({ t, read: read.rows[0].n }).toEqual({ t, read: 0 });
      const upd = await attempt(c, `update ${t} set ${col} = ${col} where ${col} = $1`, [B]);
      expect({ t, upd: upd === 0 || upd === '42501' }).toEqual({ t, upd: true });
      const del = await attempt(c, `delete from ${t} where ${col} = $1`, [B]);
      expect({ t, del: del === 0 || del === '42501' }).toEqual({ t, del: true });
      // A copy of B's row (fresh id where there is one) must not be insertable.
      const copy = { ...sample, ...(sample.id && t !== 'app.locations' ? { id: randomUUID() } : {}) };
      const cols = (await owner.query(
        "select string_agg(quote_ident(attname), ', ' order by attnum) as cols from pg_attribute where attrelid = $1::regclass and attnum > 0 and not attisdropped and attgenerated = ''",
        [t],
      )).rows[0].cols;
      const ins = await attempt(c, `insert into ${t} (${cols}) select ${cols} from jsonb_populate_record(null::${t}, $1)`, [copy]);
      expect({ t, ins }).toEqual({ t, ins: '42501' });
      // Nor can one of A's own rows be handed to B.
      const pk = mine.id !== undefined ? 'id' : col;
      const move = await attempt(c, `update ${t} set ${col} = $1 where ${pk} = $2`, [B, mine[pk]]);
      expect({ t, move: move === '42501' || move === '23503' || move === '23505' }).toEqual({ t, move: true });
    });
  }
});

test('with no location set, the API role sees nothing', async () => {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query('set local role switchboard_api');
    for (const t of tables) {
      const r = await c.query(`select count(*)::int as n from ${t}`);
      expect({ t, n: r.rows[0].n }).toEqual({ t, n: 0 });
    }
  } finally {
    await c.query('rollback');
    c.release();
  }
});

test('billing is unreachable from the API role whatever the location', async () => {
  await asApi(A, async (c) => {
    for (const t of ['billing.customers', 'billing.subscriptions', 'billing.invoices', 'billing.processed_events']) {
      expect(await attempt(c, `select * from ${t}`)).toBe('42501');
    }
  });
});

test('each staff role reads every location; the staff group alone reads nothing (docs/staff.md)', async () => {
  const c = await owner.connect();
  try {
    await c.query('begin');
    for (const role of ['switchboard_staff_viewer', 'switchboard_staff_operator', 'switchboard_staff_admin']) {
      await c.query(`set local role ${role}`);
      const r = await c.query('select count(distinct location_id)::int as n from app.calls');
      expect({ role, n: r.rows[0].n }).toEqual({ role, n: 2 });
      await c.query('reset role');
    }
    await c.query('set local role switchboard_staff');
    expect(await attempt(c, 'select count(*) from app.calls')).toBe('42501');
  } finally {
    await c.query('rollback');
    c.release();
  }
});
