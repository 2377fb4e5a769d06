/**
 * Re-baselines the migration chain: writes migrations/committed/ anew, one file per concern
 * (concerns.mjs), from the catalog of a database migrated with the chain as it is. Each object is
 * created once and complete (a table with its columns, constraints, comments, indexes; a function
 * as pg_get_functiondef prints it, its owner and comment), ordered by dependency within a concern;
 * triggers go to the later concern of their table and function; privileges to a "Grants" section
 * at the end of each file. Hashes are graphile-migrate's own (its hash and serialise functions).
 *
 *   node scripts/rebaseline/generate.mjs <url of a database migrated with the current chain>
 *
 * Then check the result (README.md here): migrate a fresh database with the new files and compare
 * the two catalogs with catalog.mjs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { CONCERNS, HEADERS, TRIGGER_SOURCE } from './concerns.mjs';
const require = createRequire(import.meta.url);
const { calculateHash } = require('graphile-migrate/dist/hash.js');
const { serializeMigration } = require('graphile-migrate/dist/migration.js');
const { sluggify } = require('graphile-migrate/dist/sluggify.js');
const url = process.argv[2];
if (!url) { console.error('usage: node scripts/rebaseline/generate.mjs <database url>'); process.exit(2); }
const committedDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations/committed');
const bodies = [];
const c = new pg.Client({ connectionString: url }); await c.connect();
const S = "('app','app_private','api','admin','billing')";
const q = async (sql, p) => (await c.query(sql, p)).rows;
const lit = (s) => (s == null ? 'null' : "E'" + s.replace(/\\/g, '\\\\').replace(/'/g, "''").replace(/\n/g, '\\n') + "'");
const me = (await q('select current_user u'))[0].u;

function concernOf(kind, name) {
  for (let i = 0; i < CONCERNS.length; i++) if (CONCERNS[i].match(kind, name)) return i;
  throw new Error(`no concern for ${kind} ${name}`);
}
const nodes = new Map(); // key -> {key, kind, name, concern, oid, deps:Set, sql:[], grants:[], post:[]}
const add = (key, kind, name, oid) => { const n = { key, kind, name, oid, deps: new Set(), sql: [], grants: [], post: [], concern: concernOf(kind, name) }; nodes.set(key, n); return n; };

// ---- types (domains, composites)
const types = await q(`select t.oid, t.oid::regtype::text as name, t.typtype, format_type(t.typbasetype,t.typtypmod) as base, t.typnotnull, t.typdefault, obj_description(t.oid,'pg_type') as comment, pg_get_userbyid(t.typowner) as owner, t.typrelid
  from pg_type t join pg_namespace n on n.oid=t.typnamespace left join pg_class cl on cl.oid=t.typrelid
  where n.nspname in ${S} and t.typtype in ('d','c') and (t.typrelid=0 or cl.relkind='c') order by t.oid`);
for (const t of types) {
  const n = add('type:' + t.name, 'type', t.name, t.oid);
  if (t.typtype === 'd') {
    const cons = await q(`select conname, pg_get_constraintdef(oid) d from pg_constraint where contypid=$1 order by oid`, [t.oid]);
    let s = `create domain ${t.name} as ${t.base}`;
    for (const k of cons) s += ` constraint ${k.conname} ${k.d}`;
    n.sql.push(s + ';');
  } else {
    const atts = await q(`select attname, format_type(atttypid,atttypmod) ty, atttypid::regtype::text tn, col_description($1, attnum) cm from pg_attribute where attrelid=$1 and attnum>0 and not attisdropped order by attnum`, [t.typrelid]);
    n.sql.push(`create type ${t.name} as (\n${atts.map((a) => '  ' + a.attname + ' ' + a.ty).join(',\n')}\n);`);
    for (const a of atts) { n.typeRefs = (n.typeRefs || []).concat(a.tn); if (a.cm) n.post.push(`comment on column ${t.name}.${a.attname} is ${lit(a.cm)};`); }
  }
  if (t.comment) n.sql.push(`comment on ${t.typtype === 'd' ? 'domain' : 'type'} ${t.name} is ${lit(t.comment)};`);
  if (t.owner !== me) n.sql.push(`alter ${t.typtype === 'd' ? 'domain' : 'type'} ${t.name} owner to ${t.owner};`);
}

// ---- tables
const tables = await q(`select c.oid, c.oid::regclass::text as name, obj_description(c.oid,'pg_class') as comment, c.relrowsecurity, c.relforcerowsecurity, c.relacl, pg_get_userbyid(c.relowner) owner, c.relpersistence
  from pg_class c join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S} and c.relkind='r' order by c.oid`);
const ACLMAP = { r: 'select', a: 'insert', w: 'update', d: 'delete', D: 'truncate', x: 'references', t: 'trigger', m: 'maintain' };
const ORDER = 'rawdDxtm';
function aclOf(acl, owner) { // -> Map grantee -> privilege letters (excluding owner)
  const m = new Map();
  for (const item of acl || []) { const [g, rest] = item.split('='); const privs = rest.split('/')[0].replace(/\*/g, ''); const gr = g === '' ? 'public' : g; if (gr === owner) continue; m.set(gr, (m.get(gr) || '') + privs); }
  return m;
}
const parseAcl = (a) => (a == null ? null : a.replace(/^\{|\}$/g, '').split(',').filter(Boolean).map((s) => s.replace(/^"|"$/g, '')));
for (const t of tables) {
  const n = add('table:' + t.name, 'table', t.name, t.oid);
  const cols = await q(`select a.attnum, a.attname, format_type(a.atttypid,a.atttypmod) ty, a.atttypid::regtype::text tn, a.attnotnull, pg_get_expr(d.adbin,d.adrelid) def, a.attgenerated, a.attidentity, col_description(a.attrelid,a.attnum) cm
     from pg_attribute a left join pg_attrdef d on d.adrelid=a.attrelid and d.adnum=a.attnum where a.attrelid=$1 and a.attnum>0 and not a.attisdropped order by a.attnum`, [t.oid]);
  const cons = await q(`select oid, conname, contype, pg_get_constraintdef(oid) d, confrelid::regclass::text fr, conkey from pg_constraint where conrelid=$1 order by case contype when 'p' then 0 when 'u' then 1 when 'f' then 3 else 2 end, oid`, [t.oid]);
  const lines = [];
  const notNullFromPk = new Set();
  for (const col of cols) {
    let s = `  ${col.attname} ${col.ty}`;
    if (col.attgenerated === 's') s += ` generated always as (${col.def}) stored`;
    else if (col.def != null) s += ` default ${col.def}`;
    if (col.attidentity === 'a') s += ' generated always as identity';
    if (col.attidentity === 'd') s += ' generated by default as identity';
    if (col.attnotnull && !col.attidentity) s += ' not null';
    lines.push(s);
    n.typeRefs = (n.typeRefs || []).concat(col.tn);
  }
  const lower = (d) => d.replace(/^(PRIMARY KEY|UNIQUE|CHECK|FOREIGN KEY|EXCLUDE)\b/, (m) => m.toLowerCase()).replace(/\) REFERENCES (\S+)\(/, (m, t) => `) references ${t} (`).replace(/ ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|RESTRICT)\b/g, (m) => m.toLowerCase()).replace(/ NO INHERIT$/, ' no inherit');
  for (const k of cons) { if (k.contype === 'n') continue; lines.push(`  constraint ${k.conname} ${lower(k.d)}`); if (k.contype === 'f' && k.fr !== t.name) n.deps.add('table:' + k.fr); }
  n.sql.push(`create ${t.relpersistence === 'u' ? 'unlogged ' : ''}table ${t.name} (\n${lines.join(',\n')}\n);`);
  if (t.comment) n.sql.push(`comment on table ${t.name} is ${lit(t.comment)};`);
  for (const col of cols) if (col.cm) n.sql.push(`comment on column ${t.name}.${col.attname} is ${lit(col.cm)};`);
  // functions used by defaults / checks / generated columns
  const fdeps = await q(`select distinct refobjid::regprocedure::text f from pg_depend d where refclassid='pg_proc'::regclass and ((classid='pg_attrdef'::regclass and objid in (select oid from pg_attrdef where adrelid=$1)) or (classid='pg_constraint'::regclass and objid in (select oid from pg_constraint where conrelid=$1))) and refobjid in (select p.oid from pg_proc p join pg_namespace n on n.oid=p.pronamespace where n.nspname in ${S})`, [t.oid]);
  for (const f of fdeps) n.deps.add('fn:' + f.f);
  // RLS + grants
  const pols = await q(`select polname, pg_get_expr(polqual,polrelid) qual from pg_policy where polrelid=$1 order by polname`, [t.oid]);
  const acl = aclOf(parseAcl(t.relacl), t.owner);
  const privList = (letters) => [...ORDER].filter((l) => letters.includes(l)).map((l) => ACLMAP[l]).join(', ');
  if (pols.length) {
    const iso = pols.find((p) => p.polname === 'tenant_isolation');
    const col = /\((\w+) = /.exec(iso.qual)[1];
    const api = privList(acl.get('switchboard_api') || '');
    const args = [`'${t.name}'`];
    if (api !== 'select, insert, update, delete' || col !== 'location_id') args.push(`'${api}'`);
    if (col !== 'location_id') args.push(`'${col}'`);
    n.sql.push(`select app.secure_tenant_table(${args.join(', ')});`);
    n.deps.add('fn:app.secure_tenant_table(regclass,text,text)');
    for (const role of ['switchboard_staff', 'switchboard_system']) {
      const missing = [...'rawd'].filter((l) => !(acl.get(role) || '').includes(l));
      if (missing.length) n.grants.push(`revoke ${missing.map((l) => ACLMAP[l]).join(', ')} on ${t.name} from ${role};`);
      const extra = [...(acl.get(role) || '')].filter((l) => !'rawd'.includes(l));
      if (extra.length) n.grants.push(`grant ${extra.map((l) => ACLMAP[l]).join(', ')} on ${t.name} to ${role};`);
    }
    for (const [role, letters] of acl) if (!['switchboard_staff', 'switchboard_system', 'switchboard_api'].includes(role)) n.grants.push(`grant ${privList(letters)} on ${t.name} to ${role};`);
    if (!t.relrowsecurity || !t.relforcerowsecurity || pols.length !== 3) throw new Error('odd RLS on ' + t.name);
  } else {
    for (const [role, letters] of acl) n.grants.push(`grant ${privList(letters)} on ${t.name} to ${role};`);
    if (t.relrowsecurity) throw new Error('RLS without policies ' + t.name);
  }
  if (t.owner !== me) n.sql.push(`alter table ${t.name} owner to ${t.owner};`);
  // indexes (not constraint-backed)
  const idx = await q(`select pg_get_indexdef(i.indexrelid) d, obj_description(i.indexrelid,'pg_class') cm, i.indexrelid::regclass::text nm from pg_index i where i.indrelid=$1 and not exists (select 1 from pg_constraint k where k.conindid=i.indexrelid and k.conrelid=i.indrelid) order by i.indexrelid`, [t.oid]);
  n.indexes = idx.map((i) => i.d.replace(/^CREATE (UNIQUE )?INDEX (\S+) ON (ONLY )?(\S+) USING btree /, (m, u, nm, o, tb) => `create ${u ? 'unique ' : ''}index ${nm} on ${tb} `).replace(/ USING (\w+) /, ' using $1 ') + ';' + (i.cm ? `\ncomment on index ${i.nm} is ${lit(i.cm)};` : ''));
  n.fnRefsInIndexes = idx.map((i) => i.d).join(' ');
}

// ---- functions
const fns = await q(`select p.oid, p.oid::regprocedure::text sig, p.proname, n.nspname, l.lanname, pg_get_functiondef(p.oid) def, p.prosrc, pg_get_userbyid(p.proowner) owner, p.proacl, obj_description(p.oid,'pg_proc') cm,
   array(select t::regtype::text from unnest(p.proargtypes::oid[]) t) argt, p.prorettype::regtype::text rett, p.prokind
   from pg_proc p join pg_namespace n on n.oid=p.pronamespace join pg_language l on l.oid=p.prolang where n.nspname in ${S} order by p.oid`);
const byName = new Map();
for (const f of fns) { const k = f.nspname + '.' + f.proname; byName.set(k, (byName.get(k) || []).concat('fn:' + f.sig)); }
const tableKeys = new Set(tables.map((t) => t.name));
const typeKeys = new Set(types.map((t) => t.name));
function refsIn(text) {
  const out = new Set();
  for (const m of text.matchAll(/\b(app|app_private|api|admin|billing)\.([a-z_0-9]+)\b/g)) {
    const k = m[1] + '.' + m[2];
    if (tableKeys.has(k)) out.add('table:' + k);
    if (typeKeys.has(k)) out.add('type:' + k);
    for (const f of byName.get(k) || []) out.add(f);
  }
  return out;
}
for (const f of fns) {
  const n = add('fn:' + f.sig, 'function', f.sig, f.oid);
  n.lang = f.lanname;
  let def = f.def.replace(/^CREATE OR REPLACE FUNCTION /, 'create function ').replace(/^CREATE OR REPLACE PROCEDURE /, 'create procedure ');
  n.sql.push(def.replace(/\n$/, '') + ';');
  for (const t of [...f.argt, f.rett]) { const b = t.replace(/\[\]$/, ''); if (tableKeys.has(b)) n.deps.add('table:' + b); if (typeKeys.has(b)) n.deps.add('type:' + b); }
  if (f.lanname === 'sql') for (const r of refsIn(f.prosrc)) if (r !== n.key) n.deps.add(r);
  if (f.owner !== me) n.sql.push(`alter function ${f.sig} owner to ${f.owner};`);
  if (f.cm) n.sql.push(`comment on function ${f.sig} is ${lit(f.cm)};`);
  const acl = parseAcl(f.proacl);
  if (acl) {
    const m = aclOf(acl, f.owner);
    if (!m.has('public')) n.grants.push(`revoke execute on function ${f.sig} from public;`);
    const to = [...m.keys()].filter((g) => g !== 'public');
    if (to.length) n.grants.push(`grant execute on function ${f.sig} to ${to.join(', ')};`);
  }
}
// type refs of tables/types to our types
for (const n of nodes.values()) for (const t of n.typeRefs || []) { const b = t.replace(/\[\]$/, ''); if (typeKeys.has(b)) n.deps.add('type:' + b); if (tableKeys.has(b) && n.key !== 'table:' + b) n.deps.add('table:' + b); }

// ---- triggers: in the later concern of (table, function)
const trgs = await q(`select t.tgrelid::regclass::text tb, t.tgname, pg_get_triggerdef(t.oid) d, t.tgfoid::regprocedure::text f, obj_description(t.oid,'pg_trigger') cm from pg_trigger t join pg_class c on c.oid=t.tgrelid join pg_namespace n on n.oid=c.relnamespace where n.nspname in ${S} and not t.tgisinternal order by t.tgrelid, t.tgname`);
const triggersBy = CONCERNS.map(() => []);
for (const t of trgs) {
  const ci = Math.max(nodes.get('table:' + t.tb).concern, nodes.get('fn:' + t.f).concern);
  const src = TRIGGER_SOURCE[t.tb + '.' + t.tgname];
  if (src) { triggersBy[ci].push(src.trim()); continue; }
  triggersBy[ci].push(t.d.replace(/^CREATE (CONSTRAINT )?TRIGGER /, (m, k) => `create ${k ? 'constraint ' : ''}trigger `).replace(/ EXECUTE FUNCTION /, '\n  execute function ') + ';' + (t.cm ? `\ncomment on trigger ${t.tgname} on ${t.tb} is ${lit(t.cm)};` : ''));
}

// ---- check cross-concern deps and order within each concern
const problems = [];
for (const n of nodes.values()) for (const d of n.deps) { const dn = nodes.get(d); if (!dn) { problems.push(`${n.key} -> missing ${d}`); continue; } if (dn.concern > n.concern) problems.push(`${n.key} [${CONCERNS[n.concern].file}] needs ${d} [${CONCERNS[dn.concern].file}]`); }
if (problems.length) { console.error(problems.join('\n')); process.exit(1); }

const schemas = await q(`select nspname, nspacl, obj_description(oid,'pg_namespace') cm from pg_namespace where nspname in ${S} order by oid`);
for (let ci = 0; ci < CONCERNS.length; ci++) {
  const mine = [...nodes.values()].filter((n) => n.concern === ci).sort((a, b) => a.oid - b.oid);
  const done = new Set(); const ordered = [];
  const visit = (n, stack = new Set()) => { if (done.has(n.key)) return; if (stack.has(n.key)) throw new Error('cycle at ' + n.key); stack.add(n.key); for (const d of n.deps) { const dn = nodes.get(d); if (dn.concern === ci) visit(dn, stack); } stack.delete(n.key); done.add(n.key); ordered.push(n); };
  for (const n of mine) visit(n);
  const parts = [HEADERS[ci].trim() + '\n'];
  if (CONCERNS[ci].prelude) parts.push(CONCERNS[ci].prelude.trim() + '\n');
  for (const s of schemas.filter((s) => CONCERNS[ci].schemas?.includes(s.nspname))) {
    parts.push(`create schema ${s.nspname};` + (s.cm ? `\ncomment on schema ${s.nspname} is ${lit(s.cm)};` : '') + '\n');
  }
  let section = '';
  for (const n of ordered) {
    const sec = n.kind === 'table' ? 'Tables' : n.kind === 'type' ? 'Types' : 'Functions';
    parts.push(n.sql.join('\n') + (n.post.length ? '\n' + n.post.join('\n') : '') + (n.indexes?.length ? '\n' + n.indexes.join('\n') : '') + '\n');
  }
  if (triggersBy[ci].length) parts.push('-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)\n' + triggersBy[ci].join('\n') + '\n');
  const grants = [];
  for (const s of schemas.filter((s) => CONCERNS[ci].schemas?.includes(s.nspname))) {
    const m = aclOf(parseAcl(s.nspacl), me);
    const byPriv = new Map();
    for (const [g, l] of m) { if (g === 'public') continue; const p = [...'UC'].filter((x) => l.includes(x)).map((x) => (x === 'U' ? 'usage' : 'create')).join(', '); byPriv.set(p, (byPriv.get(p) || []).concat(g)); }
    for (const [p, gs] of byPriv) grants.push(`grant ${p} on schema ${s.nspname} to ${gs.join(', ')};`);
    if (m.has('public')) grants.push(`grant usage on schema ${s.nspname} to public;`);
  }
  for (const n of ordered) grants.push(...n.grants);
  if (grants.length) parts.push(`-- Grants: the one place for this concern's privileges (tenant tables get theirs from\n-- app.secure_tenant_table above; only departures from it are here).\n` + grants.join('\n') + '\n');
  bodies.push(parts.join('\n'));
}
await c.end();

for (const f of fs.readdirSync(committedDir)) fs.rmSync(path.join(committedDir, f));
let prev = null;
CONCERNS.forEach((concern, i) => {
  const message = concern.file.replace(/-/g, ' ');
  const hash = calculateHash(bodies[i], prev);
  const name = String(i + 1).padStart(6, '0') + '-' + sluggify(message) + '.sql';
  fs.writeFileSync(path.join(committedDir, name), serializeMigration(bodies[i], { Previous: prev ?? '-', Hash: hash, Message: message }), { mode: 0o644 });
  prev = hash;
});
console.log(`${committedDir}: ${CONCERNS.length} files, ${nodes.size} objects`);
