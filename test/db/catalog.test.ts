/** Schema hygiene the conventions promise, checked from the catalog so new tables obey too. */
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

let db: TestDatabase;
let c: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase();
  c = new pg.Client({ connectionString: db.url });
  await c.connect();
});
afterAll(async () => {
  await c.end();
  await db.drop();
});

const OURS = "('app', 'app_private', 'billing', 'api', 'admin')";

test('every foreign key is backed by an index whose leading columns are the key', async () => {
  const { rows } = await c.query(`
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

test('every table of ours has a comment', async () => {
  const tables = await c.query(`
    select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname in ${OURS} and c.relkind = 'r' and obj_description(c.oid, 'pg_class') is null`);
  expect(tables.rows).toEqual([]);
});

test('every function of ours has a comment, and every SECURITY DEFINER one pins search_path', async () => {
  const { rows } = await c.query(`
    select p.oid::regprocedure::text as fn, p.prosecdef, p.proconfig, obj_description(p.oid, 'pg_proc') as comment
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname in ${OURS}`);
  expect(rows.filter((r) => !r.comment).map((r) => r.fn)).toEqual([]);
  expect(
    rows.filter((r) => r.prosecdef && !(r.proconfig ?? []).some((s: string) => s.startsWith('search_path='))).map((r) => r.fn),
  ).toEqual([]);
});

test('the API role cannot execute CLI or worker-side functions', async () => {
  const { rows } = await c.query(`
    select p.oid::regprocedure::text as fn
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'admin' and has_function_privilege('switchboard_api', p.oid, 'execute')`);
  expect(rows).toEqual([]);
  const schema = await c.query("select has_schema_privilege('switchboard_api', 'admin', 'usage') as admin, has_schema_privilege('switchboard_api', 'billing', 'usage') as billing");
  expect(schema.rows[0]).toEqual({ admin: false, billing: false });
});
