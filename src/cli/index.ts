/**
 * Operator CLI: `npm run -s cli -- <command>`. Session-only operations (docs/api-contract.md §4).
 * stdout carries exactly one JSON value; logs and progress go to stderr. Errors print
 * `{ "error": { code, message, details } }` on stdout and exit non-zero.
 */
import { writeSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import type pg from 'pg';
import { mintToken } from '../auth/tokens.js';
import { loadConfig } from '../config.js';
import { resolveDatabase } from '../db/connection.js';
import { migrateDatabase } from '../db/migrate.js';
import { callFn, createOwnerPool } from '../db/pools.js';
import { ApiError, toApiError } from '../http/errors.js';
import { industries, memberRoles } from '../allowed-values.js';
import { e164, timezone } from '../http/schemas.js';
import { createLogger } from '../log.js';
import { registerErasureCommands } from './erasure.js';
import { registerStaffCommands } from './staff.js';

const ALL = 'all';

function fail(err: unknown): never {
  const e = err instanceof CommanderError
    ? new ApiError(400, 'validation_error', err.message.replace(/^error: /, ''), {})
    : toApiError(err);
  const message = e.status === 500 && err instanceof Error ? err.message : e.message;
  // Synchronous: process.exit() must not cut a piped stdout short.
  writeSync(1, `${JSON.stringify({ error: { code: e.code, message, details: e.details } })}\n`);
  process.exit(1);
}

function parseWith<T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } } }, name: string, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ApiError(400, 'validation_error', `--${name}: ${r.error.issues[0].message}`, { issues: [{ path: name, message: r.error.issues[0].message }] });
  return r.data;
}

async function withDb<T>(fn: (pool: pg.Pool) => Promise<T>): Promise<void> {
  const cfg = loadConfig();
  const log = createLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL, 2);
  const db = await resolveDatabase(cfg, log);
  const pool = createOwnerPool(db.url, 2, 'switchboard-cli');
  try {
    await migrateDatabase(db.url, log);
    const out = await fn(pool);
    writeSync(1, `${JSON.stringify(out, null, 2)}\n`);
  } finally {
    await pool.end();
    await db.stop();
  }
}

const program = new Command('switchboard')
  .description('Switchboard operator CLI (prints JSON on stdout)')
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stderr.write(s) });

const location = program.command('location').description('Locations');
location
  .command('create')
  .requiredOption('--name <name>', 'business name')
  .requiredOption('--slug <slug>', 'URL handle (lowercase letters, digits, dashes)')
  .option('--timezone <iana>', 'IANA time zone', 'America/New_York')
  .option('--service-phone <e164>', 'number the voice agent answers')
  .option('--owner-cell <e164>', "owner's mobile for emergency SMS")
  .addOption(new Option('--industry <industry>', 'trade').choices([...industries]).default('hvac'))
  .action((o) =>
    withDb((pool) =>
      callFn(pool, 'admin.location_create', [{
        name: o.name,
        slug: o.slug,
        timezone: parseWith(timezone, 'timezone', o.timezone),
        service_phone: o.servicePhone ? parseWith(e164, 'service-phone', o.servicePhone) : null,
        owner_cell: o.ownerCell ? parseWith(e164, 'owner-cell', o.ownerCell) : null,
        industry: o.industry,
      }]),
    ),
  );
location.command('list').action(() => withDb((pool) => callFn(pool, 'admin.location_list', [])));

const key = program.command('key').description('API keys');
key
  .command('create')
  .requiredOption('--location <id-or-slug>')
  .requiredOption('--label <label>')
  .requiredOption('--scopes <list>', `comma-separated scopes, or "${ALL}"`)
  .action((o) =>
    withDb(async (pool) => {
      const scopes: string[] = o.scopes === ALL
        ? ((await pool.query('select app.known_scopes() as s')).rows[0].s as string[])
        : String(o.scopes).split(',').map((s: string) => s.trim()).filter(Boolean);
      const { token, hash, prefix } = mintToken();
      const record = await callFn<Record<string, unknown>>(pool, 'admin.key_create', [o.location, o.label, scopes, hash, prefix]);
      return { ...record, token };
    }),
  );
key.command('list').requiredOption('--location <id-or-slug>').action((o) => withDb((pool) => callFn(pool, 'admin.key_list', [o.location])));
key
  .command('revoke')
  .requiredOption('--location <id-or-slug>')
  .requiredOption('--id <key-id>')
  .action((o) =>
    withDb((pool) => {
      if (!/^[0-9a-f-]{36}$/i.test(o.id)) throw new ApiError(404, 'not_found', 'API key not found');
      return callFn(pool, 'admin.key_revoke', [o.location, o.id]);
    }),
  );

program
  .command('member')
  .description('Members')
  .command('invite')
  .requiredOption('--location <id-or-slug>')
  .requiredOption('--email <email>')
  .option('--name <name>')
  .addOption(new Option('--role <role>').choices([...memberRoles]).default('member'))
  .action((o) => withDb((pool) => callFn(pool, 'admin.member_invite', [o.location, o.email, o.role, o.name ?? null])));

program
  .command('demo')
  .description('Sample data')
  .command('seed')
  .requiredOption('--location <id-or-slug>')
  .option('--calls <n>', 'number of calls', '500')
  .option('--days <n>', 'spread over the last N days', '30')
  .action((o) =>
    withDb(async (pool) => {
      const calls = Number(o.calls);
      const days = Number(o.days);
      if (!Number.isInteger(calls) || calls < 1 || calls > 10_000_000) throw new ApiError(400, 'validation_error', '--calls must be an integer from 1 to 10000000');
      if (!Number.isInteger(days) || days < 1 || days > 365) throw new ApiError(400, 'validation_error', '--days must be an integer from 1 to 365');
      await callFn(pool, 'admin.demo_seed_prepare', [o.location, Math.max(1, Math.ceil(calls * 0.7))]);
      const bar = new SingleBar({ stream: process.stderr, noTTYOutput: true, notTTYSchedule: 2000, format: 'seeding calls [{bar}] {percentage}% {value}/{total} | eta {eta_formatted}' }, Presets.shades_classic);
      bar.start(calls, 0);
      const batch = 20_000;
      for (let done = 0; done < calls; done += batch) {
        const n = Math.min(batch, calls - done);
        await callFn(pool, 'admin.demo_seed_calls', [o.location, n, days]);
        bar.update(done + n);
      }
      bar.stop();
      process.stderr.write('creating leads and bookings…\n');
      const summary = await callFn(pool, 'admin.demo_seed_finish', [o.location]);
      await pool.query('analyze app.calls, app.leads, app.bookings, app.customers');
      return summary;
    }),
  );

registerErasureCommands(program, withDb, parseWith);
registerStaffCommands(program, withDb);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError && (err.code === 'commander.helpDisplayed' || err.code === 'commander.version')) process.exit(0);
  fail(err);
}
