/**
 * Operator CLI: `npm run -s cli -- <command>`. Session-only operations (docs/api-contract.md §4).
 * stdout carries exactly one JSON value; logs and progress go to stderr. Errors print
 * `{ "error": { code, message, details } }` on stdout and exit non-zero.
 */
import '../node-version.js';
import { writeSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import type pg from 'pg';
import { mintToken } from '../auth/tokens.js';
import { loadConfig } from '../config.js';
import { resolveDatabase } from '../db/connection.js';
import { migrateDatabase } from '../db/migrate.js';
import { callFn, createOwnerPool, endPool, type StatementBound } from '../db/pools.js';
import { ApiError } from '../http/errors.js';
import { industries, memberRoles } from '../allowed-values.js';
import { e164, timezone } from '../http/schemas.js';
import { createLogger } from '../log.js';
import { registerDemoCommands } from './demo-seed.js';
import { exitWithError } from './errors.js';
import { registerErasureCommands } from './erasure.js';
import { registerStaffCommands } from './staff.js';

const ALL = 'all';

function fail(err: unknown): never {
  if (err instanceof CommanderError) exitWithError(err, new ApiError(400, 'validation_error', err.message.replace(/^error: /, ''), {}));
  exitWithError(err);
}

function parseWith<T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } } }, name: string, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ApiError(400, 'validation_error', `--${name}: ${r.error.issues[0].message}`, { issues: [{ path: name, message: r.error.issues[0].message }] });
  return r.data;
}

/**
 * How long a CLI statement may run: cancelled by the server at 60 s, given up on 5 s later
 * (src/db/pools.ts); `demo seed` gives its batches longer (src/cli/demo-seed.ts).
 */
const CLI_BOUND: StatementBound = { statementTimeoutMs: 60_000 };

/** `fn` on an owner pool of `connections` connections, its result printed as JSON. */
async function withDb<T>(fn: (pool: pg.Pool) => Promise<T>, connections = 2, bound = CLI_BOUND): Promise<void> {
  const cfg = loadConfig();
  const log = createLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL, 2);
  const db = await resolveDatabase(cfg, log);
  const pool = createOwnerPool(db.url, connections, 'switchboard-cli', bound);
  try {
    await migrateDatabase(db.url, log);
    const out = await fn(pool);
    writeSync(1, `${JSON.stringify(out, null, 2)}\n`);
  } finally {
    await endPool(pool);
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

registerDemoCommands(program, withDb, parseWith);
registerErasureCommands(program, withDb, parseWith);
registerStaffCommands(program, withDb);

/**
 * The command a command line stops at when it names no subcommand (`switchboard`, `switchboard key`):
 * its path and the subcommands it offers.
 */
function missingCommand(args: string[]): ApiError {
  let at: Command = program;
  const path: string[] = [];
  for (const arg of args) {
    const next = at.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!next) break;
    at = next;
    path.push(arg);
  }
  const commands = at.commands.map((c) => c.name());
  return new ApiError(400, 'validation_error', `Missing command: ${[program.name(), ...path, '<command>'].join(' ')}, one of ${commands.join(', ')} (usage on stderr)`,
    { issues: [{ path: 'command', message: 'Required' }], commands });
}

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError && (err.code === 'commander.helpDisplayed' || err.code === 'commander.version')) process.exit(0);
  // `commander.help` is both the `help [command]` command (exit code 0: the usage was asked for)
  // and the usage Commander shows when a command with subcommands is given none (exit code 1).
  if (err instanceof CommanderError && err.code === 'commander.help') {
    if (err.exitCode === 0) process.exit(0);
    fail(missingCommand(process.argv.slice(2)));
  }
  fail(err);
}
