/**
 * The operator path: `npm start` on an empty DATA_DIR boots an embedded PostgreSQL, applies the
 * migrations and serves the API, the worker and the staff GraphQL (admin port only); SIGTERM
 * stops everything cleanly; a second start reuses the data. With DATABASE_URL no cluster starts.
 * It starts from a private (0700) folder too, as root (the cluster then runs as the `postgres`
 * user, which gets traverse rights only) and as a normal user.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getAttributeSync } from '@napi-rs/xattr';
import { parentPid } from '../../src/db/backend-priority.js';
import { projectRoot } from '../../src/db/migrate.js';
import { createTestDatabase } from '../support/db.js';
import { waitFor } from '../support/harness.js';
import { expectCleanExit, startService } from '../support/service.js';
import { freePort, runCli } from '../support/spawn.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-start-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

async function gql(port: number, query: string, token?: string) {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify({ query }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

test('fresh start on the embedded cluster, CLI alongside, graceful stop, restart reuses data', async () => {
  const [port, adminPort] = [await freePort(), await freePort()];
  const env = { DATA_DIR: dataDir, PORT: String(port), ADMIN_PORT: String(adminPort), HOST: '127.0.0.1' };

  const first = await startService(env);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
  expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  expect(first.output()).toMatch(/worker started/);

  // On its own cluster the worker's connections give way to intake's (src/db/backend-priority.ts):
  // its three LISTEN connections at least run at nice 10, the cluster's own processes at 0.
  const postmaster = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const niceOf = (pid: number) => { try { return os.getPriority(pid); } catch { return null; } };
  const backends = () => fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => parentPid(pid) === postmaster);
  // The LISTEN connections open beside readiness, not before it.
  await waitFor(async () => backends().filter((pid) => niceOf(pid) === 10).length >= 3, 'the worker\'s LISTEN connections at nice 10', 10_000);
  expect(backends().filter((pid) => niceOf(pid) === 10).length).toBeGreaterThanOrEqual(3);
  expect(backends().some((pid) => niceOf(pid) === 0)).toBe(true);

  // Staff GraphQL answers on the admin port to a staff token (minted by the CLI beside the running
  // service), with pg-aggregates, refuses a request without one, and is absent from the public port.
  const member = await runCli(['staff', 'create', '--email', 'ops@example.com', '--role', 'viewer'], { DATA_DIR: dataDir });
  expect(member.code).toBe(0);
  const token = member.json.token as string;
  expect((await gql(adminPort, '{ allLocations { totalCount } }')).status).toBe(401);
  const staff = await gql(adminPort, '{ allLocations { totalCount aggregates { distinctCount { slug } } } }', token);
  expect(staff.status).toBe(200);
  expect(staff.body.data.allLocations.totalCount).toBe(0);
  const ruru = await fetch(`http://127.0.0.1:${adminPort}/`, { headers: { accept: 'text/html' } });
  expect(await ruru.text()).toMatch(/ruru/i);
  const publicGql = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }),
  });
  expect(publicGql.status).toBe(404);
  expect(((await publicGql.json()) as any).error.code).toBe('not_found');

  // The CLI attaches to the running cluster on the same DATA_DIR.
  const created = await runCli(['location', 'create', '--name', 'Acme HVAC', '--slug', 'acme'], { DATA_DIR: dataDir });
  expect(created.code).toBe(0);
  expect(created.json.slug).toBe('acme');
  const staffAfter = await gql(adminPort, '{ allLocations { nodes { slug } } }', token);
  expect(staffAfter.body.data.allLocations.nodes).toEqual([{ slug: 'acme' }]);

  first.child.kill('SIGTERM');
  await expectCleanExit(first);
  expect(first.output()).toMatch(/embedded postgres stopped/);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);

  const second = await startService(env);
  expect(second.output()).not.toMatch(/initialising embedded postgres/);
  const again = await gql(adminPort, '{ allLocations { nodes { slug } } }', token);
  expect(again.body.data.allLocations.nodes).toEqual([{ slug: 'acme' }]);
  second.child.kill('SIGINT');
  await expectCleanExit(second);
}, 180_000);

test('with DATABASE_URL, api and worker halves run separately and no embedded cluster starts', async () => {
  const db = await createTestDatabase();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-ext-'));
  try {
    const port = await freePort();
    const env = { DATA_DIR: dir, DATABASE_URL: db.url, PORT: String(port), ADMIN_PORT: String(await freePort()), HOST: '127.0.0.1' };
    const api = await startService(env, { mode: 'api' });
    const worker = await startService({ ...env, PORT: '' }, { mode: 'worker' });
    expect(fs.existsSync(path.join(dir, 'pg'))).toBe(false);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(api.output()).not.toMatch(/worker started/);
    api.child.kill('SIGTERM');
    worker.child.kill('SIGTERM');
    await expectCleanExit(api);
    await expectCleanExit(worker);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await db.drop();
  }
}, 120_000);

/** Named entries of a directory's POSIX access ACL (tag 2 = named user), or [] without one. */
function namedAclUsers(dir: string): { uid: number; perm: number }[] {
  const buf = getAttributeSync(dir, 'system.posix_acl_access');
  const out: { uid: number; perm: number }[] = [];
  for (let o = 4; buf && o < buf.length; o += 8) if (buf.readUInt16LE(o) === 2) out.push({ uid: buf.readUInt32LE(o + 4), perm: buf.readUInt16LE(o + 2) });
  return out;
}

const isRoot = process.getuid?.() === 0;

test('starts from a private (0700) folder with the default DATA_DIR, opening it to the postgres user only to traverse', async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-private-'));
  try {
    fs.chmodSync(home, 0o700);
    const port = await freePort();
    const svc = await startService({ PORT: String(port), ADMIN_PORT: String(await freePort()), HOST: '127.0.0.1' }, { cwd: home });
    expect(fs.existsSync(path.join(home, '.data', 'pg', 'PG_VERSION'))).toBe(true);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    const mode = fs.statSync(home).mode;
    expect(mode & 0o700).toBe(0o700);
    expect(mode & 0o007).toBe(0); // others: still nothing
    if (isRoot) {
      // The cluster runs as `postgres`: it got traverse (x) on the private folder, nothing more, no one else.
      const pgUid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
      expect(namedAclUsers(home)).toEqual([{ uid: pgUid, perm: 1 }]);
      expect(fs.statSync(path.join(home, '.data', 'pg')).uid).toBe(pgUid);
      expect(fs.statSync(path.join(home, '.data', 'embedded.json')).mode & 0o077).toBe(0);
    }
    svc.child.kill('SIGTERM');
    await expectCleanExit(svc);
    expect(svc.output()).toMatch(/embedded postgres stopped/);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}, 180_000);

// A normal user must be able to reach the project (node_modules) to run it at all.
const nobodyCanRunProject = isRoot && spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', projectRoot], { uid: 65534, gid: 65534 }).status === 0;
if (isRoot && !nobodyCanRunProject) console.warn(`skipping the normal-user start: uid 65534 cannot reach ${projectRoot}`);

(nobodyCanRunProject ? test : test.skip)('a normal user starts from their own private folder too (no system user, no ACL)', async () => {
  const nobody = { uid: 65534, gid: 65534 };
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-user-'));
  try {
    fs.chownSync(home, nobody.uid, nobody.gid);
    fs.chmodSync(home, 0o700);
    const port = await freePort();
    const svc = await startService({ PORT: String(port), ADMIN_PORT: String(await freePort()), HOST: '127.0.0.1' }, { cwd: home, user: nobody });
    expect(fs.statSync(path.join(home, '.data', 'pg')).uid).toBe(nobody.uid);
    expect(namedAclUsers(home)).toEqual([]);
    expect(fs.existsSync(path.join(home, '.data', 'pg-runtime'))).toBe(false);
    svc.child.kill('SIGTERM');
    await expectCleanExit(svc);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}, 180_000);
