import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { runCli } from '../support/spawn.js';
import { hashToken } from '../../src/auth/tokens.js';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

let db: TestDatabase;
let env: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, DATA_DIR: '/nonexistent-not-used' };
});
afterAll(() => db.drop());

test('location create / list print one JSON value on stdout', async () => {
  const created = await runCli(
    ['location', 'create', '--name', 'Bay Plumbing', '--slug', 'bay-plumbing', '--timezone', 'America/Los_Angeles',
     '--service-phone', '(415) 555-0100', '--owner-cell', '+1 415 555 0111', '--industry', 'plumbing'],
    env,
  );
  expect(created.code).toBe(0);
  expect(created.json).toMatchObject({
    slug: 'bay-plumbing', timezone: 'America/Los_Angeles', service_phone: '+14155550100', owner_cell: '+14155550111', industry: 'plumbing',
  });
  const list = await runCli(['location', 'list'], env);
  expect(list.code).toBe(0);
  expect(list.json.map((l: { slug: string }) => l.slug)).toContain('bay-plumbing');
});

test('key create shows the token once; list and revoke never show it', async () => {
  const created = await runCli(['key', 'create', '--location', 'bay-plumbing', '--label', 'CRM', '--scopes', 'calls:read,leads:read'], env);
  expect(created.code).toBe(0);
  const { token, id, key_prefix, scopes } = created.json;
  expect(token).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(key_prefix).toBe(token.slice(0, 8));
  expect(scopes).toEqual(['calls:read', 'leads:read']);

  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  const { rows } = await c.query('select token_hash from app.api_keys where id = $1', [id]);
  await c.end();
  expect(rows[0].token_hash).toBe(hashToken(token));

  const list = await runCli(['key', 'list', '--location', 'bay-plumbing'], env);
  expect(list.code).toBe(0);
  expect(list.stdout).not.toContain(token);
  expect(list.json[0]).not.toHaveProperty('token_hash');

  const revoked = await runCli(['key', 'revoke', '--location', 'bay-plumbing', '--id', id], env);
  expect(revoked.code).toBe(0);
  expect(revoked.json.revoked_at).toMatch(/Z$/);

  const all = await runCli(['key', 'create', '--location', 'bay-plumbing', '--label', 'Admin', '--scopes', 'all'], env);
  expect(all.json.scopes).toContain('transcripts:read');
  expect(all.json.scopes).toEqual(expect.arrayContaining(['privacy:read', 'privacy:write']));
  expect(all.json.scopes).toHaveLength(25);
});

test('no command, or a command that needs a subcommand without one: a missing-command error on stdout, exit 1; --help exits 0', async () => {
  const none = await runCli([], env);
  expect([none.code, none.json?.error?.code, none.json?.error?.message]).toEqual([1, 'validation_error', expect.stringMatching(/^Missing command: switchboard <command>/)]);
  expect(none.json.error.details.commands).toEqual(expect.arrayContaining(['location', 'key', 'member']));
  expect(none.stderr).toContain('Usage:');
  const key = await runCli(['key'], env);
  expect([key.code, key.json?.error?.message]).toEqual([1, expect.stringMatching(/^Missing command: switchboard key <command>/)]);
  expect(key.json.error.details.commands).toEqual(['create', 'list', 'revoke']);
  const help = await runCli(['--help'], env);
  expect([help.code, help.stdout]).toEqual([0, '']);
});

test('the help command prints the usage on stderr and exits 0, for the program and for a subcommand', async () => {
  // Setup: the usage lists `help [command]` (docs/api-contract.md §4: help exits 0).
  // Action
  const top = await runCli(['help'], env);
  const sub = await runCli(['staff', 'help', 'create'], env);
  // Assertions
  expect([top.code, top.stdout]).toEqual([0, '']);
  expect(top.stderr).toMatch(/^Usage: switchboard \[options\] \[command\]/);
  expect([sub.code, sub.stdout]).toEqual([0, '']);
  expect(sub.stderr).toMatch(/^Usage: switchboard staff create \[options\]/);
});

test('errors print the envelope on stdout and exit non-zero', async () => {
  const dup = await runCli(['location', 'create', '--name', 'Again', '--slug', 'bay-plumbing'], env);
  expect(dup.code).not.toBe(0);
  expect(dup.json.error.code).toBe('conflict');

  const missing = await runCli(['key', 'list', '--location', 'no-such-place'], env);
  expect(missing.code).not.toBe(0);
  expect(missing.json).toEqual({ error: { code: 'not_found', message: expect.any(String), details: {} } });

  const badScope = await runCli(['key', 'create', '--location', 'bay-plumbing', '--label', 'x', '--scopes', 'root:all'], env);
  expect(badScope.json.error.code).toBe('validation_error');

  const badPhone = await runCli(['location', 'create', '--name', 'X', '--slug', 'x-co', '--service-phone', '12'], env);
  expect(badPhone.json.error.code).toBe('validation_error');

  const usage = await runCli(['location', 'create', '--name', 'No slug'], env);
  expect(usage.code).not.toBe(0);
  expect(usage.json.error.code).toBe('validation_error');
});

test('member invite and demo seed', async () => {
  const m = await runCli(['member', 'invite', '--location', 'bay-plumbing', '--email', 'owner@bay.example', '--role', 'owner'], env);
  expect(m.code).toBe(0);
  expect(m.json).toMatchObject({ email: 'owner@bay.example', role: 'owner', joined_at: null });

  const seed = await runCli(['demo', 'seed', '--location', 'bay-plumbing', '--calls', '300'], env);
  expect(seed.code).toBe(0);
  expect(seed.json.calls).toBe(300);
  expect(seed.json.foreign_key_checks).toBe('per_batch');
  expect(seed.json.leads).toBeGreaterThan(0);
  expect(seed.json.bookings).toBeGreaterThan(0);
  expect(seed.stderr).toMatch(/seeding calls/);
});

test('demo seed --jobs runs its batches side by side: every day covered, numbers disjoint, a rerun continues them', async () => {
  await runCli(['location', 'create', '--name', 'Jobs HVAC', '--slug', 'jobs-hvac', '--timezone', 'America/Chicago'], env);
  // 10 days of 60 calls in batches of at most 100: two or more batches per run, three at a time.
  // Each run counts its 10 days back from Chicago's date at that moment: runs on both sides of
  // Chicago's midnight cover 11 dates between them, the first run's oldest beyond 10 days of now.
  const chicagoDate = () => new Date().toLocaleDateString('en-CA', { timeZone: 'America/Chicago' });
  const dateBefore = chicagoDate();
  const run = () => runCli(['demo', 'seed', '--location', 'jobs-hvac', '--calls', '600', '--days', '10', '--batch', '100', '--jobs', '3'], env);
  const first = await run();
  expect(first.code).toBe(0);
  expect(first.json).toMatchObject({ calls: 600, customers: 420 });
  const second = await run();
  expect(second.code).toBe(0);
  expect(second.json).toMatchObject({ calls: 1200, customers: 840 });
  // Midnight passed somewhere in the two runs (a batch's own now() on either side of it).
  const crossed = chicagoDate() !== dateBefore;
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const { rows: [r] } = await c.query(
      `select count(distinct cu.phone)::int phones, min(cu.phone) lo, max(cu.phone) hi,
              (select count(*)::int from app.calls k where k.location_id = l.id and k.started_at < now() - interval '10 days') older,
              (select count(distinct (k.started_at at time zone l.timezone)::date)::int from app.calls k where k.location_id = l.id) days,
              (select count(*)::int from app.customers x where x.location_id = l.id and x.call_count = 0) idle
         from app.locations l join app.customers cu on cu.location_id = l.id
        where l.slug = 'jobs-hvac' group by l.id`);
    // 840 customers with 840 consecutive numbers, each with calls, the calls within the last 10 days.
    expect(r).toMatchObject({ phones: 840, lo: '+12022000000', hi: '+12022000839', idle: 0 });
    expect(crossed ? [10, 11] : [10]).toContain(r.days);
    if (!crossed) expect(r.older).toBe(0);
  } finally {
    await c.end();
  }
  // The numbers are valid ones (an exchange starts with 2-9): the erasure runbook works on a demo caller.
  const erased = await runCli(['erasure', 'create', '--location', 'jobs-hvac', '--phone', '+12022000839'], env);
  expect([erased.code, erased.json?.matched?.customers]).toEqual([0, 1]);
});

test('demo seed as a role that may not set session_replication_role checks each row and says so; granted SET on it, per batch', async () => {
  const role = `seed_op_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    // An operator's role on an external database: owns the schema (here: a member of the role that
    // migrated it), is not a superuser.
    await admin.query(`create role ${role} login password 'seed-op' in role ${new URL(db.url).username}`);
    const url = new URL(db.url);
    url.username = role;
    url.password = 'seed-op';
    const as = { ...env, DATABASE_URL: url.toString() };
    const seed = () => runCli(['demo', 'seed', '--location', 'jobs-hvac', '--calls', '200', '--days', '5'], as);
    const checked = await seed();
    expect(checked.code).toBe(0);
    expect(checked.json).toMatchObject({ foreign_key_checks: 'per_row' });
    expect(checked.stderr).toMatch(/foreign keys checked per row: this role may not set session_replication_role/);
    await admin.query(`grant set on parameter session_replication_role to ${role}`);
    const fast = await seed();
    expect(fast.code).toBe(0);
    expect(fast.json).toMatchObject({ foreign_key_checks: 'per_batch', calls: checked.json.calls + 200 });
    expect(fast.stderr).not.toMatch(/checked per row/);
  } finally {
    await admin.query(`revoke set on parameter session_replication_role from ${role}`).catch(() => undefined);
    await admin.query(`drop role if exists ${role}`);
    await admin.end();
  }
});

test('demo seed refuses a bad --jobs or --batch before touching the database', async () => {
  for (const args of [['--jobs', '0'], ['--jobs', 'two'], ['--batch', '0']]) {
    const r = await runCli(['demo', 'seed', '--location', 'jobs-hvac', '--calls', '10', ...args], env);
    expect(r.code).not.toBe(0);
    expect(r.json.error.code).toBe('validation_error');
    expect(r.json.error.message).toMatch(new RegExp(`^${args[0]}`));
  }
});

test('erasure create: the same erasure as the API, printed as the record (identifier never shown)', async () => {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const { rows: [loc] } = await c.query("select id from app.locations where slug = 'bay-plumbing'");
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc.id]);
    await c.query("insert into app.leads (location_id, name, phone, email) values ($1, 'Kim Cli', '+14155550123', 'kim@example.com')", [loc.id]);
    await c.query('commit');
    const out = await runCli(['erasure', 'create', '--location', 'bay-plumbing', '--phone', '(415) 555-0123'], env);
    expect(out.code).toBe(0);
    expect(out.json).toMatchObject({ location_id: loc.id, source: 'cli', status: 'completed', identifier_kinds: ['phone'], matched: { leads: 1, events: 1 } });
    expect(out.stdout).not.toContain('555-0123');
    expect(out.stdout).not.toContain('5550123');
    const { rows: [lead] } = await c.query("select name, phone, email from app.leads where location_id = $1 and anonymised_at is not null", [loc.id]);
    expect(lead).toEqual({ name: null, phone: null, email: null });
    const none = await runCli(['erasure', 'create', '--location', 'bay-plumbing'], env);
    expect(none.code).not.toBe(0);
    expect(none.json.error.code).toBe('validation_error');
    const bad = await runCli(['erasure', 'create', '--location', 'bay-plumbing', '--email', 'not-an-email'], env);
    expect(bad.json.error).toMatchObject({ code: 'validation_error', details: { issues: [{ path: 'email' }] } });
    const unknown = await runCli(['erasure', 'create', '--location', 'bay-plumbing', '--customer', '00000000-0000-4000-8000-0000000000ff'], env);
    expect(unknown.json.error.code).toBe('not_found');
  } finally {
    await c.end();
  }
});
