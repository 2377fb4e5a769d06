/**
 * The staff CLI (docs/staff.md "Tokens"): `staff create` prints `{ id, email, role, token }` once
 * and stores only the token's SHA-256; `staff list` shows no token or hash; `staff revoke` answers
 * the member with `revoked_at`; `staff audit` filters by member and time; bad input is a clear
 * error on stdout with a non-zero exit.
 */
import pg from 'pg';
import { hashToken } from '../../src/auth/tokens.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { runCli } from '../support/spawn.js';
import { gqlAt, UNPACED } from './support.js';
import { startStaffGraphql, type StaffServer } from '../../src/admin/graphql.js';
import { testLog } from '../support/harness.js';

let db: TestDatabase;
let c: pg.Client;
let env: Record<string, string>;
beforeAll(async () => {
  db = await createTestDatabase();
  c = new pg.Client({ connectionString: db.url });
  await c.connect();
  env = { DATABASE_URL: db.url };
});
afterAll(async () => {
  await c.end();
  await db.drop();
});

test('create, list, revoke: the token shown once, stored as SHA-256 only', async () => {
  const created = await runCli(['staff', 'create', '--email', 'Dana@Staff.example.net', '--role', 'operator'], env);
  expect(created.code).toBe(0);
  expect(Object.keys(created.json).sort()).toEqual(['email', 'id', 'role', 'token']);
  expect(created.json).toEqual({ id: expect.any(String), email: 'dana@staff.example.net', role: 'operator', token: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/) });
  const { token, id } = created.json;
  const stored = (await c.query('select * from staff.members where id = $1', [id])).rows[0];
  expect(stored.token_hash).toBe(hashToken(token));
  expect(JSON.stringify(stored)).not.toContain(token);

  const list = await runCli(['staff', 'list'], env);
  expect(list.code).toBe(0);
  expect(list.json).toEqual([{ id, email: 'dana@staff.example.net', role: 'operator', created_at: expect.stringMatching(/Z$/), revoked_at: null }]);
  expect(list.stdout).not.toContain(token);
  expect(list.stdout).not.toContain(stored.token_hash);

  const revoked = await runCli(['staff', 'revoke', '--id', id], env);
  expect(revoked.code).toBe(0);
  expect(revoked.json).toEqual({ id, email: 'dana@staff.example.net', role: 'operator', created_at: list.json[0].created_at, revoked_at: expect.stringMatching(/Z$/) });
  // Idempotent: the first revocation time stays.
  const again = await runCli(['staff', 'revoke', '--id', id], env);
  expect(again.json.revoked_at).toBe(revoked.json.revoked_at);
});

test('bad input: a clear error on stdout, exit 1, nothing stored', async () => {
  const before = (await c.query('select count(*)::int as n from staff.members')).rows[0].n;
  const role = await runCli(['staff', 'create', '--email', 'x@staff.example.net', '--role', 'root'], env);
  expect(role.code).toBe(1);
  expect(role.json.error.code).toBe('validation_error');
  expect(role.json.error.message).toMatch(/--role/);
  const email = await runCli(['staff', 'create', '--email', 'not-an-email', '--role', 'viewer'], env);
  expect(email.code).toBe(1);
  expect(email.json.error).toMatchObject({ code: 'validation_error', message: '--email: must be an e-mail address' });
  const missing = await runCli(['staff', 'revoke', '--id', '7d0c4a5e-43f5-4b1a-8d34-0d5b1b2ffb11'], env);
  expect(missing.code).toBe(1);
  expect(missing.json.error).toMatchObject({ code: 'not_found', message: 'Staff member not found' });
  const since = await runCli(['staff', 'audit', '--since', 'yesterday-ish'], env);
  expect(since.json.error.code).toBe('validation_error');
  expect((await c.query('select count(*)::int as n from staff.members')).rows[0].n).toBe(before);
});

test('audit: every request of a member, filtered by member and time, without values', async () => {
  const a = (await runCli(['staff', 'create', '--email', 'a@staff.example.net', '--role', 'admin'], env)).json;
  const b = (await runCli(['staff', 'create', '--email', 'b@staff.example.net', '--role', 'viewer'], env)).json;
  let staff: StaffServer | undefined;
  try {
    staff = await startStaffGraphql(db.url, '127.0.0.1', 0, { log: testLog, limits: UNPACED });
    await gqlAt(staff.url, a.token, 'query One { allLocations { totalCount } }');
    await gqlAt(staff.url, b.token, 'query Two($slug: String!) { locationBySlug(slug: $slug) { name } }', { slug: 'secret-slug-value' });
    await staff.flushAudit();
  } finally {
    await staff?.close();
  }
  const all = await runCli(['staff', 'audit'], env);
  expect(all.code).toBe(0);
  expect(all.json.map((r: { operation_name: string }) => r.operation_name)).toEqual(['Two', 'One']);
  expect(all.stdout).not.toContain('secret-slug-value');
  const onlyB = await runCli(['staff', 'audit', '--member', b.id], env);
  expect(onlyB.json).toEqual([expect.objectContaining({ member_id: b.id, email: 'b@staff.example.net', role: 'viewer', operation_name: 'Two', root_fields: ['locationBySlug'], outcome: 'ok' })]);
  const future = await runCli(['staff', 'audit', '--since', new Date(Date.now() + 60_000).toISOString()], env);
  expect(future.json).toEqual([]);
}, 90_000);
