/**
 * One source per list of allowed values (docs/decisions.md, "Allowed-value lists"): SQL defines
 * each list (a CHECK constraint, an enum type or an immutable app.*() function); the one
 * TypeScript constant for it in src/allowed-values.ts (the event type lists: derived from the
 * catalog in src/webhooks/events.ts) must hold the same values. Read from the
 * migrated database's catalog, compared as sets. A new enumerated CHECK in SQL must be listed here
 * (mirrored in TypeScript or named as SQL-only), so no list escapes the comparison.
 */
import * as constants from '../../src/allowed-values.js';
import { deliveryEventTypes, eventTypes, notificationTypes } from '../../src/webhooks/events.js';
import { useTestDatabase } from '../support/db.js';

const db = useTestDatabase({ client: true });

const OURS = ['app', 'app_private', 'billing', 'api', 'admin'];

/**
 * `col = ANY (<array expression>)` as pg_get_constraintdef prints an enumerating CHECK (an IN list
 * included): the column and the array expression, or null for any other CHECK.
 */
function parseAnyCheck(def: string): { column: string; expr: string } | null {
  const head = /^CHECK \(+([a-z_][a-z0-9_]*) = ANY \(/.exec(def);
  if (!head) return null;
  let depth = 1;
  let quoted = false;
  for (let i = head[0].length; i < def.length; i++) {
    const ch = def[i];
    if (ch === "'") quoted = !quoted;
    else if (!quoted && ch === '(') depth++;
    else if (!quoted && ch === ')' && --depth === 0) {
      return /^\)*$/.test(def.slice(i + 1)) ? { column: head[1], expr: def.slice(head[0].length, i) } : null;
    }
  }
  return null;
}

interface EnumeratedCheck { column: string; constraint: string; expr: string }

/** Every single-column CHECK of our schemas that enumerates values, keyed `schema.table.column`. */
async function enumeratedChecks(): Promise<EnumeratedCheck[]> {
  const { rows } = await db.client.query<{ tbl: string; conname: string; def: string; cols: string[] }>(`
    select n.nspname || '.' || t.relname as tbl, con.conname, pg_get_constraintdef(con.oid) as def,
           array(select a.attname::text from pg_attribute a where a.attrelid = con.conrelid and a.attnum = any (con.conkey)) as cols
      from pg_constraint con join pg_class t on t.oid = con.conrelid join pg_namespace n on n.oid = t.relnamespace
     where con.contype = 'c' and n.nspname = any ($1)`, [OURS]);
  const out: EnumeratedCheck[] = [];
  for (const r of rows) {
    const m = parseAnyCheck(r.def);
    if (m && r.cols.length === 1 && m.column === r.cols[0]) out.push({ column: `${r.tbl}.${m.column}`, constraint: r.conname, expr: m.expr });
  }
  return out;
}

/** The values SQL allows in `schema.table.column`: its enum type's labels, or its enumerating CHECK. */
async function columnValues(column: string): Promise<string[]> {
  const [schema, table, col] = column.split('.');
  const type = await db.client.query<{ typtype: string; oid: number }>(`
    select ty.typtype, ty.oid from pg_attribute a join pg_class t on t.oid = a.attrelid
      join pg_namespace n on n.oid = t.relnamespace join pg_type ty on ty.oid = a.atttypid
     where n.nspname = $1 and t.relname = $2 and a.attname = $3 and not a.attisdropped`, [schema, table, col]);
  if (type.rowCount !== 1) throw new Error(`${column}: no such column`);
  if (type.rows[0].typtype === 'e') {
    return (await db.client.query(`select array_agg(enumlabel::text order by enumsortorder) v from pg_enum where enumtypid = $1`, [type.rows[0].oid])).rows[0].v;
  }
  const checks = (await enumeratedChecks()).filter((k) => k.column === column);
  if (checks.length !== 1) throw new Error(`${column}: expected one CHECK (${column.split('.').pop()} = ANY (…)), found ${checks.length}`);
  return evaluate(checks[0].expr);
}

/** Evaluates a SQL array expression (a literal or a call of an immutable app.*() function). */
async function evaluate(expr: string): Promise<string[]> {
  return (await db.client.query(`select (${expr})::text[] as v`)).rows[0].v;
}

/** The constants compared: src/allowed-values.ts, and the event type lists the event catalog derives. */
const allowed = { ...constants, eventTypes, deliveryEventTypes, notificationTypes };

type Source = { column: string } | { fn: string };
/** Each TypeScript constant and every SQL place that defines its list. */
const LISTS: Array<{ name: keyof typeof allowed; sources: Source[] }> = [
  { name: 'industries', sources: [{ column: 'app.locations.industry' }] },
  { name: 'scopes', sources: [{ fn: 'app.known_scopes()' }] },
  { name: 'eventTypes', sources: [{ fn: 'app.event_types()' }] },
  { name: 'deliveryEventTypes', sources: [{ column: 'app.events.type' }] },
  { name: 'operationalNotificationTypes', sources: [{ fn: 'app.operational_notification_types()' }] },
  { name: 'notificationTypes', sources: [{ fn: 'app.notification_types()' }] },
  { name: 'notificationChannels', sources: [{ fn: 'app.notification_channels()' }, { column: 'app.notifications.channel' }] },
  { name: 'notificationStatuses', sources: [{ column: 'app.notifications.status' }, { column: 'app.notification_log.status' }] },
  { name: 'notificationProviders', sources: [{ column: 'app.notifications.provider' }] },
  { name: 'callOutcomes', sources: [{ column: 'app.calls.outcome' }] },
  { name: 'callDirections', sources: [{ column: 'app.calls.direction' }] },
  { name: 'leadStatuses', sources: [{ column: 'app.leads.status' }] },
  { name: 'bookingStatuses', sources: [{ column: 'app.bookings.status' }] },
  { name: 'bookingSources', sources: [{ column: 'app.bookings.source' }] },
  { name: 'transferStatuses', sources: [{ column: 'app.call_transfers.status' }] },
  { name: 'memberRoles', sources: [{ column: 'app.members.role' }] },
  { name: 'forwardingModes', sources: [{ column: 'app.call_forwarding.mode' }] },
  { name: 'oauthProviders', sources: [{ fn: 'app.oauth_providers()' }] },
  { name: 'integrationProviders', sources: [{ column: 'app.integrations.provider' }] },
  { name: 'integrationStatuses', sources: [{ column: 'app.integrations.status' }] },
  { name: 'redirectProviders', sources: [{ column: 'app.integration_oauth_states.provider' }] },
  { name: 'syncRecordTypes', sources: [{ column: 'app.integration_syncs.record_type' }] },
  { name: 'syncActions', sources: [{ column: 'app.integration_syncs.action' }] },
  { name: 'syncStatuses', sources: [{ column: 'app.integration_syncs.status' }] },
  { name: 'deliveryStatuses', sources: [{ column: 'app.webhook_deliveries.status' }] },
  { name: 'erasureStatuses', sources: [{ column: 'app.erasures.status' }] },
  { name: 'erasureSources', sources: [{ column: 'app.erasures.source' }] },
  { name: 'platformDeletionStatuses', sources: [{ column: 'app.erasure_platform_calls.status' }] },
];

/** Enumerated columns TypeScript never names a value of (so there is nothing to mirror). */
const SQL_ONLY: Record<string, string> = {
  'app.calls.platform_status': 'where the voice platform is with a call (started, ended, analyzed, rejected); never in the API',
};

const label = (s: Source) => ('fn' in s ? s.fn : `CHECK on ${s.column}`);

function differences(name: string, source: string, ts: readonly string[], sql: string[]): string | null {
  const missing = sql.filter((v) => !ts.includes(v));
  const extra = ts.filter((v) => !sql.includes(v));
  const dupes = ts.filter((v, i) => ts.indexOf(v) !== i);
  if (!missing.length && !extra.length && !dupes.length) return null;
  return `allowed-values list "${name}" differs from SQL ${source}:`
    + (missing.length ? ` missing in TypeScript [${missing.join(', ')}];` : '')
    + (extra.length ? ` not allowed by SQL [${extra.join(', ')}];` : '')
    + (dupes.length ? ` repeated in TypeScript [${dupes.join(', ')}];` : '');
}

test.each(LISTS)('$name equals its SQL source', async ({ name, sources }) => {
  const ts = allowed[name] as readonly string[];
  expect(Array.isArray(ts)).toBe(true);
  const problems: string[] = [];
  for (const s of sources) {
    const sql = 'fn' in s ? await evaluate(s.fn) : await columnValues(s.column);
    const d = differences(name, label(s), ts, sql);
    if (d) problems.push(d);
  }
  expect(problems).toEqual([]);
});

test('webhook-style providers are the integration providers that are not OAuth ones', async () => {
  const oauth = await evaluate('app.oauth_providers()');
  const all = await columnValues('app.integrations.provider');
  const d = differences('webhookProviders', 'CHECK on app.integrations.provider less app.oauth_providers()',
    allowed.webhookProviders, all.filter((p) => !oauth.includes(p)));
  expect(d).toBeNull();
});

test('every enumerating CHECK in SQL is mirrored above or named as SQL-only', async () => {
  const covered = new Set(LISTS.flatMap((l) => l.sources.flatMap((s) => ('column' in s ? [s.column] : []))));
  const unlisted = (await enumeratedChecks()).map((k) => k.column).filter((col) => !covered.has(col) && !(col in SQL_ONLY));
  expect(unlisted).toEqual([]);
});

test('the comparison is not vacuous: a changed list is reported with its name and values', () => {
  expect(differences('leadStatuses', 'CHECK on app.leads.status', ['new', 'won'], ['new', 'lost']))
    .toBe('allowed-values list "leadStatuses" differs from SQL CHECK on app.leads.status: missing in TypeScript [lost]; not allowed by SQL [won];');
});
