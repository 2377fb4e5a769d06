/**
 * The privacy endpoints log no caller data: the identifiers travel in a query string (export) or a
 * body (erasure), and neither reaches a log line; the access line keeps the path only.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { redactPaths } from '../../src/log.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { createLocation, mintKey, request, testConfig } from '../support/harness.js';

const raw: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    raw.push(String(chunk));
    cb();
  },
});
const log = pino({ level: 'trace', redact: { paths: redactPaths, censor: '[redacted]' } }, sink);

let db: TestDatabase;
let server: Server;
let base: string;
let owner: ReturnType<typeof createOwnerPool>;
let apiPool: ReturnType<typeof createApiPool>;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = createOwnerPool(db.url, 2);
  apiPool = createApiPool(db.url, 2);
  server = createServer(createApp({ cfg: testConfig({ DATABASE_URL: db.url }), log, apiPool, ownerPool: owner }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  await apiPool.end();
  await owner.end();
  await db.drop();
});

test('export and erasure requests, good and bad, leave no identifier in any log line', async () => {
  const loc = await createLocation(owner);
  const { token } = await mintKey(owner, loc.id);
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true)", [loc.id]);
    await c.query("insert into app.leads (location_id, name, phone, email) values ($1, 'Quinn Logless', '+15125550155', 'quinn@example.com')", [loc.id]);
    await c.query('commit');
  } finally {
    c.release();
  }
  const L = `/api/v1/locations/${loc.id}`;
  expect((await request(base, 'GET', `${L}/caller-data?phone=%2B15125550155`, { token })).status).toBe(200);
  expect((await request(base, 'GET', `${L}/caller-data?email=quinn%40example.com`, { token })).status).toBe(200);
  expect((await request(base, 'GET', `${L}/caller-data?phone=5550155x`, { token })).status).toBe(400);
  expect((await request(base, 'POST', `${L}/erasures`, { token, body: { email: 'quinn@example' } })).status).toBe(400);
  expect((await request(base, 'POST', `${L}/erasures`, { token, body: { phone: '(512) 555-0155', email: 'quinn@example.com' } })).status).toBe(202);
  await new Promise((r) => setTimeout(r, 50));
  const text = raw.join('');
  expect(text).toContain(`${L}/caller-data`);
  for (const s of ['5550155', 'quinn', 'Quinn', 'Logless']) expect({ s, found: text.includes(s) }).toEqual({ s, found: false });
});
