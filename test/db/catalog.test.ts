/** Schema hygiene the conventions promise, checked from the catalog so new tables obey too. */
import { useTestDatabase } from '../support/db.js';

const db = useTestDatabase({ client: true });

const OURS = "('app', 'app_private', 'billing', 'api', 'admin', 'staff')";

test('every foreign key is backed by an index whose leading columns are the key', async () => {
  const { rows } = await db.client.query(`
    select con.conrelid::regclass::text as tbl, con.conname
      from pg_constraint con join pg_namespace n on n.oid = con.connamespace
     where con.contype = 'f' and n.nspname in ${OURS}
       and not exists (
         select 1 from pg_index i
          where i.indrelid = con.conrelid
            and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey
            and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] <@ con.conkey)`);
  expect(rows).toEqual([]);
});

test('a partial index backing a foreign key leaves out only rows whose key is null, and the key\'s ON DELETE action uses it', async () => {
  const { rows } = await db.client.query(`
    select con.conrelid::regclass::text as tbl, i.indexrelid::regclass::text as idx, pg_get_expr(i.indpred, i.indrelid) as pred,
           (select a.attname from pg_attribute a where a.attrelid = con.conrelid and a.attnum = i.indkey[0]) as col
      from pg_constraint con join pg_namespace n on n.oid = con.connamespace
      join pg_index i on i.indrelid = con.conrelid
       and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey
       and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] <@ con.conkey
     where con.contype = 'f' and n.nspname in ${OURS} and i.indpred is not null
       and not exists (
         select 1 from pg_index j
          where j.indrelid = con.conrelid and j.indpred is null
            and (j.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey
            and (j.indkey::int2[])[0:cardinality(con.conkey) - 1] <@ con.conkey)
     order by 1, 2`);
  // The rule is exercised (migration 000031): these two columns are null on most rows.
  expect(rows.map((r) => r.idx)).toEqual(expect.arrayContaining(['app.leads_assigned_to_idx', 'app.notifications_integration_idx']));
  for (const r of rows) {
    expect(r.pred).toBe(`(${r.col} IS NOT NULL)`);
    // What the SET NULL / CASCADE action runs, with parameters (a generic plan), finds its rows through it.
    await db.client.query('begin');
    await db.client.query('set local enable_seqscan = off');
    await db.client.query('set local plan_cache_mode = force_generic_plan');
    await db.client.query(`prepare fk_action (uuid, uuid) as select 1 from ${r.tbl} where location_id = $1 and ${r.col} = $2`);
    const plan = (await db.client.query('explain (costs off) execute fk_action (null, null)')).rows.map((x) => x['QUERY PLAN']).join('\n');
    await db.client.query('deallocate fk_action');
    await db.client.query('rollback');
    expect(plan).toContain(r.idx.replace(/^app\./, ''));
  }
});

test('every table of ours has a comment', async () => {
  const tables = await db.client.query(`
    select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname in ${OURS} and c.relkind = 'r' and obj_description(c.oid, 'pg_class') is null`);
  expect(tables.rows).toEqual([]);
});

test('every function of ours has a comment, and every SECURITY DEFINER one pins search_path', async () => {
  const { rows } = await db.client.query(`
    select p.oid::regprocedure::text as fn, p.prosecdef, p.proconfig, obj_description(p.oid, 'pg_proc') as comment
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ${OURS}`);
  expect(rows.filter((r) => !r.comment).map((r) => r.fn)).toEqual([]);
  expect(
    rows.filter((r) => r.prosecdef && !(r.proconfig ?? []).some((s: string) => s.startsWith('search_path='))).map((r) => r.fn),
  ).toEqual([]);
});

test('SQL helpers that are not SECURITY DEFINER carry no SET clause, so the planner inlines them', async () => {
  const { rows } = await db.client.query(`
    select p.oid::regprocedure::text as fn
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
     where n.nspname in ${OURS} and l.lanname = 'sql' and not p.prosecdef and p.proconfig is not null`);
  expect(rows.map((r) => r.fn)).toEqual([]);
  // The seeder's per-row id: its body appears in the plan, not a call of the function.
  const plan = await db.client.query('explain (verbose, costs off) select app_private.uuid_v7() from generate_series(1, 2)');
  const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
  expect(text).toContain('gen_random_uuid()');
  expect(text).not.toContain('uuid_v7');
});

test('the API role cannot execute CLI or worker-side functions', async () => {
  const { rows } = await db.client.query(`
    select p.oid::regprocedure::text as fn
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'admin' and has_function_privilege('switchboard_api', p.oid, 'execute')`);
  expect(rows).toEqual([]);
  const schema = await db.client.query("select has_schema_privilege('switchboard_api', 'admin', 'usage') as admin, has_schema_privilege('switchboard_api', 'billing', 'usage') as billing");
  expect(schema.rows[0]).toEqual({ admin: false, billing: false });
});

/*
 * Scale-out (README "Scale-out", migrations/CONVENTIONS.md "Adding a tenant table"): every table of
 * ours is one of three kinds under a distributed PostgreSQL such as Citus.
 * - distributed by location_id: every table with a location_id column unless listed below;
 * - reference (a copy on every node): the global look-ups;
 * - local (the coordinator only): billing, which is keyed by Stripe's ids and may not know its location,
 *   and the jobs parked for graphile-worker, whose schema is local.
 * A new table is distributed unless it is added to a list here with its reason.
 */
const REFERENCE: Record<string, string> = {
  'app.locations': 'the tenant itself; slug and service phone look-ups (unique across locations) from any node',
  'app.api_keys': 'token look-up by hash (unique across locations) before any tenant is known',
};
const LOCAL: Record<string, string> = {
  'billing.customers': 'Stripe sync, staff only, keyed by Stripe id; location may be unknown',
  'billing.subscriptions': 'Stripe sync, staff only, keyed by Stripe id; location may be unknown',
  'billing.invoices': 'Stripe sync, staff only, keyed by Stripe id; location may be unknown',
  'billing.processed_events': 'Stripe event ids already applied; no location',
  'staff.members': 'staff identities (docs/staff.md): no location, looked up by token hash before any tenant is known',
  'staff.audit': 'what staff did across locations; no single location',
  'app_private.deferred_jobs': 'graphile-worker jobs parked until their transaction has committed; beside graphile_worker, which is local',
  'app_private.worker_heartbeats': 'graphile-worker pools alive now, keyed by pool id; beside graphile_worker, which is local',
  'app_private.rate_limits': 'per-token request counters of the API processes, keyed by token hash before any tenant is known; unlogged',
};

describe('scale-out keys', () => {
  let tables: { name: string; location_attnum: number | null; location_notnull: boolean }[];
  const kind = (name: string) => (name in REFERENCE ? 'reference' : name in LOCAL ? 'local' : 'distributed');
  beforeAll(async () => {
    ({ rows: tables } = await db.client.query(`
      select c.oid::regclass::text as name, a.attnum as location_attnum, coalesce(a.attnotnull, false) as location_notnull
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        left join pg_attribute a on a.attrelid = c.oid and a.attname = 'location_id' and not a.attisdropped
       where n.nspname in ${OURS} and c.relkind in ('r', 'p')`));
  });

  test('every table is distributed by a non-null location_id, or listed as reference or local with its reason', () => {
    const names = new Set(tables.map((t) => t.name));
    expect([...Object.keys(REFERENCE), ...Object.keys(LOCAL)].filter((n) => !names.has(n))).toEqual([]);
    expect(
      tables.filter((t) => kind(t.name) === 'distributed' && !(t.location_attnum && t.location_notnull)).map((t) => t.name),
    ).toEqual([]);
  });

  test('every primary key, unique constraint and unique index of a distributed table includes location_id', async () => {
    const { rows } = await db.client.query(`
      select i.indrelid::regclass::text as tbl, i.indexrelid::regclass::text as idx, i.indisprimary as pk
        from pg_index i
       where i.indisunique and i.indrelid = any ($1::regclass[])
         and not exists (select 1 from pg_attribute a
                          where a.attrelid = i.indrelid and a.attname = 'location_id' and a.attnum = any (i.indkey::int2[]))`,
      [tables.filter((t) => kind(t.name) === 'distributed').map((t) => t.name)]);
    expect(rows).toEqual([]);
    const { rows: nopk } = await db.client.query(`
      select t::regclass::text as tbl from unnest($1::regclass[]) t
       where not exists (select 1 from pg_index i where i.indrelid = t and i.indisprimary)`,
      [tables.filter((t) => kind(t.name) === 'distributed').map((t) => t.name)]);
    expect(nopk).toEqual([]);
  });

  test('foreign keys: between distributed tables they pair location_id with location_id; none points from reference or local to distributed', async () => {
    const { rows } = await db.client.query(`
      select con.conname, con.conrelid::regclass::text as src, con.confrelid::regclass::text as dst,
             array(select a.attname from unnest(con.conkey) with ordinality k(n, o) join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.n order by k.o)::text[] as cols,
             array(select a.attname from unnest(con.confkey) with ordinality k(n, o) join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.n order by k.o)::text[] as refcols
        from pg_constraint con join pg_namespace n on n.oid = con.connamespace
       where con.contype = 'f' and n.nspname in ${OURS}`);
    const bad = rows.filter((r) => {
      const [src, dst] = [kind(r.src), kind(r.dst)];
      if (dst === 'reference') return false;
      if (src !== 'distributed' || dst !== 'distributed') return src !== 'local' || dst !== 'local';
      const i = r.cols.indexOf('location_id');
      return i < 0 || r.refcols[i] !== 'location_id';
    });
    expect(bad.map((r) => `${r.src}.${r.conname} -> ${r.dst}`)).toEqual([]);
    // The rule is exercised: there are foreign keys between distributed tables.
    expect(rows.filter((r) => kind(r.src) === 'distributed' && kind(r.dst) === 'distributed').length).toBeGreaterThan(5);
  });

  test("a row cannot point at another location's row, and deleting the target nulls only the reference", async () => {
    const loc = async (slug: string) =>
      (await db.client.query(`select (admin.location_create(jsonb_build_object('name', $1::text, 'slug', $1::text)) ->> 'id')::uuid as id`, [slug])).rows[0].id;
    const [a, b] = [await loc('keys-a'), await loc('keys-b')];
    const call = (await db.client.query(`insert into app.calls (location_id, platform_call_id) values ($1, 'k-1') returning id`, [a])).rows[0].id;
    await expect(db.client.query(`insert into app.leads (location_id, call_id) values ($1, $2)`, [b, call])).rejects.toMatchObject({ code: '23503' });
    const lead = (await db.client.query(`insert into app.leads (location_id, call_id) values ($1, $2) returning id`, [a, call])).rows[0].id;
    await db.client.query(`delete from app.calls where id = $1`, [call]);
    expect((await db.client.query(`select location_id, call_id from app.leads where id = $1`, [lead])).rows).toEqual([{ location_id: a, call_id: null }]);
  });
});

test('no SECURITY DEFINER function, and no api.* function, is executable by PUBLIC (trigger functions aside)', async () => {
  // A definer function runs as its owner whoever calls it; one left to PUBLIC reached the staff
  // roles too (app.privacy_match_ids looked an e-mail up for a viewer denied the column), and an
  // api.* function run by a staff role reads under the staff policy, across locations.
  const { rows } = await db.client.query(`
    select p.oid::regprocedure::text as fn
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace,
           aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
     where a.grantee = 0 and a.privilege_type = 'EXECUTE'
       and n.nspname in ('app', 'api', 'admin', 'billing', 'staff', 'app_private')
       and p.prorettype <> 'trigger'::regtype
       and (p.prosecdef or n.nspname = 'api')
     order by 1`);
  expect(rows.map((r) => r.fn)).toEqual([]);
});

test('no role of the service may create in our schemas, and no SECURITY DEFINER function runs as a superuser', async () => {
  // A role that may create in a schema can shadow a function there with a text overload, which
  // the owner pool's untyped parameters then call; as a superuser's definer function, as superuser.
  const { rows: creators } = await db.client.query(`
    select r.rolname || ' on ' || n.nspname as grant
      from pg_roles r, pg_namespace n
     where r.rolname like 'switchboard\\_%' and not r.rolsuper
       and n.nspname in ('app', 'api', 'admin', 'billing', 'staff', 'app_private', 'public')
       and has_schema_privilege(r.oid, n.oid, 'create')
     order by 1`);
  expect(creators.map((r) => r.grant)).toEqual([]);
  // Owned by the migrating role: the graphile-worker doors (migrations/CONVENTIONS.md), which read
  // or write graphile-worker's schema, which that role owns, and the queues' statistics refresh,
  // whose ANALYZE needs the tables' owner; every other definer function is switchboard_system's.
  const doors = [
    'app.dequeue(text)', 'app.enqueue(text,jsonb,timestamp with time zone,text,integer,integer)', 'app.flush_deferred_jobs()',
    'app.integration_sync_sweep(integer)', 'app.queue_statistics_refresh()',
    'app.worker_heartbeat(text[],text[])', 'app.worker_unlock(text[])', 'app.worker_unlock_gone(integer)',
  ];
  const { rows: owned } = await db.client.query(`
    select p.oid::regprocedure::text as fn
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_roles o on o.oid = p.proowner
     where p.prosecdef and o.rolsuper and n.nspname in ('app', 'api', 'admin', 'billing', 'staff', 'app_private')
     order by 1`);
  expect(owned.map((r) => r.fn).filter((fn) => !doors.includes(fn))).toEqual([]);
});

test('a column withheld from a staff role is not writable by it either', async () => {
  const { rows } = await db.client.query(`
    select r || ' ' || priv || ' ' || c.oid::regclass::text || '.' || a.attname as hole
      from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped,
           unnest(array['switchboard_staff_viewer', 'switchboard_staff_operator', 'switchboard_staff_admin']) r,
           unnest(array['INSERT', 'UPDATE']) priv
     where c.relkind = 'r' and n.nspname in ('app', 'billing', 'staff')
       and has_table_privilege(r, c.oid, 'select') is not null
       and has_any_column_privilege(r, c.oid, 'select')
       and not has_column_privilege(r, c.oid, a.attnum, 'select')
       and has_column_privilege(r, c.oid, a.attnum, priv)
     order by 1`);
  expect(rows.map((r) => r.hole)).toEqual([]);
});

test('no staff role changes the location of a row; admins update every other column they read (read-only tables aside)', async () => {
  // Each tenant table's location column, from its tenant policy (location_id, or id of app.locations).
  const { rows } = await db.client.query(`
    with tenant as (
      select p.polrelid as oid, substring(pg_get_expr(p.polqual, p.polrelid) from '^\\(?([a-z_]+) =') as col
        from pg_policy p where p.polname = 'tenant_isolation')
    select c.oid::regclass::text || '.' || a.attname || ' ' ||
           case when has_column_privilege('switchboard_staff_admin', c.oid, a.attnum, 'update') then 'updatable' else 'not updatable' end as col
      from tenant t join pg_class c on c.oid = t.oid
      join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
     where has_column_privilege('switchboard_staff_admin', c.oid, a.attnum, 'update')
           <> (a.attname <> t.col and has_column_privilege('switchboard_staff_admin', c.oid, a.attnum, 'select')
               and has_any_column_privilege('switchboard_staff_admin', c.oid, 'update'))
        or t.col is null
        or has_column_privilege('switchboard_staff_viewer', c.oid, a.attnum, 'update')
        or has_column_privilege('switchboard_staff_operator', c.oid, a.attnum, 'update')
     order by 1`);
  expect(rows.map((r) => r.col)).toEqual([]);
  const { rows: [n] } = await db.client.query(`select count(*)::int as n from pg_policy where polname = 'tenant_isolation'`);
  expect(n.n).toBeGreaterThan(25);
});
