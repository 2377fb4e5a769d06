/**
 * The operator path: `npm start` on an empty DATA_DIR boots an embedded PostgreSQL, applies the
 * migrations and serves the API, the worker and the staff GraphQL (admin port only); SIGTERM
 * stops everything cleanly; a second start reuses the data. With DATABASE_URL no cluster starts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase } from '../support/db.js';
import { freePort, runCli, startMain } from '../support/spawn.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-start-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

async function gql(port: number, query: string) {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

test('fresh start on the embedded cluster, CLI alongside, graceful stop, restart reuses data', async () => {
  const [port, adminPort] = [await freePort(), await freePort()];
  const env = { DATA_DIR: dataDir, PORT: String(port), ADMIN_PORT: String(adminPort), HOST: '127.0.0.1' };

  const first = await startMain(env);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION'))).toBe(true);
  expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  expect(first.output()).toMatch(/worker started/);

  // Staff GraphQL answers on the admin port, with pg-aggregates, and is absent from the public port.
  const staff = await gql(adminPort, '{ allLocations { totalCount aggregates { distinctCount { slug } } } }');
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
  const staffAfter = await gql(adminPort, '{ allLocations { nodes { slug } } }');
  expect(staffAfter.body.data.allLocations.nodes).toEqual([{ slug: 'acme' }]);

  first.child.kill('SIGTERM');
  expect(await first.exited).toBe(0);
  expect(first.output()).toMatch(/embedded postgres stopped/);
  expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);

  const second = await startMain(env);
  expect(second.output()).not.toMatch(/initialising embedded postgres/);
  const again = await gql(adminPort, '{ allLocations { nodes { slug } } }');
  expect(again.body.data.allLocations.nodes).toEqual([{ slug: 'acme' }]);
  second.child.kill('SIGINT');
  expect(await second.exited).toBe(0);
}, 180_000);

test('with DATABASE_URL, api and worker halves run separately and no embedded cluster starts', async () => {
  const db = await createTestDatabase();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-ext-'));
  try {
    const port = await freePort();
    const env = { DATA_DIR: dir, DATABASE_URL: db.url, PORT: String(port), ADMIN_PORT: String(await freePort()), HOST: '127.0.0.1' };
    const api = await startMain(env, ['api']);
    const worker = await startMain({ ...env, PORT: '' }, ['worker']);
    expect(fs.existsSync(path.join(dir, 'pg'))).toBe(false);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(api.output()).not.toMatch(/worker started/);
    api.child.kill('SIGTERM');
    worker.child.kill('SIGTERM');
    expect(await api.exited).toBe(0);
    expect(await worker.exited).toBe(0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await db.drop();
  }
}, 120_000);
