/**
 * Prints the catalog of our schemas as sorted lines, to compare two databases with diff: schemas,
 * roles, extensions, types and domains, tables (owner, ACL, RLS flags, comments), columns in order
 * (type, not null, default, generated, identity, comment, ACL), constraints, indexes, triggers,
 * policies, and every function (pg_get_functiondef, owner, ACL, comment).
 *
 *   node scripts/rebaseline/catalog.mjs <database url> > a.txt
 */
import pg from 'pg';
const c = new pg.Client({ connectionString: process.argv[2] }); await c.connect();
const S = "('app','app_private','api','admin','billing')";
const q = async (label, sql) => { const { rows } = await c.query(sql); for (const r of rows) out.push(label + ' ' + Object.values(r).map((v) => JSON.stringify(v)).join(' | ')); };
const out = [];
await q('schema', `select nspname, pg_get_userbyid(nspowner), nspacl::text, obj_description(oid,'pg_namespace') from pg_namespace where nspname in ${S}`);
await q('role', `select rolname, rolinherit, rolcanlogin, shobj_description(oid,'pg_authid') from pg_roles where rolname like 'switchboard%'`);
await q('ext', `select extname from pg_extension`);
await q('type', `select t.oid::regtype::text, t.typtype, pg_get_userbyid(t.typowner), t.typacl::text, obj_description(t.oid,'pg_type'), format_type(t.typbasetype, t.typtypmod), t.typnotnull, t.typdefault,
  (select string_agg(conname||':'||pg_get_constraintdef(oid), ';' order by conname) from pg_constraint where contypid=t.oid),
  (select string_agg(a.attname||' '||format_type(a.atttypid,a.atttypmod)||coalesce(' -- '||col_description(t.typrelid,a.attnum),''), ', ' order by a.attnum) from pg_attribute a where a.attrelid=t.typrelid and a.attnum>0 and not a.attisdropped)
  from pg_type t join pg_namespace n on n.oid=t.typnamespace left join pg_class cl on cl.oid=t.typrelid
  where n.nspname in ${S} and t.typtype in ('d','e','c','r','m') and (t.typrelid=0 or cl.relkind='c')`);
await q('rel', `select c.oid::regclass::text, c.relkind, pg_get_userbyid(c.relowner), c.relacl::text, c.relrowsecurity, c.relforcerowsecurity, obj_description(c.oid,'pg_class'), c.reloptions::text, c.relpersistence from pg_class c join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S} and c.relkind in ('r','p','v','m','S','f')`);
await q('col', `select c.oid::regclass::text, row_number() over (partition by c.oid order by a.attnum), a.attname, format_type(a.atttypid,a.atttypmod), a.attnotnull, pg_get_expr(d.adbin,d.adrelid), a.attgenerated, a.attidentity, col_description(c.oid,a.attnum), a.attacl::text, a.attcollation
  from pg_attribute a join pg_class c on c.oid=a.attrelid join pg_namespace n on n.oid=c.relnamespace left join pg_attrdef d on d.adrelid=a.attrelid and d.adnum=a.attnum
  where n.nspname in ${S} and c.relkind in ('r','p','v','m') and a.attnum>0 and not a.attisdropped`);
await q('con', `select conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid), condeferrable, convalidated, obj_description(oid,'pg_constraint') from pg_constraint where connamespace in (select oid from pg_namespace where nspname in ${S}) and conrelid<>0`);
await q('idx', `select indexrelid::regclass::text, pg_get_indexdef(indexrelid), obj_description(indexrelid,'pg_class') from pg_index i join pg_class c on c.oid=i.indrelid join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S}`);
await q('trg', `select tgrelid::regclass::text, tgname, pg_get_triggerdef(t.oid), tgenabled, obj_description(t.oid,'pg_trigger') from pg_trigger t join pg_class c on c.oid=t.tgrelid join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S} and not tgisinternal`);
await q('pol', `select polrelid::regclass::text, polname, polcmd, polpermissive, (select array_agg(r::regrole::text order by r::regrole::text) from unnest(polroles) r), pg_get_expr(polqual,polrelid), pg_get_expr(polwithcheck,polrelid) from pg_policy p join pg_class c on c.oid=p.polrelid join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S}`);
const { rows: fns } = await c.query(`select p.oid::regprocedure::text as sig, pg_get_functiondef(p.oid) as def, pg_get_userbyid(p.proowner) as owner, p.proacl::text as acl, obj_description(p.oid,'pg_proc') as comment from pg_proc p join pg_namespace n on n.oid=p.pronamespace where n.nspname in ${S}`);
for (const f of fns) { out.push(`fn ${f.sig} | owner=${f.owner} | acl=${f.acl} | comment=${JSON.stringify(f.comment)}`); out.push(...f.def.split('\n').map((l) => `fnbody ${f.sig} ${l}`)); }
await c.end();
// fnbody lines must keep order within a function: number them
let prev = '', i = 0; const numbered = out.map((l) => { if (l.startsWith('fnbody ')) { const sig = l.split(' ')[1]; i = sig === prev ? i + 1 : 0; prev = sig; return l.replace('fnbody ' + sig, `fnbody ${sig} ${String(i).padStart(4, '0')}`); } return l; });
console.log(numbered.sort().join('\n'));
