/** Database down: health stays up, readiness and API requests answer 503 `unavailable`. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApiPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { request, testConfig, testLog } from '../support/harness.js';
import { freePort } from '../support/spawn.js';
import { randomUUID } from 'node:crypto';

let server: Server;
let base: string;
let pools: ReturnType<typeof createApiPool>[];

beforeAll(async () => {
  // Nothing listens on this port: every connection attempt is refused.
  const dead = `postgres://postgres:x@127.0.0.1:${await freePort()}/switchboard`;
  pools = [createApiPool(dead, 2), createApiPool(dead, 2)];
  const app = createApp({ cfg: testConfig(), log: testLog, apiPool: pools[0], ownerPool: pools[1] });
  server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await Promise.all(pools.map((p) => p.end()));
});

test('healthz 200, readyz 503', async () => {
  expect((await request(base, 'GET', '/healthz')).status).toBe(200);
  const ready = await request(base, 'GET', '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body.error.code).toBe('unavailable');
});

test('an API request gets 503 unavailable in the envelope, without internals', async () => {
  const res = await request(base, 'GET', '/api/v1/me', { token: randomUUID() });
  expect(res.status).toBe(503);
  expect(res.body).toEqual({ error: { code: 'unavailable', message: expect.any(String), details: {} } });
  expect(JSON.stringify(res.body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres/);
  expect(res.headers.get('retry-after')).toBe('5');
});
